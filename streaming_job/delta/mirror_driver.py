"""The mirror kept by the driver: a batch's candidates (an Arrow table in the driver) applied to a mirror
keyed first by an integer column with pyarrow, and committed to its Delta log by the driver itself
(commit.Commit) with the batch's SetTransaction. Spark's writer and MERGE cost seconds per batch; this
costs milliseconds for a batch of new keys, and the files it reads for one of updates."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..batch.key_range import KeyRange
from ..batch.keys import key_property
from ..batch.mirror import DELETED, conform, last_per_key
from ..batch.writer import SMALL_FILE_ROWS, Added, within, write_mirror_file
from ..decode.lake_types import quote
from ..lake.files import LakeFiles
from ..lake.paths import join, scheme
from ..runtime.driver_threads import DriverThreads
from ..runtime.errors import LandError
from .commit import Commit
from .mirrors import INTEGER, META, MirrorStrategy, MirrorTable, key_stats
from .tables import DeltaTables, stats_columns

log = logging.getLogger("binlake.land")
# the first key column types of mirrors the driver keeps: integers, and unsigned BIGINT (decimal(20,0))
DRIVER_KEYS = (*INTEGER, "decimal(20,0)")
_FILE_ROWS = 1_000_000  # rows per mirror file the driver writes, at most
_FILE_ROWS_PER_THREAD = 50_000  # ... and at least, where it writes several at once


class DriverMirror(MirrorStrategy[pa.Table]):
    """``merge_bytes``: the most of a mirror's files the driver reads for a batch (more: Spark's MERGE). A
    batch under a steady trickle adds a small file to the mirror: once it has ``compact_files`` files under
    ``small_file_bytes``, the driver's commit rewrites them together with the batch (MirrorFiles.small), at most
    ``compact_bytes`` of them (None: ``merge_bytes``; within what is left of ``merge_bytes`` in any case)."""

    def __init__(self, delta: DeltaTables, threads: DriverThreads, merge_bytes: int, compact_files: int,
                 small_file_bytes: int, compact_bytes: int | None = None) -> None:
        self.delta = delta
        self.threads = threads
        self.merge_bytes = merge_bytes
        self.compact_files = compact_files
        self.small_file_bytes = small_file_bytes
        self.compact_bytes = merge_bytes if compact_bytes is None else compact_bytes
        self.files: dict[tuple[str, str], MirrorFiles] = {}
        self.recent = RecentFiles(_RECENT_BYTES)

    def forget(self, db: str, table: str) -> None:
        self.files.pop((db, table), None)

    def apply(self, candidates: pa.Table, mirror: MirrorTable, batch_id: int) -> bool:
        """The batch applied to a mirror keyed first by an integer column, by the driver: the mirror files
        whose key range holds one of the batch's keys are read (pyarrow), those that hold one are rewritten
        without the batch's keys, and the surviving rows (key order) join them in new files; one Delta
        commit removes the old files and adds the new ones, with the batch's SetTransaction. Returns False
        where it does not apply (the caller uses Spark): a batch that adds columns or gives defaults, and
        one that widens a column, whose Spark path ALTERs the mirror first (the driver's files would
        otherwise hold the wider type under the mirror's narrower one)."""
        if mirror.fills or mirror.widened:
            return False
        db, table, path, columns, pk = mirror.db, mirror.table, mirror.path, mirror.columns, mirror.pk
        key = pk[0]
        lake = self.delta.files
        if lake is None or dict(columns)[key] not in DRIVER_KEYS:
            return False
        if mirror.added:  # nullable columns without a default: the mirror's files lack them, read as nulls
            types = dict(columns)
            if not self.delta.add_columns(path, [(n, types[n]) for n in mirror.added], nested=False):
                return False
            mirror.known = [*(mirror.known or []), *((n, types[n]) for n in mirror.added)]
            mirror.added = []
        latest = last_per_key(candidates, pk)
        commit = self.delta.transaction(path)
        if not mirror.exists:  # created by the commit of its first files
            commit.create(", ".join(f"{quote(n)} {t}" for n, t in [*columns, *META]), [],
                          {**stats_columns(key_stats(columns, pk)), **key_property(pk)})
        if self.delta.done(commit, path, batch_id):  # a replay: the mirror has this batch
            return True
        files = self.files.get((db, table))
        if files is None or files.version != commit.version:
            files = self.files[(db, table)] = MirrorFiles.read(commit, key)
        keys = np.sort(key_numbers(latest.column(key)))
        touched = files.holding(keys)
        if touched is None or sum(files.sizes[f] for f in touched) > self.merge_bytes:
            return False
        compacted = files.small(self.small_file_bytes, self.compact_files, set(touched),
                                min(self.compact_bytes, self.merge_bytes - sum(files.sizes[f] for f in touched)))
        names = [n for n, _ in [*columns, *META]]
        schema = pa.schema([candidates.schema.field(n) for n in names])
        kept, removes = [], []
        for name in [*touched, *compacted]:
            cached = self.recent.get(join(path, name))
            rows = cached if cached is not None else lake.read_parquet(join(path, name))
            rest = _without_keys(rows, latest, pk)
            # a touched file whose range held the batch's keys but the file none of them stays as it is
            if len(rest) < len(rows) or name in compacted:
                removes.append((name, files.sizes[name]))
                kept.append(conform(rest, schema))
        surviving = latest.filter(pc.invert(latest.column(DELETED))).select(names)
        rows = _sorted_by(pa.concat_tables([*kept, surviving]), key)
        adds = _write_mirror_files(lake, path, rows, key, self.threads.workers, self.threads.count)
        try:
            version = commit.append(adds, self.delta.app_id, batch_id, [], removes)
        except Exception as exc:  # e.g. another writer's commit on the mirror (Delta's conflict check)
            raise LandError(f"{db}.{table}: the mirror's commit of batch {batch_id} failed: "
                            f"{_first_line(exc)}; nothing of this batch is in the mirror, "
                            "and landing resumes with it on the next run") from exc
        self.delta.committed(path, version, batch_id)
        files.update(version, adds, [n for n, _ in removes], key)
        self.recent.drop([join(path, n) for n, _ in removes])
        if len(adds) == 1 and len(rows) <= SMALL_FILE_ROWS:
            self.recent.put(join(path, adds[0][0]), rows)
        log.debug("%s.%s: mirror kept by the driver (%d of %d files read, %d rewritten, %d small ones compacted)",
                  db, table, len(touched) + len(compacted), len(files.sizes) + len(removes) - len(adds),
                  len(removes), len(compacted))
        return True


@dataclass
class MirrorFiles:
    """A mirror's files as the driver last saw them (Delta version), with their range of the first key
    column from the files' statistics (None: unknown, so the file may hold any key)."""

    version: int
    sizes: dict[str, int]
    ranges: dict[str, KeyRange | None]
    vectors: bool = False  # some file has a deletion vector: pyarrow alone would not see its deletes

    @classmethod
    def read(cls, commit: Commit, key: str) -> MirrorFiles:
        sizes, ranges, vectors = {}, {}, False
        for name, size, stats, dv, _ in commit.files():
            sizes[name] = size
            ranges[name] = file_range(stats, key)
            vectors = vectors or dv
        return cls(commit.version, sizes, ranges, vectors)

    def holding(self, keys: np.ndarray) -> list[str] | None:
        """The files whose key range holds one of the (sorted) ``keys``; None where the driver cannot tell."""
        if self.vectors or any(scheme(n) or n.startswith("/") for n in self.sizes):
            return None
        out = []
        for name, bounds in self.ranges.items():
            if bounds is None or (np.searchsorted(keys, bounds.low, "left")
                                  < np.searchsorted(keys, bounds.high, "right")):
                out.append(name)
        return out

    def small(self, below: int, at_least: int, touched: set[str], budget: int) -> list[str]:
        """Files under ``below`` bytes not among ``touched``, in key order and within ``budget`` bytes,
        once there are ``at_least`` of them (else none): the batch's commit rewrites them into files of
        consecutive key ranges, so a steady trickle of small batches does not leave a file per batch."""
        found = [n for n, size in self.sizes.items() if size < below and n not in touched]
        if len(found) < at_least:
            return []
        found.sort(key=lambda n: self.ranges[n] or KeyRange(0, 0))
        return within(found, self.sizes, budget)

    def update(self, version: int, adds: list[Added],
               removed: list[str], key: str) -> None:
        for name in removed:
            del self.sizes[name], self.ranges[name]
        for name, _, size, stats in adds:
            self.sizes[name] = size
            self.ranges[name] = KeyRange(stats["minValues"][key], stats["maxValues"][key])
        self.version = version


_RECENT_BYTES = 64 << 20


class RecentFiles:
    """The rows of small mirror files this process wrote, by path, within a byte budget (the least recently
    used go first). A batch that changes a few keys rewrites the file holding them, most often one this
    job wrote a batch before: it needs no read then. A data file never changes once written (a commit
    adds new files), so the rows kept are the file's for as long as it exists."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self._rows: OrderedDict[str, pa.Table] = OrderedDict()
        self._lock = threading.Lock()  # tables land side by side

    def get(self, path: str) -> pa.Table | None:
        with self._lock:
            rows = self._rows.get(path)
            if rows is not None:
                self._rows.move_to_end(path)
            return rows

    def put(self, path: str, rows: pa.Table) -> None:
        with self._lock:
            self._rows[path] = rows
            self.size += rows.nbytes
            while self.size > self.budget:
                self.size -= self._rows.popitem(last=False)[1].nbytes

    def drop(self, paths: list[str]) -> None:
        with self._lock:
            for path in paths:
                rows = self._rows.pop(path, None)
                if rows is not None:
                    self.size -= rows.nbytes


def _without_keys(rows: pa.Table, latest: pa.Table, pk: list[str]) -> pa.Table:
    """A mirror file's rows but those of the batch's keys (a null never matches, as in a join)."""
    if len(pk) == 1:
        keys = latest.column(pk[0])
        return rows.filter(pc.invert(pc.is_in(rows.column(pk[0]), value_set=keys.combine_chunks(), skip_nulls=True)))
    return rows.join(latest.select(pk), keys=pk, join_type="left anti")


def _sorted_by(rows: pa.Table, key: str) -> pa.Table:
    """``rows`` in ascending key order (as they are already when a snapshot's rows arrive: then no copy)."""
    keys = rows.column(key)
    if len(keys) < 2 or pc.all(pc.less_equal(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py():
        return rows
    return rows.sort_by(key)


def _write_mirror_files(lake: LakeFiles, path: str, rows: pa.Table, key: str, pool: ThreadPoolExecutor,
                        threads: int) -> list[Added]:
    """The driver's mirror rows (in key order) as files of consecutive key ranges: as many as the rows
    need at ``_FILE_ROWS`` each, or one per thread where each still gets ``_FILE_ROWS_PER_THREAD`` rows,
    written at once on ``pool`` (Parquet's encoding and compression release the GIL)."""
    if not len(rows):
        return []
    count = max(-(-len(rows) // _FILE_ROWS), min(threads, len(rows) // _FILE_ROWS_PER_THREAD))
    size = -(-len(rows) // count)
    slices = [rows.slice(i, size) for i in range(0, len(rows), size)]
    if len(slices) == 1:
        return [write_mirror_file(lake, path, slices[0], key)]
    return list(pool.map(lambda part: write_mirror_file(lake, path, part, key), slices))


def key_numbers(keys: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A first key column's values as numbers numpy compares: integers as they are, an unsigned BIGINT's
    decimal(20,0) as uint64 (every value fits)."""
    if pa.types.is_decimal(keys.type):
        keys = pc.cast(keys, pa.uint64())
    return keys.to_numpy()


def file_range(stats: str | None, key: str) -> KeyRange | None:
    """A file's range of the first key from its statistics; None where there is none or it is not exact (a
    decimal statistic written in exponent form: the file may then hold any key)."""
    if not stats:
        return None
    parsed = orjson.loads(stats)
    low, high = parsed.get("minValues", {}).get(key), parsed.get("maxValues", {}).get(key)
    if not (isinstance(low, int) and isinstance(high, int)):
        return None
    return KeyRange(low, high)


def _first_line(exc: Exception) -> str:
    """An exception's first line; for one from the JVM (py4j), the Java exception's, which says what failed."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]
