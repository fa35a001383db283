"""The mirror's share of a batch, computed on the executors: per row change the row state it leaves.

An insert or update upserts its after image; a delete, and an update that moves the primary key,
deletes the before image's key (ordered just before the update's upsert). Each chunk of a task keeps
only the last candidate per key (by seq, row index, sub-order): a row that is not last in its chunk
cannot be last in the batch, so the driver's final per-key reduction and the MERGE see fewer, flat
rows instead of every nested change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..decode.lake_types import arrow_type, quote
from ..runtime.errors import LandError

if TYPE_CHECKING:
    from .evolution import SchemaGroup

DELETED, SEQ, ROW_INDEX, SUB, COMMIT_TS = ("_binlake_deleted", "_binlake_seq", "_binlake_row_index", "_binlake_sub",
                                           "_binlake_commit_ts")
CANDIDATE_META = [(DELETED, pa.bool_(), "boolean"), (SEQ, pa.binary(), "binary"), (ROW_INDEX, pa.int32(), "int"),
                  (SUB, pa.int32(), "int"), (COMMIT_TS, pa.timestamp("us", tz="UTC"), "timestamp")]
ORDER = [SEQ, ROW_INDEX, SUB]


def candidates_ddl(columns: list[tuple[str, str]]) -> str:
    return ", ".join([f"{quote(n)} {t}" for n, t in columns] + [f"`{n}` {d}" for n, _, d in CANDIDATE_META])


def candidate_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    image = [pa.field(n, arrow_type(t)) for n, t in columns]
    return pa.schema([*image, *[pa.field(n, t) for n, t, _ in CANDIDATE_META]])


def mirror_candidates(typed: pa.RecordBatch, pk: list[str], schema: pa.Schema) -> pa.Table:
    """One chunk of typed row changes (typed.typed_batches) -> its candidate mirror rows, the last per key."""
    names = schema.names[: -len(CANDIDATE_META)]
    return last_per_key(_candidates(typed, names, pk, schema), pk)


def _candidates(typed: pa.RecordBatch, names: list[str], pk: list[str], schema: pa.Schema) -> pa.Table:
    before, after = typed.column("before"), typed.column("after")
    rows = len(typed)
    image_after = after.flatten()  # children with the struct's own nulls applied
    head = [typed.column(c) for c in ("seq", "row_index", "commit_ts")]

    def part(mask: pa.Array | None, image: list[pa.Array], is_delete: bool) -> pa.Table:
        """The candidates of the rows ``mask`` picks (None: every row)."""
        n = rows if mask is None else pc.sum(mask).as_py() or 0
        values = [pa.nulls(n, image[i].type) if is_delete and name not in pk
                  else image[i] if mask is None else image[i].filter(mask) for i, name in enumerate(names)]
        seq, row_index, commit_ts = (c if mask is None else c.filter(mask) for c in head)
        sub = pa.repeat(pa.scalar(0 if is_delete else 1, pa.int32()), n)
        meta = [pa.repeat(pa.scalar(is_delete), n), seq, row_index, sub, commit_ts]
        return pa.Table.from_arrays([*values, *meta], schema=schema)

    parts = []
    if before.null_count < rows:  # updates or deletes: a delete, or an update that moves the key, deletes
        image_before = before.flatten()
        gone = pc.invert(after.is_valid())
        for k in pk:
            i = names.index(k)
            b, a = image_before[i], image_after[i]
            same = pc.if_else(pc.and_(b.is_null(), a.is_null()), True, pc.fill_null(pc.equal(b, a), False))
            gone = pc.or_(gone, pc.invert(same))
        deleted = pc.and_(before.is_valid(), gone)
        if pc.any(deleted).as_py():
            parts.append(part(deleted, image_before, True))
    if after.null_count < rows:
        parts.append(part(after.is_valid() if after.null_count else None, image_after, False))
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def last_per_key(table: pa.Table, pk: list[str]) -> pa.Table:
    """The last candidate (by ORDER) of each key; all of them where Arrow cannot group the key's type.
    A table whose keys are all distinct (inserts, snapshot rows) is its own answer: counting its keys
    costs a hash pass, not the sort by sequence and the copy of every column."""
    if not pk or len(table) < 2:
        return table
    try:
        if len(pk) == 1:
            distinct = pc.count_distinct(table.column(pk[0]), mode="all").as_py()
        else:
            distinct = len(table.group_by(pk).aggregate([]))
        if distinct == len(table):
            return table
        ordered = table.sort_by([(c, "ascending") for c in ORDER])
        ordered = ordered.append_column("_binlake_i", pa.array(range(len(ordered)), pa.int64()))
        last = ordered.group_by(pk).aggregate([("_binlake_i", "max")]).column("_binlake_i_max")
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return table
    return ordered.take(last).drop_columns(["_binlake_i"])


def conform(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """A mirror file's rows (Spark's or ours; columns added since are missing) in the mirror's Arrow schema."""
    have = set(rows.column_names)
    return pa.Table.from_arrays([rows.column(f.name).cast(f.type) if f.name in have else pa.nulls(len(rows), f.type)
                                 for f in schema], schema=schema)


def mirror_columns(columns: list[tuple[str, str]], known: list[tuple[str, str]],
                   schemas: list[SchemaGroup]) -> list[tuple[str, str]]:
    """The columns a batch gives an existing mirror: of the batch's union (``columns``, the change log's and the
    batch's), those the mirror has (``known``: a column dropped since stays) or the batch's rows carry; not
    those of an earlier table of the name that only the change log still has (a table dropped and created
    again: table_statements.py)."""
    keep = {n for n, _ in known} | {n for g in schemas for n, _ in g.meta["columns"]}
    return [(n, t) for n, t in columns if n in keep]


def statement_seq(properties: dict[str, str]) -> bytes:
    """The sequence of the last table statement a lake table took (statements.STATEMENT_PROPERTY; b"": none)."""
    text = properties.get("binlake.statement") or ""
    return bytes.fromhex(text.partition(":")[0]) if text else b""


def full_images(db: str, table: str, schemas: list[SchemaGroup]) -> None:
    """The mirror needs the rows' full images: partial ones stop the query."""
    if any(g.partial for g in schemas):
        raise LandError(f"`{db}`.`{table}`: partial row images (binlog_row_image MINIMAL or NOBLOB) "
                        f"from {min(g.first_position for g in schemas)}: the mirror needs FULL images; "
                        "set binlog_row_image=FULL")
