"""``binlake verify`` on the land side: each verify chunk the daemon published (a key range of a table's
rows, read from the source between two watermarks: ingester/daemon/resnapshot.py) is compared with the
mirror at exactly the chunk's point of the stream, and the result appended to ``<lake>/_verify``.

The chunk's entries sit right after its high watermark H in the table's topic, so when the batch holding
them has landed, the mirror holds every change up to H, and those of this batch after H. Left out of the
comparison, on both sides: the keys changed while the chunk was read (between its watermarks: the daemon
lists them), and the keys this batch changed after H (the mirror is past H there). Every other key's row
is the same at H on both sides, or a real difference.

The source's rows are decoded by the same path as snapshot rows (decode.py, typed_batches): one
canonical value per column type on both sides. Where the key's order in Spark is MySQL's (integers,
decimals, dates, timestamps, binary strings), the mirror's rows of the key range are compared both ways
(rows missing, extra or different); for other keys (text under a collation, ...) the range cannot be cut
the same way, and the chunk's source rows are looked up by key (missing or different; ``exact`` false).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from .decode import typed_batches
from .delta_log import TableLog
from .delta_tables import DeltaTables
from .lake_files import LakeFiles
from .lake_paths import join
from .lake_types import arrow_type
from .mirror import SEQ
from .mirror_driver import conform, key_range
from .verify_results import VERIFY_TABLE

log = logging.getLogger("binlake.verify")
RESULT_DDL = ("run string, `table` string, chunk int, low string, high string, source_rows bigint, "
              "lake_rows bigint, excluded bigint, missing bigint, extra bigint, different bigint, `match` boolean, "
              "keys string, exact boolean, `at` string, kafka_topic string, kafka_partition int, "
              "kafka_offset bigint, batch_id bigint, checked_ts timestamp")
_EXACT = ("tinyint", "smallint", "int", "bigint", "date", "timestamp", "timestamp_ntz", "binary")
_SHOWN_KEYS = 20  # the differing keys a result names (its counts are complete)
_READ_ROWS = 200_000  # at most about this many mirror rows in the driver at once (a batch of many chunks)


def exact_order(lake_type: str) -> bool:
    """Whether Spark orders a key column of this lake type as MySQL does."""
    return lake_type in _EXACT or lake_type.startswith("decimal(")


@dataclass
class _Chunk:
    meta: dict[str, Any]
    entries: dict[int, tuple[str, pa.Table]] = field(default_factory=dict)  # entry -> role, record rows
    where: tuple[str, int, int] = ("", 0, 0)  # its last record's topic, partition, offset


@dataclass
class _SourceSide:
    """A complete chunk's source side: its rows by key, the keys changed while it was read, its bounds."""

    meta: dict[str, Any]
    columns: list[str]  # the source's columns at the chunk (a column added since is not compared)
    rows: dict[tuple[Any, ...], dict[str, Any]]
    changed: list[tuple[Any, ...]]
    low: tuple[Any, ...] | None  # exclusive (None: from the table's start)
    high: tuple[Any, ...] | None  # inclusive (None: to its end)

    @classmethod
    def of(cls, chunk: _Chunk, columns: list[tuple[str, str]], pk: list[str]) -> _SourceSide:
        roles: dict[str, list[pa.Table]] = {}
        source_columns: list[str] = []
        for _, (role, rows) in sorted(chunk.entries.items()):
            roles.setdefault(role, []).append(_images(columns, rows))
            if role == "rows" and not source_columns:
                source_columns = [n for n, _ in orjson.loads(rows.column("schema")[0].as_py())["columns"]]
        meta = chunk.meta
        bounds = pa.concat_tables(roles["bounds"]).to_pylist() if roles.get("bounds") else []
        low = bounds.pop(0) if meta.get("low") else None
        high = bounds.pop(0) if meta.get("high") else None
        names = [n for n, _ in columns if n in source_columns]
        rows = [r for t in roles.get("rows", []) for r in t.select(names).to_pylist()]
        changed = [tuple(r[k] for k in pk) for t in roles.get("changed", []) for r in t.select(pk).to_pylist()]
        return cls(meta, names, {tuple(r[k] for k in pk): r for r in rows}, changed,
                   None if low is None else tuple(low[k] for k in pk),
                   None if high is None else tuple(high[k] for k in pk))

    def covers(self, key: tuple[Any, ...]) -> bool:
        """low < key <= high (keys of an exact order: Python orders their values as MySQL does)."""
        return (self.low is None or key > self.low) and (self.high is None or key <= self.high)


@dataclass
class Result:
    run: str
    table: str
    chunk: int
    low: str | None
    high: str | None
    source_rows: int
    lake_rows: int
    excluded: int
    missing: int
    extra: int
    different: int
    keys: list[dict[str, Any]]
    exact: bool
    at: str

    @property
    def match(self) -> bool:
        return self.missing == self.extra == self.different == 0


class Verifier:
    """The verify chunks of a job's batches; a chunk whose entries a batch boundary cut waits for the rest."""

    def __init__(self, spark: SparkSession, lake: str, delta: DeltaTables) -> None:
        self.spark = spark
        self.lake = lake
        self.delta = delta
        self._open: dict[tuple[str, str, int], _Chunk] = {}
        self.chunks = 0  # verified by this process
        self.mismatched = 0

    def check(self, verify_rows: pa.Table, changes_after: Any, batch_id: int) -> list[Result]:
        """``verify_rows``: the batch's record rows of kind verify (decode.py); ``changes_after(db, table,
        columns, seq)``: the keys the batch changed after ``seq`` (sink.Lander). Appends the results of the
        chunks complete now to _verify (idempotent by the batch id) and returns them."""
        done: list[_Chunk] = []
        for i, meta_json in enumerate(verify_rows.column("verify").to_pylist()):
            meta = orjson.loads(meta_json)
            key = (meta["run"], meta["table"], int(meta["chunk"]))
            chunk = self._open.setdefault(key, _Chunk(meta))
            entry = int(meta["entry"])
            if entry > 0 and not chunk.entries:
                log.warning("verify run %s, %s chunk %d: its first entries were landed before this job started; "
                            "the chunk is not compared (verify it again)", *key)
                self._open.pop(key)
                continue
            chunk.entries[entry] = (meta["role"], verify_rows.slice(i, 1))
            chunk.where = tuple(verify_rows.slice(i, 1).select(["topic", "partition", "offset"]).to_pylist()[0]
                                .values())  # type: ignore[assignment]
            if len(chunk.entries) == int(meta["entries"]):
                done.append(self._open.pop(key))
        results: list[Result] = []
        chunks: list[_Chunk] = []
        groups: dict[str, list[list[_Chunk]]] = {}  # per table, runs of chunks compared with one mirror read
        for chunk in done:
            runs = groups.setdefault(chunk.meta["table"], [[]])
            if sum(int(c.meta["rows"]) for c in runs[-1]) + int(chunk.meta["rows"]) > _READ_ROWS:
                runs.append([])
            runs[-1].append(chunk)
        for name, group in ((name, group) for name, runs in groups.items() for group in runs if group):
            started = time.monotonic()
            found = self._compare_table(name, group, changes_after)
            for result in found:
                self.chunks += 1
                self.mismatched += not result.match
                (log.info if result.match else log.warning)(
                    "verify run %s: %s chunk %d (%s .. %s): %s rows %s%s", result.run, result.table, result.chunk,
                    result.low or "start", result.high or "end", f"{result.source_rows:,}",
                    "match" if result.match else
                    f"DIFFER: {result.missing} missing, {result.extra} extra, {result.different} different in the lake",
                    "" if result.exact else " (rows of the source looked up by key)")
            log.debug("verify: %s, %d chunks compared in %.2fs", name, len(group), time.monotonic() - started)
            results += found
            chunks += group
        if results:
            self._append(results, chunks, batch_id)
        return results

    def _compare_table(self, name: str, chunks: list[_Chunk], changes_after: Any) -> list[Result]:
        """The chunks of one table complete in this batch, against one read of the mirror's rows they cover."""
        db, _, table = name.partition(".")
        path = join(self.lake, db, table)
        table_log = self._driver_log(path)
        if table_log is not None:  # the driver reads the mirror's files itself (no Spark job per table)
            columns = [(n, t) for n, t in table_log.columns() if not n.startswith("_binlake_")]
        else:
            mirror = self.spark.read.format("delta").load(path)
            columns = [(f.name, f.dataType.simpleString()) for f in mirror.schema
                       if not f.name.startswith("_binlake_")]
        types = dict(columns)
        pk: list[str] = chunks[0].meta["key"]  # the daemon's chunk key (the primary key, or a unique key)
        exact = all(exact_order(types[k]) for k in pk)
        sides = [_SourceSide.of(chunk, columns, pk) for chunk in chunks]
        changed = changes_after(db, table, columns, pk)  # (seq, key) of the batch's changes of the table
        compared = [n for n, _ in columns if any(n in side.columns for side in sides)]
        if table_log is not None:
            assert self.delta.files is not None
            lake = _driver_rows(self.delta.files, table_log, types, compared, pk, sides, exact)
        else:
            lake = self._spark_rows(mirror, types, compared, pk, sides, exact)
        lake_rows: dict[tuple[Any, ...], tuple[bytes | None, dict[str, Any]]] = {}
        for r in lake.to_pylist():
            seq = r.pop(SEQ)
            lake_rows[tuple(r[k] for k in pk)] = (seq, r)
        return [self._compare(side, lake_rows, changed, compared, exact) for side in sides]

    def _driver_log(self, path: str) -> TableLog | None:
        """The mirror's log where the driver can read its files as they are: on a lake it reaches (local or
        S3), without deletion vectors or partitions (else Spark reads it)."""
        table_log = self.delta.log(path)
        if table_log is None or table_log.version < 0 or table_log.metadata.get("partitionColumns") or \
                any(add.get("deletionVector") for add in table_log.files.values()):
            return None
        return table_log

    def _spark_rows(self, mirror: Any, types: dict[str, str], compared: list[str], pk: list[str],
                    sides: list[_SourceSide], exact: bool) -> pa.Table:
        """The mirror's rows the chunks cover (the compared columns and the row's sequence), read by Spark."""
        if exact:
            lows, highs = [side.low for side in sides], [side.high for side in sides]
            low = None if any(k is None for k in lows) else min(k for k in lows if k is not None)
            high = None if any(k is None for k in highs) else max(k for k in highs if k is not None)
            cut = mirror.filter(_range(pk, low, high)) if low is not None or high is not None else mirror
        else:
            keys = [key for side in sides for key in side.rows]
            schema = pa.schema([pa.field(k, arrow_type(types[k])) for k in pk])
            cut = mirror.limit(0) if not keys else mirror.join(self.spark.createDataFrame(pa.Table.from_pylist(
                [dict(zip(pk, key, strict=True)) for key in keys], schema=schema)), pk, "left_semi")
        return cut.select(*[F.col(f"`{n}`") for n in compared], F.col(SEQ)).toArrow()

    @staticmethod
    def _compare(side: _SourceSide, lake_rows: dict[tuple[Any, ...], tuple[bytes | None, dict[str, Any]]],
                 changed: list[tuple[bytes, tuple[Any, ...]]], compared: list[str], exact: bool) -> Result:
        meta = side.meta
        at = bytes.fromhex(meta["at_seq"])
        excluded = set(side.changed) | {key for seq, key in changed if seq > at}
        if exact:
            mine = {key: v for key, v in lake_rows.items() if side.covers(key)}
        else:
            mine = {key: lake_rows[key] for key in side.rows if key in lake_rows}
        # a row the mirror has from after H (this batch changed it later): not its state at H
        excluded |= {key for key, (seq, _) in mine.items() if seq is not None and seq > at}
        missing, different = [], []
        for key, row in side.rows.items():
            if key in excluded:
                continue
            found = mine.get(key)
            if found is None:
                missing.append(key)
            else:
                cols = [n for n in compared if n in side.columns and found[1].get(n) != row.get(n)]
                if cols:
                    different.append((key, cols))
        extra = [key for key in mine if key not in excluded and key not in side.rows] if exact else []
        shown = ([{"key": list(k), "lake": "missing"} for k in missing[:_SHOWN_KEYS]]
                 + [{"key": list(k), "lake": "extra"} for k in extra[:_SHOWN_KEYS]]
                 + [{"key": list(k), "lake": "different", "columns": c} for k, c in different[:_SHOWN_KEYS]])
        return Result(meta["run"], meta["table"], int(meta["chunk"]), _key_text(side.low), _key_text(side.high),
                      len(side.rows), len(mine), len(excluded & (set(mine) | set(side.rows))), len(missing),
                      len(extra), len(different), shown, exact, meta["at"])

    def _append(self, results: list[Result], chunks: list[_Chunk], batch_id: int) -> None:
        checked = dt.datetime.now(dt.UTC)
        rows = [(r.run, r.table, r.chunk, r.low, r.high, r.source_rows, r.lake_rows, r.excluded, r.missing, r.extra,
                 r.different, r.match, orjson.dumps(r.keys, default=str).decode(), r.exact, r.at, c.where[0],
                 c.where[1], c.where[2], batch_id, checked) for r, c in zip(results, chunks, strict=True)]
        self.delta.append(self.spark.createDataFrame(rows, RESULT_DDL), join(self.lake, VERIFY_TABLE), batch_id)


def _driver_rows(files: LakeFiles, table_log: TableLog, types: dict[str, str], compared: list[str], pk: list[str],
                 sides: list[_SourceSide], exact: bool) -> pa.Table:
    """The mirror's rows the chunks may cover, read by the driver from the files of its log: those whose
    first key lies in the chunks' range (files whose statistics say it cannot are not read) or, for keys
    looked up (not ``exact``), is one of theirs. A superset of what Spark's read gives: ``_compare`` keeps
    the rows each chunk covers."""
    schema = pa.schema([*(pa.field(n, arrow_type(types[n])) for n in compared), pa.field(SEQ, pa.binary())])
    first = pk[0]
    low = high = None
    wanted: pa.Array | None = None
    if exact:
        lows, highs = [side.low for side in sides], [side.high for side in sides]
        low = None if any(k is None for k in lows) else min(k[0] for k in lows if k is not None)
        high = None if any(k is None for k in highs) else max(k[0] for k in highs if k is not None)
    else:
        wanted = pa.array(list({key[0] for side in sides for key in side.rows}), schema.field(first).type)
    parts = []
    for name, add in table_log.files.items():
        held = key_range(add.get("stats"), first) if exact else None
        before = held is not None and isinstance(low, int) and held[1] < low
        after = held is not None and isinstance(high, int) and held[0] > high
        if before or after:
            continue  # the file's keys all lie outside the chunks' range
        rows = conform(files.read_parquet(join(table_log.path, name)), schema)
        keys = rows.column(first)
        if wanted is not None:
            rows = rows.filter(pc.is_in(keys, value_set=wanted))
        elif low is not None or high is not None:
            above = pc.greater_equal(keys, pa.scalar(low, keys.type)) if low is not None else None
            below = pc.less_equal(keys, pa.scalar(high, keys.type)) if high is not None else None
            rows = rows.filter(below if above is None else above if below is None else pc.and_(above, below))
        parts.append(rows)
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _images(columns: list[tuple[str, str]], rows: pa.Table) -> pa.Table:
    """Verify record rows -> their rows' images, typed as the mirror's ``columns`` (decode.typed_batches)."""
    schema = pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(b.column("after"))
                                  for b in typed_batches(columns, rows.to_batches())], schema=schema)


def _range(pk: list[str], low: tuple[Any, ...] | None, high: tuple[Any, ...] | None) -> Column:
    """The mirror's rows with low < key <= high (the key's columns in order, compared as a tuple)."""

    def beyond(bound: tuple[Any, ...], above: bool) -> Column:
        """key > bound (above) or key <= bound, lexicographically over the key's columns."""
        def strict(k: str, v: Any) -> Column:
            return F.col(f"`{k}`") > F.lit(v) if above else F.col(f"`{k}`") < F.lit(v)

        cond = strict(pk[-1], bound[-1]) if above else F.col(f"`{pk[-1]}`") <= F.lit(bound[-1])
        for k, v in zip(reversed(pk[:-1]), reversed(bound[:-1]), strict=True):
            cond = strict(k, v) | ((F.col(f"`{k}`") == F.lit(v)) & cond)
        return cond

    parts = [beyond(bound, above) for bound, above in ((low, True), (high, False)) if bound is not None]
    return parts[0] if len(parts) == 1 else parts[0] & parts[1]


def _key_text(key: tuple[Any, ...] | None) -> str | None:
    if key is None:
        return None
    return orjson.dumps([v.hex() if isinstance(v, bytes) else v for v in key], default=str).decode()
