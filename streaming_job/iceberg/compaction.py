"""Compaction of the job's Iceberg tables (maintenance.py), aware of their position delete files
(position_deletes.py): a merge-on-read mirror's replaced and deleted rows are deleted by position, in delete files.

- **Which files**: data files only (never a delete file) are rewritten: a partition's files small or under half of
  ``merge_rows`` once it holds ``compact_files`` of them, tier by tier (batch.small_files.tiered: files grow
  by merges of files of like rows up to ``merge_rows``), and any larger data file whose deleted rows (the
  positions the live delete files name in it) pass ``MERGE_SHARE`` of its rows (the Delta side rewrites a file
  in the batch at ``REWRITE_SHARE``, delta/mirror_driver.py), with the partition's small files; those of fewest
  rows first, within the compaction's rows and byte budget (a small file's deleted rows go at its partition's
  compaction). They are read as every reader reads them: with the delete files that apply to them (pyiceberg's
  plan of the snapshot), so a row deleted by position never comes back.
- **Delete files**: in the same ``replace`` snapshot, every live delete file none of whose data files is left (they
  are rewritten now, or were by an earlier copy-on-write delete or compaction) is removed (DELETED in its
  manifest); one that still names a live data file stays (its rows for rewritten files are unused). A batch writes a
  delete file per partition naming the data files it touched, which a reader (Spark's, pyiceberg's) reads with each
  data file of that partition whose path lies within its ``file_path`` bounds (with random file names, most of
  them); one naming a single data file (file-scoped: equal bounds) is read with that file only. Once a partition's
  delete files past one file-scoped file per data file (``excess_deletes``) reach ``compact_files``, they are merged
  into one file-scoped delete file per live data file they name (their rows for it), so a table keeps at most one
  file-scoped delete file per data file and fewer than ``compact_files`` others per partition, whatever its number
  of batches, and a data file's reader reads its own deletes only.
- **Beside the job's batches**: a compaction is read and written beside them (``prepare``) and committed after the
  newest (``finish``); the rows of the files it rewrites that their delete files deleted since are deleted in its
  new files in the same snapshot (moved.py), so a steady load of spread updates never starves it. Those deleted
  while it read and wrote are followed beside the batches (``catch_up``), those of the batches since in ``finish``,
  while it keeps them out.
- **Which delete file names which data files**: its ``file_path`` bounds where equal (the file deletes rows of
  one data file), else its ``file_path`` column read once (a delete file never changes).


The ``replace`` snapshot itself: replace.py."""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntryStatus
from pyiceberg.table import FileScanTask

from ..batch.small_files import (
    COMPACT_ROWS,
    MERGE_ROWS,
    MERGE_SHARE,
    TIDY_RATIO,
    FileSize,
    fewest_rows,
    is_small,
    tiered,
)
from .moved import MovedRows
from .planning import ONE_CALL, KeptManifests
from .position_deletes import FILE_PATH_ID, FilePositions, write_delete_file, write_delete_files
from .replace import ReplaceFiles
from .rewrite import InProcess, RewriteLost, Rewriter, Unreadable
from .transactions import transaction

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.io import FileIO
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger("binlake.land")
_CHAIN = 50  # snapshots followed since the last look at a table's files, beyond which it is read again
Group = tuple[Any, ...]  # a file's partition: (spec id, *values)


class LiveFile(NamedTuple):
    """A live data file as a compaction weighs it, and its manifest entry's file."""

    size: int
    rows: int
    group: Group
    file: DataFile


@dataclass
class TableFiles:
    """A table's live files as of one snapshot: its data files (small ones whole), its position delete files, and
    the data files each of those names (with its rows for each)."""

    snapshot_id: int
    data: dict[str, LiveFile] = field(default_factory=dict)
    small: set[str] = field(default_factory=set)
    deletes: dict[str, DataFile] = field(default_factory=dict)
    names: dict[str, dict[str, int]] = field(default_factory=dict)  # delete file -> data file -> its rows there
    skipped: set[str] = field(default_factory=set)  # data files a compaction could not read together


@dataclass
class Plan:
    """A compaction: the data files rewritten, the delete files removed, those merged (per list: into one
    file-scoped delete file per data file they name)."""

    data: list[str]
    dropped: list[DataFile]
    merged: list[list[DataFile]]

    def __bool__(self) -> bool:
        return bool(self.data or self.dropped or self.merged)


@dataclass
class Prepared:
    """A compaction read and written, not committed: the snapshot (schema, partition spec) it read, the data files
    it rewrites, the delete files it removes (dropped or merged), those it adds (merged) and its new data files; the
    delete files live when it read; where its rows went (None: not followed); its seconds so far."""

    snapshot_id: int
    schema_id: int
    spec_id: int
    write_id: uuid.UUID
    data: list[DataFile]
    deletes: list[DataFile]
    merged: list[DataFile]
    added: list[DataFile]
    known_deletes: set[str]
    moved: MovedRows | None
    seconds: float
    followed: list[DataFile] = field(default_factory=list)  # delete files of rows deleted since, followed (catch_up)

    def discard(self, io: FileIO) -> None:
        """Its files deleted (never committed)."""
        for f in (*self.merged, *self.added, *self.followed):
            try:
                io.delete(f.file_path)
            except FileNotFoundError:
                pass


class _Conflict(Exception):
    """What a snapshot since a compaction read changed that it cannot go on from."""


def _group(f: DataFile) -> Group:
    partition: Any = f.partition  # a pyiceberg Record: its values
    return (f.spec_id, *partition)


def file_scope(d: DataFile) -> str | None:
    """The one data file a delete file names by its ``file_path`` bounds (a file-scoped one), else None."""
    low, high = (d.lower_bounds or {}).get(FILE_PATH_ID), (d.upper_bounds or {}).get(FILE_PATH_ID)
    return low.decode() if low is not None and low == high else None


def excess_deletes(deletes: list[DataFile]) -> int:
    """A partition's delete files past the one file-scoped delete file per data file it may keep: those naming
    several data files (a reader reads each with every data file of the partition), and a data file's file-scoped
    ones past its first. A compaction merges a partition's once they reach ``compact_files``."""
    scoped = Counter(file_scope(d) for d in deletes)
    return scoped.pop(None, 0) + sum(n - 1 for n in scoped.values())


@dataclass
class Compaction:
    compact_files: int
    small_file_bytes: int
    budget: int
    merge_rows: int = MERGE_ROWS  # a compaction's most rows (batch.small_files)
    rewriter: Rewriter = field(default_factory=InProcess)  # its reads and writes of data files (rewrite.py)
    tables: dict[tuple[str, str], TableFiles] = field(default_factory=dict)

    def compact(self, name: tuple[str, str], table: Table, properties: dict[str, str], key: list[str]) -> bool:
        """The table's due rewrites (``plan``) made in one ``replace`` snapshot with the summary ``properties``;
        whether one was made."""
        prepared = self.prepare(name, table, key)
        return prepared is not None and self.finish(name, table, prepared, properties)

    def prepare(self, name: tuple[str, str], table: Table, key: list[str],
                pause: Callable[[], None] = lambda: None, manifests: KeptManifests | None = None,
                tidy: bool = False) -> Prepared | None:
        """The table's due rewrites (``plan``; ``tidy``: a quiet table's) as of its current snapshot: the files read
        and their replacements written, nothing committed (None: nothing due). The job's writers may commit to the
        table meanwhile (``finish`` follows them); ``pause`` is called between the steps (upkeep.Upkeep.pause:
        batches first); ``manifests``: the manifests' entries kept between plans (planning.py; None: read for this
        one)."""
        current = table.current_snapshot()
        summary = current.summary if current is not None else None
        least = 2 if tidy else self.compact_files
        if current is None or summary is None or (int(summary.get("total-data-files") or 0) < least
                                                  and int(summary.get("total-delete-files") or 0) == 0):
            self.tables.pop(name, None)  # too few files in all: nothing to track
            return None
        files = self.files(name, table, current)
        plan = self.plan(files, table.io, self.merge_rows if key else min(self.merge_rows, COMPACT_ROWS), tidy)
        if not plan:
            return None
        pause()
        started = time.monotonic()
        kept = manifests if manifests is not None else KeptManifests(ONE_CALL)
        if files.deletes:  # the data files as readers plan them: with the delete files that apply to each
            tasks = {t.file.file_path: t for t in kept.plan(table, AlwaysTrue())}  # (``current``'s: table's own)
        else:
            tasks = {p: FileScanTask(files.data[p].file) for p in plan.data}
        if any(p not in tasks for p in plan.data):  # (never: the files followed are the snapshot's)
            self.tables.pop(name, None)
            return None
        picked = [tasks[p] for p in plan.data]
        write_id = uuid.uuid4()
        rewritten, moved = None, None
        if picked:
            try:
                rewritten = self.rewriter(table.metadata, table.io, picked, key, write_id)
            except RewriteLost as lost:
                log.warning("%s.%s: compaction given up (%s): the next one plans anew", *name, lost)
                return None
            except Unreadable as exc:  # none binlake wrote: columns are only added or promoted
                log.debug("%s.%s: %d files not compacted: %s", *name, len(picked), exc)
                files.skipped.update(plan.data)
                return None
            moved = MovedRows.of(table, picked, rewritten, key, kept)
            pause()
        gone = set(plan.data)
        merged = [d for n, group in enumerate(plan.merged)
                  for d in self._merge(table, files, group, gone, tasks, kept, f"{write_id}-deletes-{n:05d}")]
        added = rewritten.added if rewritten is not None else []
        return Prepared(current.snapshot_id, table.metadata.current_schema_id, table.metadata.default_spec_id,
                        write_id, [t.file for t in picked], [*plan.dropped, *itertools.chain(*plan.merged)], merged,
                        added, set(files.deletes), moved, time.monotonic() - started)

    def finish(self, name: tuple[str, str], table: Table, prepared: Prepared, properties: dict[str, str]) -> bool:
        """``prepared`` committed as one ``replace`` snapshot after the table's newest (no writer commits
        meanwhile: upkeep.Upkeep.exclusive), with the batch ids of the newest snapshot's summary (``properties``'
        keys; theirs where it has none), and the rows of the files it rewrites that delete files committed since it
        read deleted by position in its new files (moved.py: they would come back); or given up, its files deleted,
        where a snapshot since the one it read changed the schema or partition spec or removed a file it replaces
        (or added such deletes where it cannot follow them). Whether it was committed."""
        started = time.monotonic()
        if not self.catch_up(name, table, prepared):
            return False
        followed = prepared.followed
        head = table.current_snapshot()
        assert head is not None and head.summary is not None
        newest = {k: str(head.summary.additional_properties.get(k, v)) for k, v in properties.items()}
        with transaction(table) as tx:
            write = ReplaceFiles(tx, table.io, newest, prepared.write_id, set(prepared.data), set(prepared.deletes),
                             [*prepared.merged, *followed])
            for f in prepared.added:
                write.append_data_file(f)
            write.commit()
        log.debug("%s.%s: %d data files rewritten, %d delete files removed or merged into %d, %d rows deleted since "
                  "followed, in %.1fs (%.2fs keeping the writers out)", *name, len(prepared.data),
                  len(prepared.deletes), len(prepared.merged), sum(f.record_count for f in followed),
                  prepared.seconds + time.monotonic() - started, time.monotonic() - started)
        return True

    def catch_up(self, name: tuple[str, str], table: Table, prepared: Prepared) -> bool:
        """The deletes committed since ``prepared`` read (or last caught up) of rows in the files it rewrites
        followed onto its new files as of ``table``'s current snapshot (``prepared.followed``), so that ``finish``
        follows only those committed after: called beside the writers first, it keeps ``finish``'s time that keeps
        them out to a batch's worth. False: given up (logged, its files deleted)."""
        try:
            followed = self._followed(name, table, prepared, f"{prepared.write_id}-moved{len(prepared.followed)}")
        except _Conflict as conflict:
            log.info("%s.%s: compaction given up (%s since it read snapshot %d): the next one plans anew", *name,
                     conflict, prepared.snapshot_id)
            prepared.discard(table.io)
            return False
        current = table.current_snapshot()
        if current is not None and current.snapshot_id != prepared.snapshot_id:
            prepared.followed += followed
            prepared.known_deletes |= self.tables[name].deletes.keys()
            prepared.snapshot_id = current.snapshot_id
        return True

    def _followed(self, name: tuple[str, str], table: Table, prepared: Prepared, written: str) -> list[DataFile]:
        """The delete files of the new files' rows that the delete files committed since ``prepared`` read delete
        in the files it rewrites (written as ``written``-NNNNN, to add); _Conflict: what a snapshot since changed
        that it cannot go on from."""
        metadata = table.metadata
        if (metadata.current_schema_id, metadata.default_spec_id) != (prepared.schema_id, prepared.spec_id):
            self.tables.pop(name, None)
            raise _Conflict("the schema or partition spec changed")
        current = table.current_snapshot()
        if current is None:
            raise _Conflict("no snapshot")
        if current.snapshot_id == prepared.snapshot_id:
            return []
        files = self.files(name, table, current)  # followed from the snapshot prepare read
        gone = {f.file_path for f in prepared.data}
        if not gone <= files.data.keys() or not {d.file_path for d in prepared.deletes} <= files.deletes.keys():
            raise _Conflict("a file it replaces was removed")
        naming: dict[str, list[DataFile]] = defaultdict(list)
        for path, d in files.deletes.items():
            if path not in prepared.known_deletes:
                for data in gone.intersection(self._names(files, d, table.io)):
                    naming[data].append(d)
        if not naming:
            return []
        if prepared.moved is None:
            raise _Conflict(f"delete file {next(iter(naming.values()))[0].file_path} names a data file it rewrites")
        moved = prepared.moved.follow(table.io, naming)
        if moved is None:
            raise _Conflict("a row deleted since is not in its new files once")
        return write_delete_files(table, moved, written) if moved else []

    def plan(self, files: TableFiles, io: FileIO, merge_rows: int, tidy: bool = False) -> Plan:
        """The rewrites due: in each partition, the larger data files whose deleted share passes
        ``MERGE_SHARE`` (then its small files with them), or once it holds ``compact_files`` files small or
        under half of ``merge_rows``, those ``tiered`` picks (batch.small_files), within
        the rows (``merge_rows``: a mirror's; a change log's, unkeyed, at most ``COMPACT_ROWS``: it grows forever and
        is read by snapshots, and each tier costs the batches beside it CPU) and byte budget in all; the delete
        files naming no
        data file left afterwards removed, and those left of a crowded partition (``excess_deletes``) merged,
        file-scoped. Nothing is due where no data file is and no partition is crowded (a dangling delete file waits
        for the next compaction). A larger file past the share is rewritten alone, up to ``TIDY_RATIO`` times
        ``merge_rows``. ``tidy`` (a quiet table: upkeep.py): every data file with a deleted row, the open files of a
        partition holding two of them (those of fewest rows first), and the delete files of any partition past one
        file-scoped delete file per data file, with ``TIDY_RATIO`` times the rows (files under half of that open),
        so that the table ends as a compacted one."""
        largest = TIDY_RATIO * merge_rows
        merge_rows = largest if tidy else merge_rows
        deleted: dict[str, int] = defaultdict(int)
        for d in files.deletes.values():
            for path, n in self._names(files, d, io).items():
                deleted[path] += n
        heavy: dict[Group, list[FileSize]] = defaultdict(list)
        small: dict[Group, list[FileSize]] = defaultdict(list)  # (of the open ones)
        open_: dict[Group, list[FileSize]] = defaultdict(list)  # small, or under half of merge_rows
        for path, f in sorted(files.data.items()):
            if path in files.skipped:
                continue
            weighed = FileSize(path, f.size, f.rows)
            heavy_share = deleted.get(path, 0) > MERGE_SHARE * f.rows and path not in files.small
            if heavy_share or (tidy and deleted.get(path)):
                heavy[f.group].append(weighed)
            elif path in files.small or f.rows < merge_rows // 2:
                open_[f.group].append(weighed)
                if path in files.small:
                    small[f.group].append(weighed)
        out: list[str] = []
        rows_left, bytes_left = merge_rows, self.budget
        for group in sorted({*heavy, *open_}, key=lambda g: (len(heavy[g]), len(open_[g])), reverse=True):
            kept = fewest_rows(heavy[group], bytes_left, rows_left)
            if not kept and not out:  # a file past the compaction's rows (a quiet one's), alone
                kept = fewest_rows(heavy[group], bytes_left, largest)[:1]
            if kept:  # with the partition's small files
                kept += fewest_rows(small[group], bytes_left - sum(k.size for k in kept),
                                    rows_left - sum(k.rows for k in kept))
            elif tidy and len(open_[group]) >= 2:
                kept = fewest_rows(open_[group], bytes_left, rows_left)
                kept = kept if len(kept) >= 2 else []  # (one file alone: nothing merged)
            elif len(open_[group]) >= self.compact_files:
                kept = tiered(open_[group], bytes_left, rows_left)
            out += [k.name for k in kept]
            rows_left -= sum(k.rows for k in kept)
            bytes_left -= sum(k.size for k in kept)
        by_group: dict[Group, list[DataFile]] = defaultdict(list)
        for d in files.deletes.values():
            by_group[_group(d)].append(d)
        crowded = {g for g, ds in by_group.items() if excess_deletes(ds) >= (1 if tidy else self.compact_files)}
        if not out and not crowded:
            return Plan([], [], [])
        live = set(files.data) - set(out)
        dropped, left = [], defaultdict(list)
        for _, d in sorted(files.deletes.items()):
            if live.isdisjoint(self._names(files, d, io)):
                dropped.append(d)
            else:
                left[_group(d)].append(d)
        merged = [m for g, ds in left.items() if g in crowded and (m := self._scoped(files, ds, io))]
        return Plan(out, dropped, merged)

    def _scoped(self, files: TableFiles, deletes: list[DataFile], io: FileIO) -> list[DataFile]:
        """Of a crowded partition's delete files left, those to merge into one file-scoped delete file per data
        file they name: those naming several data files, and the file-scoped ones of a data file that has
        several or is named by one of those (a data file's one file-scoped delete file, alone, stays)."""
        several = [d for d in deletes if file_scope(d) is None]
        named = {path for d in several for path in self._names(files, d, io)}
        scoped: dict[str, list[DataFile]] = defaultdict(list)
        for d in deletes:
            if (path := file_scope(d)) is not None:
                scoped[path].append(d)
        return [*several, *(d for path, ds in scoped.items() if len(ds) > 1 or path in named for d in ds)]

    def _merge(self, table: Table, files: TableFiles, group: list[DataFile], gone: set[str],
               tasks: dict[str, FileScanTask], kept: KeptManifests, name: str) -> list[DataFile]:
        """``group``'s delete files' rows for the data files still live after the rewrite of ``gone``, as one
        file-scoped delete file per data file (``name``-NNNNN.parquet): a reader reads a data file's own, where it
        reads every delete file naming several data files of its partition with each of them. Their positions as
        ``kept`` has them (planning.py: most read by the batches already)."""
        out: list[DataFile] = []
        for path in sorted({p for d in group for p in self._names(files, d, table.io)}):
            if path in files.data and path not in gone and path in tasks:
                found = FilePositions(tasks[path].file, kept.deleted(table.io, path, group))
                out.append(write_delete_file(table, [found], f"{name}-{len(out):05d}.parquet"))
        return out

    @staticmethod
    def _names(files: TableFiles, d: DataFile, io: FileIO) -> dict[str, int]:
        """The data files delete file ``d`` names, with its rows for each (read once)."""
        known = files.names.get(d.file_path)
        if known is None:
            scope = file_scope(d)
            if scope is not None:
                known = {scope: d.record_count}
            else:
                with io.new_input(d.file_path).open() as f:
                    paths = pq.read_table(f, columns=["file_path"]).column("file_path")
                counts = pc.value_counts(paths)
                known = {v["values"].as_py(): v["counts"].as_py() for v in counts}
            files.names[d.file_path] = known
        return known

    def files(self, name: tuple[str, str], table: Table, current: Snapshot) -> TableFiles:
        """The table's live files, followed through the snapshots since the last look (their own manifests'
        added and deleted entries), or read whole (the first look, or too many snapshots since)."""
        io = table.io
        known = self.tables.get(name)
        since = _since(table, current, known.snapshot_id if known is not None else None)
        if known is None or since is None:
            known = self.tables[name] = TableFiles(current.snapshot_id)
            for manifest in current.manifests(io):
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                    self._added(known, entry.data_file)
            return known
        for snapshot in since:
            for manifest in snapshot.manifests(io):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue  # listed before: its entries are known
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    if entry.snapshot_id != snapshot.snapshot_id:
                        continue
                    if entry.status == ManifestEntryStatus.ADDED:
                        self._added(known, entry.data_file)
                    elif entry.status == ManifestEntryStatus.DELETED:
                        path = entry.data_file.file_path
                        for kept in (known.data, known.deletes, known.names):
                            kept.pop(path, None)
                        known.small.discard(path)
                        known.skipped.discard(path)
        known.snapshot_id = current.snapshot_id
        return known

    def _added(self, known: TableFiles, f: DataFile) -> None:
        if f.content == DataFileContent.DATA:
            known.data[f.file_path] = LiveFile(f.file_size_in_bytes, f.record_count, _group(f), f)
            if is_small(f.file_size_in_bytes, f.record_count, self.small_file_bytes):
                known.small.add(f.file_path)
        elif f.content == DataFileContent.POSITION_DELETES:
            known.deletes[f.file_path] = f  # (equality deletes: none binlake writes, never removed here)


def _since(table: Table, current: Snapshot, snapshot_id: int | None) -> list[Snapshot] | None:
    """The snapshots after ``snapshot_id`` up to ``current``, oldest first; None where it is not among the
    current one's last _CHAIN ancestors."""
    out: list[Snapshot] = []
    snapshot: Snapshot | None = current
    while snapshot is not None and len(out) <= _CHAIN:
        if snapshot.snapshot_id == snapshot_id:
            return out[::-1]
        out.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    return None
