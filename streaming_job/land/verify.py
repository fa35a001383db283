"""``binlake verify`` on the land side: each verify chunk the daemon published (a key range of a table's
rows, read from the source between two watermarks: ingester/daemon/resnapshot.py) is compared with the
mirror at exactly the chunk's point of the stream, and the result recorded in the lake's results table.
The lake's format (lake_format.LakeFormat) reads the mirror (``verify_mirror``: Delta's files or Spark,
delta/verify.py; pyiceberg, iceberg/verify.py) and records the results (``record_verify``: the Delta table
``<lake>/_verify``, the Iceberg table ``_binlake.verify``), once per micro-batch.

The chunk's entries sit right after its high watermark H in the table's topic, so when the batch holding
them has landed, the mirror holds every change up to H, and those of this batch after H. Left out of the
comparison, on both sides: the keys changed while the chunk was read (between its watermarks: the daemon
lists them), and the keys this batch changed after H (the mirror is past H there). Every other key's row
is the same at H on both sides, or a real difference.

The source's rows are decoded by the same path as snapshot rows (decode.py, typed.typed_batches): one
canonical value per column type on both sides. Where the key's order in Spark is MySQL's (integers,
decimals, dates, timestamps, binary strings), the mirror's rows of the key range are compared both ways
(rows missing, extra or different); for other keys (text under a collation, ...) the range cannot be cut
the same way, and the chunk's source rows are looked up by key (missing or different; ``exact`` false).
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..batch.mirror import SEQ
from ..decode.lake_types import arrow_type
from ..decode.typed import typed_batches
from ..format.lake_format import LakeFormat
from ..format.mirror_read import KeyCut

log = logging.getLogger("binlake.verify")
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
    rows: pa.Table  # of ``columns``, typed as the mirror's
    keys: list[tuple[Any, ...]]  # each row's key, in the rows' order
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
        rows = pa.concat_tables([t.select(names) for t in roles.get("rows", [])]) if roles.get("rows") else \
            pa.schema([pa.field(n, arrow_type(dict(columns)[n])) for n in names]).empty_table()
        changed = [key for t in roles.get("changed", []) for key in key_tuples(t, pk)]
        return cls(meta, names, rows, key_tuples(rows, pk), changed,
                   None if low is None else tuple(low[k] for k in pk),
                   None if high is None else tuple(high[k] for k in pk))


class _LakeSide(NamedTuple):
    """The mirror's rows a batch's chunks of one table cover (a superset), with each row's key and sequence."""

    rows: pa.Table
    keys: list[tuple[Any, ...]]
    seqs: list[bytes | None]
    where: dict[tuple[Any, ...], int]  # key -> its row
    ordered: list[tuple[Any, ...]] | None  # the keys sorted (exact orders: each chunk takes its range of them)

    @classmethod
    def of(cls, rows: pa.Table, pk: list[str], exact: bool) -> _LakeSide:
        keys = key_tuples(rows, pk)
        return cls(rows, keys, rows.column(SEQ).to_pylist(), {key: i for i, key in enumerate(keys)},
                   sorted(keys) if exact else None)


def key_tuples(rows: pa.Table, pk: list[str]) -> list[tuple[Any, ...]]:
    """Each row's key as a tuple of its ``pk`` values."""
    return list(zip(*(rows.column(k).to_pylist() for k in pk), strict=True)) if len(rows) else []


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

    def __init__(self, lake_format: LakeFormat) -> None:
        self.format = lake_format  # reads the mirrors, records the results
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
            chunks += group if found else []
        if results:
            self._append(results, chunks, batch_id)
        return results

    def _compare_table(self, name: str, chunks: list[_Chunk], changes_after: Any) -> list[Result]:
        """The chunks of one table complete in this batch, against one read of the mirror's rows they cover."""
        db, _, table = name.partition(".")
        mirror = self.format.verify_mirror(db, table)
        if mirror is None:
            log.warning("verify: %s has no mirror in the lake; %d chunks not compared", name, len(chunks))
            return []
        columns = mirror.columns
        types = dict(columns)
        pk: list[str] = chunks[0].meta["key"]  # the daemon's chunk key (the primary key, or a unique key)
        exact = all(exact_order(types[k]) for k in pk)
        sides = [_SourceSide.of(chunk, columns, pk) for chunk in chunks]
        changed = changes_after(db, table, columns, pk)  # (seq, key) of the batch's changes of the table
        compared = [n for n, _ in columns if any(n in side.columns for side in sides)]
        cut = KeyCut(types, compared, pk)
        if exact:
            lows, highs = [side.low for side in sides], [side.high for side in sides]
            cut.low = None if any(k is None for k in lows) else min(k for k in lows if k is not None)
            cut.high = None if any(k is None for k in highs) else max(k for k in highs if k is not None)
        else:
            cut.keys = [key for side in sides for key in side.keys]
        lake = _LakeSide.of(mirror.rows(cut), pk, exact)
        return [self._compare(side, lake, changed, compared, exact) for side in sides]

    @staticmethod
    def _compare(side: _SourceSide, lake: _LakeSide, changed: list[tuple[bytes, tuple[Any, ...]]],
                 compared: list[str], exact: bool) -> Result:
        """One chunk's source side against the mirror's rows: keys matched in Python, values compared by Arrow,
        column by column."""
        meta = side.meta
        at = bytes.fromhex(meta["at_seq"])
        excluded = set(side.changed) | {key for seq, key in changed if seq > at}
        if exact:
            assert lake.ordered is not None
            first = 0 if side.low is None else bisect.bisect_right(lake.ordered, side.low)
            end = len(lake.ordered) if side.high is None else bisect.bisect_right(lake.ordered, side.high)
            mine = {key: lake.where[key] for key in lake.ordered[first:end]}
        else:
            mine = {key: lake.where[key] for key in side.keys if key in lake.where}
        # a row the mirror has from after H (this batch changed it later): not its state at H
        excluded |= {key for key, i in mine.items() if (seq := lake.seqs[i]) is not None and seq > at}
        missing, pairs, theirs = [], [], []
        for i, key in enumerate(side.keys):
            if key in excluded:
                continue
            found = mine.get(key)
            if found is None:
                missing.append(key)
            else:
                pairs.append(i)
                theirs.append(found)
        names = [n for n in compared if n in side.columns]
        count, different = _differing(side.rows.select(names).take(pa.array(pairs, pa.int64())),
                                      lake.rows.select(names).take(pa.array(theirs, pa.int64())),
                                      [side.keys[i] for i in pairs])
        source = set(side.keys)
        extra = [key for key in mine if key not in excluded and key not in source] if exact else []
        shown = ([{"key": list(k), "lake": "missing"} for k in missing[:_SHOWN_KEYS]]
                 + [{"key": list(k), "lake": "extra"} for k in extra[:_SHOWN_KEYS]]
                 + [{"key": list(k), "lake": "different", "columns": c} for k, c in different])
        return Result(meta["run"], meta["table"], int(meta["chunk"]), _key_text(side.low), _key_text(side.high),
                      len(source), len(mine), len(excluded & (set(mine) | source)), len(missing),
                      len(extra), count, shown, exact, meta["at"])

    def _append(self, results: list[Result], chunks: list[_Chunk], batch_id: int) -> None:
        checked = dt.datetime.now(dt.UTC)
        rows = [{"run": r.run, "table": r.table, "chunk": r.chunk, "low": r.low, "high": r.high,
                 "source_rows": r.source_rows, "lake_rows": r.lake_rows, "excluded": r.excluded,
                 "missing": r.missing, "extra": r.extra, "different": r.different, "match": r.match,
                 "keys": orjson.dumps(r.keys, default=str).decode(), "exact": r.exact, "at": r.at,
                 "kafka_topic": c.where[0], "kafka_partition": c.where[1], "kafka_offset": c.where[2],
                 "batch_id": batch_id, "checked_ts": checked} for r, c in zip(results, chunks, strict=True)]
        self.format.record_verify(rows, batch_id)


def _differing(source: pa.Table, lake: pa.Table, keys: list[tuple[Any, ...]]
               ) -> tuple[int, list[tuple[tuple[Any, ...], list[str]]]]:
    """Rows paired by key (``keys``): how many differ in a column, and the first _SHOWN_KEYS of them with the
    columns they differ in."""
    if not len(keys):
        return 0, []
    unequal = {n: _unequal(source.column(n), lake.column(n)) for n in source.column_names}
    rows = np.logical_or.reduce(list(unequal.values())) if unequal else np.zeros(len(keys), dtype=bool)
    shown = [(keys[i], [n for n, d in unequal.items() if d[i]]) for i in np.flatnonzero(rows)[:_SHOWN_KEYS]]
    return int(rows.sum()), shown


def _unequal(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Where two columns' values differ (two nulls are equal; NaN differs from itself, as in Python): by Arrow,
    or by Python for the types Arrow does not compare (lists, structs, maps)."""
    try:
        if b.type != a.type:
            b = b.cast(a.type)
        same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        return np.asarray(pc.invert(same).to_numpy(zero_copy_only=False), dtype=bool)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return np.fromiter((x != y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)), dtype=bool,
                           count=len(a))


def _images(columns: list[tuple[str, str]], rows: pa.Table) -> pa.Table:
    """Verify record rows -> their rows' images, typed as the mirror's ``columns`` (typed.typed_batches)."""
    schema = pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(b.column("after"))
                                  for b in typed_batches(columns, rows.to_batches())], schema=schema)


def _key_text(key: tuple[Any, ...] | None) -> str | None:
    if key is None:
        return None
    return orjson.dumps([v.hex() if isinstance(v, bytes) else v for v in key], default=str).decode()
