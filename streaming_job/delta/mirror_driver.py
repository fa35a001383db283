"""The mirror kept by the driver: a batch's candidates (an Arrow table in the driver) applied to a mirror
keyed first by an integer, text or bytes column with pyarrow, and committed to its Delta log by the driver itself
(commit.Commit) with the batch's SetTransaction. Spark's writer and MERGE cost seconds per batch; this
costs milliseconds for a batch of new keys, and the files it reads for one of updates.

On a mirror with deletion vectors (land.deletion_vectors), a batch's updates and deletes in a large file mark
the old rows deleted in the file's deletion vector instead of rewriting it: the batch reads the key columns of
the files its keys may be in (kept in memory), writes a vector file and its new rows, and so costs what its
changes cost whatever the table's size. A file is rewritten without its deleted rows once they pass
``_REWRITE_SHARE`` of it, and one of fewer than ``_VECTOR_ROWS`` rows is rewritten as before; small files
(batch.small_files) are compacted together as before, without their deleted rows. Both rules count rows, what a
rewrite costs: a bulk load's well-compressed files hold hundreds of thousands of rows in a few MiB."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ingester.config import LandConfig

from ..batch.key_index import BatchKeys, FileKeys, file_keys
from ..batch.key_range import KeyRange
from ..batch.key_stats import driver_key, file_range, sorted_keys
from ..batch.keys import key_property
from ..batch.mirror import DELETED, conform, last_per_key
from ..batch.recent_files import RecentFiles
from ..batch.small_files import REWRITE_SHARE, SMALL_ROWS, FileSize, fewest_rows, is_small
from ..batch.writer import MIRROR_FILE_ROWS, SMALL_FILE_ROWS, Added, write_mirror_file
from ..decode.lake_types import quote
from ..format.lake_format import VectorMode
from ..lake.files import LakeFiles
from ..lake.paths import join, scheme
from ..runtime.driver_threads import DriverThreads
from ..runtime.errors import LandError
from .commit import Commit, LiveFile, Vectored
from .deletion_vectors import ENABLE_PROPERTY
from .mirrors import META, MirrorStrategy, MirrorTable, key_stats
from .tables import DeltaTables, stats_columns
from .vector_files import VectorFiles

log = logging.getLogger("binlake.land")
# The driver keeps mirrors keyed first by integers, decimals, dates, timestamps, text and bytes (key_stats.driver_key),
# which it compares as Spark's MERGE does: exactly, text by code point (a collation's equal keys are the binlog's
# bytes). Delta keeps no statistics of bytes: a bytes key's files may each hold any key.
_FILE_ROWS = MIRROR_FILE_ROWS  # rows per mirror file the driver writes, at most
_FILE_ROWS_PER_THREAD = 50_000  # ... and at least, where it writes several at once
# a file whose deletion vector would delete more than this share of its rows is rewritten
_REWRITE_SHARE = REWRITE_SHARE
# a touched file of fewer rows (and fewer bytes than land.small_file_bytes) is rewritten, not given a vector:
# cheap to write, and its rows join the batch's new file
_VECTOR_ROWS = SMALL_ROWS
# land.deletion_vectors "auto": a mirror gets deletion vectors once a batch would rewrite more than this of its
# files (a large mirror changed at scattered keys); smaller ones keep the lowest protocol, which more readers read
_AUTO_VECTOR_BYTES = 128 << 20


class DriverMirror(MirrorStrategy[pa.Table]):
    """``merge_bytes``: the most of a mirror's files the driver reads for a batch (more: Spark's MERGE). A
    batch under a steady trickle adds a small file to the mirror: once it has ``compact_files`` small files
    (batch.small_files: by ``small_file_bytes`` and rows), the driver's commit rewrites them together with the batch
    (MirrorFiles.small), at most ``compact_bytes`` of them (None: ``merge_bytes``; within what is left of
    ``merge_bytes`` in any case). ``vectors``: land.deletion_vectors (a touched file of ``_VECTOR_ROWS`` rows or more
    gets a deletion vector: ``_mark``)."""

    def __init__(self, delta: DeltaTables, threads: DriverThreads, merge_bytes: int, compact_files: int,
                 small_file_bytes: int, compact_bytes: int | None = None, vectors: VectorMode = "auto",
                 key_memory: int = LandConfig.key_memory) -> None:
        self.delta = delta
        self.threads = threads
        self.merge_bytes = merge_bytes
        self.compact_files = compact_files
        self.small_file_bytes = small_file_bytes
        self.compact_bytes = merge_bytes if compact_bytes is None else compact_bytes
        self.vectors = vectors
        self.files: dict[tuple[str, str], MirrorFiles] = {}
        self.recent: RecentFiles[pa.Table] = RecentFiles(_RECENT_BYTES)
        self.keys: RecentFiles[FileKeys] = RecentFiles(key_memory, "land.key_memory")  # files' keys (key_index)
        self.vector_files = VectorFiles(delta.files) if delta.files is not None else None

    def forget(self, db: str, table: str) -> None:
        self.files.pop((db, table), None)

    def apply(self, candidates: pa.Table, mirror: MirrorTable, batch_id: int) -> bool:
        """The batch applied to a mirror keyed first by an integer, text or bytes column, by the driver: the mirror
        files whose key range holds one of the batch's keys are read (pyarrow), those that hold one are rewritten
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
        key_type = dict(columns)[key]
        if lake is None or not driver_key(key_type):
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
                          {**stats_columns(key_stats(columns, pk)), **key_property(pk),
                           **({ENABLE_PROPERTY: "true"} if self.vectors == "always" else {})})
        if self.delta.done(commit, path, batch_id):  # a replay: the mirror has this batch
            return True
        vectors = self.vector_files
        assert vectors is not None  # (a lake the driver writes)
        files = self.files.get((db, table))
        if files is None or files.version != commit.version:
            files = self.files[(db, table)] = MirrorFiles.read(commit, key, key_type)
        touched = files.holding(latest.column(key))
        if touched is None:
            return False
        if commit.version >= 0 and self._upgrade(commit, sum(files.sizes[f] for f in touched)):
            self.delta.enable_deletion_vectors(path)
            commit = self.delta.transaction(path)
            files = self.files[(db, table)] = MirrorFiles.read(commit, key, key_type)
        marked: list[tuple[LiveFile, np.ndarray]] = []
        vectored_mirror = self.vectors != "never" and commit.deletion_vectors()
        if vectored_mirror:
            touched, marked = self._mark(files, touched, latest, pk, path)
        if sum(files.sizes[f] for f in touched) > self.merge_bytes:
            return False
        compacted = files.small(self.small_file_bytes, self.compact_files, set(touched) | {f.path for f, _ in marked},
                                min(self.compact_bytes, self.merge_bytes - sum(files.sizes[f] for f in touched)))
        names = [n for n, _ in [*columns, *META]]
        schema = pa.schema([candidates.schema.field(n) for n in names])
        kept, removes = [], []
        for name in [*touched, *compacted]:
            live = files.live[name]
            cached = self.recent.get(join(path, name))
            rows = vectors.live(cached if cached is not None else lake.read_parquet(join(path, name)), path,
                                live.deletion_vector)
            # in the mirror's types first (Spark's files may have a timestamp in nanoseconds)
            rest = _without_keys(conform(rows, schema), latest, pk)
            # a touched file whose range held the batch's keys but the file none of them stays as it is
            if len(rest) < len(rows) or name in compacted:
                removes.append(live.removed())
                kept.append(rest)
        surviving = latest.filter(pc.invert(latest.column(DELETED))).select(names)
        rows = _sorted_by(pa.concat_tables([*kept, surviving]), key)
        parts = _file_rows(rows, self.threads.count)
        adds = _write_mirror_files(lake, path, parts, key, self.threads.workers)
        written = vectors.write(path, [positions for _, positions in marked]) if marked else []
        vectored = [Vectored(file, vector) for (file, _), vector in zip(marked, written, strict=True)]
        try:
            version = commit.append(adds, self.delta.app_id, batch_id, [], removes, vectors=vectored)
        except Exception as exc:  # e.g. another writer's commit on the mirror (Delta's conflict check)
            raise LandError(f"{db}.{table}: the mirror's commit of batch {batch_id} failed: "
                            f"{_first_line(exc)}; nothing of this batch is in the mirror, "
                            "and landing resumes with it on the next run") from exc
        self.delta.committed(path, version, batch_id)
        files.update(version, adds, [r.path for r in removes], vectored)
        self.recent.drop([join(path, r.path) for r in removes])
        self.keys.drop([join(path, r.path) for r in removes])
        if len(adds) == 1 and len(rows) <= SMALL_FILE_ROWS:
            self.recent.put(join(path, adds[0][0]), rows)
        if vectored_mirror:  # the new files' keys, for the next batches' vectors (none reads them back)
            for add, part in zip(adds, parts, strict=True):
                self.keys.put(join(path, add.path), file_keys(part.select(pk)))
        log.debug("%s.%s: mirror kept by the driver (%d of %d files read, %d rewritten, %d small ones compacted, "
                  "%d given deletion vectors)", db, table, len(touched) + len(compacted),
                  len(files.sizes) + len(removes) - len(adds), len(removes), len(compacted), len(vectored))
        return True

    def _upgrade(self, commit: Commit, touched_bytes: int) -> bool:
        """Whether a mirror without deletion vectors gets them now: always (land.deletion_vectors "always"), or
        ("auto") once a batch would rewrite more than ``_AUTO_VECTOR_BYTES`` of its files."""
        if self.vectors == "never" or commit.deletion_vectors():
            return False
        return self.vectors == "always" or touched_bytes > _AUTO_VECTOR_BYTES

    def _mark(self, files: MirrorFiles, touched: list[str], latest: pa.Table, pk: list[str],
              path: str) -> tuple[list[str], list[tuple[LiveFile, np.ndarray]]]:
        """Of the ``touched`` files, those whose rows of the batch's keys a deletion vector deletes (with the row
        positions its new vector holds: the old one's and the batch's), and those rewritten (those under
        ``_VECTOR_ROWS`` rows and ``small_file_bytes``, and those whose vector would delete more than
        ``_REWRITE_SHARE`` of their rows). A file whose range holds the batch's keys and whose live rows none of
        them is neither (a small one may then be compacted with others: ``MirrorFiles.small``)."""
        assert self.delta.files is not None and self.vector_files is not None
        rewritten, marked = [], []
        batch = BatchKeys(latest, pk)
        key_schema = latest.select(pk).schema
        for name in touched:
            live = files.live[name]
            where = join(path, name)
            keys = self.keys.get(where)
            if keys is None:
                cached = self.recent.get(where)
                keys = file_keys(conform(cached.select(pk) if cached is not None  # in the batch's types
                                         else self.delta.files.read_parquet(where, columns=pk), key_schema))
                self.keys.put(where, keys)
            old = self.vector_files.deleted(path, live.deletion_vector)
            hit = np.setdiff1d(keys.positions(batch), old, assume_unique=True)
            if not len(hit):
                continue  # none of the file's live rows has one of the batch's keys
            deleted = np.union1d(old, hit)
            if rewritten_not_vectored(keys.rows, live.size, len(deleted), self.small_file_bytes):
                rewritten.append(name)
            else:
                marked.append((live, deleted))
        return rewritten, marked


def rewritten_not_vectored(rows: int, size: int, deleted: int, small_file_bytes: int) -> bool:
    """Whether a file of ``rows`` rows and ``size`` bytes of which ``deleted`` are deleted once a batch lands is
    rewritten without them rather than given a deletion vector: a small one (fewer than ``_VECTOR_ROWS`` rows and
    ``small_file_bytes`` bytes: cheap to write), or one whose vector would delete more than ``_REWRITE_SHARE``."""
    return (rows < _VECTOR_ROWS and size < small_file_bytes) or deleted > _REWRITE_SHARE * rows


@dataclass
class MirrorFiles:
    """A mirror's files as the driver last saw them (Delta version), with their range of the first key
    column from the files' statistics (None: unknown, so the file may hold any key; a text key's range may be open
    above: ``file_range``)."""

    version: int
    live: dict[str, LiveFile]
    ranges: dict[str, KeyRange | None]
    sizes: dict[str, int]
    key: str
    key_type: str  # the first key's lake type (key_stats.driver_key)

    @classmethod
    def read(cls, commit: Commit, key: str, key_type: str) -> MirrorFiles:
        live, ranges, sizes = {}, {}, {}
        for file in commit.files():
            live[file.path], sizes[file.path] = file, file.size
            ranges[file.path] = file_range(file.stats, key, key_type)
        return cls(commit.version, live, ranges, sizes, key, key_type)

    def holding(self, column: pa.ChunkedArray) -> list[str] | None:
        """The files whose key range holds one of a batch's first key ``column``'s values; None where the driver
        cannot tell. The values are sorted only where a file has a range (a bytes key's have none)."""
        if any(scheme(n) or n.startswith("/") or file.partition_values for n, file in self.live.items()):
            return None
        keys = sorted_keys(column) if any(r is not None for r in self.ranges.values()) else None
        out = []
        for name, bounds in self.ranges.items():
            if bounds is None or keys is None:
                out.append(name)
                continue
            below = np.searchsorted(keys, bounds.low, "left")
            if below < (len(keys) if bounds.high is None else np.searchsorted(keys, bounds.high, "right")):
                out.append(name)
        return out

    def small(self, below: int, at_least: int, touched: set[str], budget: int) -> list[str]:
        """Small files (batch.small_files: by bytes and rows) not among ``touched``, once there are ``at_least``
        of them (else none): those of fewest rows first, within the compaction's rows and ``budget`` bytes, in
        key order. The batch's commit rewrites them into files of consecutive key ranges, so a steady trickle of
        small batches does not leave a file per batch, and no batch rewrites more, whatever the table's size."""
        # each batch: a file's statistics are parsed for its rows only once its bytes make it a candidate
        found = [FileSize(n, size, self.rows(n)) for n, size in self.sizes.items() if size < below and n not in touched]
        found = [f for f in found if is_small(f.size, f.rows, below)]
        if len(found) < at_least:
            return []
        chosen = fewest_rows(found, budget)
        if len(chosen) < 2:
            return []
        return sorted((f.name for f in chosen), key=lambda n: _range_order(self.ranges[n]))

    def rows(self, name: str) -> int:
        return self.live[name].rows()

    def update(self, version: int, adds: list[Added], removed: list[str], vectored: Sequence[Vectored] = ()) -> None:
        for name in removed:
            del self.live[name], self.ranges[name], self.sizes[name]
        for name, values, size, stats in adds:
            self.live[name] = live = LiveFile(name, size, orjson.dumps(stats).decode(), None, values, 0)
            self.sizes[name] = size
            self.ranges[name] = file_range(live.stats, self.key, self.key_type)  # as a reader of the log finds it
        for file, vector in vectored:
            self.live[file.path] = file._replace(deletion_vector=vector)
        self.version = version


_RECENT_BYTES = 64 << 20


def _range_order(bounds: KeyRange | None) -> tuple[bool, Any]:
    """A file's place among small files to compact together: by its smallest key, those of unknown range last."""
    return (True, 0) if bounds is None else (False, bounds.low)


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


def _file_rows(rows: pa.Table, threads: int) -> list[pa.Table]:
    """The driver's mirror rows (in key order) as the rows of files of consecutive key ranges: as many as the
    rows need at ``_FILE_ROWS`` each, or one per thread where each still gets ``_FILE_ROWS_PER_THREAD`` rows."""
    if not len(rows):
        return []
    count = max(-(-len(rows) // _FILE_ROWS), min(threads, len(rows) // _FILE_ROWS_PER_THREAD))
    size = -(-len(rows) // count)
    return [rows.slice(i, size) for i in range(0, len(rows), size)]


def _write_mirror_files(lake: LakeFiles, path: str, parts: list[pa.Table], key: str,
                        pool: ThreadPoolExecutor) -> list[Added]:
    """Each of ``parts`` (_file_rows) as a mirror file, written at once on ``pool`` (Parquet's encoding and
    compression release the GIL)."""
    if len(parts) == 1:
        return [write_mirror_file(lake, path, parts[0], key)]
    return list(pool.map(lambda part: write_mirror_file(lake, path, part, key), parts))


def _first_line(exc: Exception) -> str:
    """An exception's first line; for one from the JVM (py4j), the Java exception's, which says what failed."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]
