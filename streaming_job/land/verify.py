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

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

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
            cut.keys = [key for side in sides for key in side.rows]
        lake_rows: dict[tuple[Any, ...], tuple[bytes | None, dict[str, Any]]] = {}
        for r in mirror.rows(cut).to_pylist():
            seq = r.pop(SEQ)
            lake_rows[tuple(r[k] for k in pk)] = (seq, r)
        return [self._compare(side, lake_rows, changed, compared, exact) for side in sides]

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
        rows = [{"run": r.run, "table": r.table, "chunk": r.chunk, "low": r.low, "high": r.high,
                 "source_rows": r.source_rows, "lake_rows": r.lake_rows, "excluded": r.excluded,
                 "missing": r.missing, "extra": r.extra, "different": r.different, "match": r.match,
                 "keys": orjson.dumps(r.keys, default=str).decode(), "exact": r.exact, "at": r.at,
                 "kafka_topic": c.where[0], "kafka_partition": c.where[1], "kafka_offset": c.where[2],
                 "batch_id": batch_id, "checked_ts": checked} for r, c in zip(results, chunks, strict=True)]
        self.format.record_verify(rows, batch_id)


def _images(columns: list[tuple[str, str]], rows: pa.Table) -> pa.Table:
    """Verify record rows -> their rows' images, typed as the mirror's ``columns`` (typed.typed_batches)."""
    schema = pa.schema([pa.field(n, arrow_type(t)) for n, t in columns])
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(b.column("after"))
                                  for b in typed_batches(columns, rows.to_batches())], schema=schema)


def _key_text(key: tuple[Any, ...] | None) -> str | None:
    if key is None:
        return None
    return orjson.dumps([v.hex() if isinstance(v, bytes) else v for v in key], default=str).decode()
