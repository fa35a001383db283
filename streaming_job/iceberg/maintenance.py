"""Keeping a long-running job's Iceberg tables bounded by the job itself (docs/LAND.md, "Iceberg"): compaction of
their small data files, and expiry of old snapshots with the deletion of the files only those referenced.
pyiceberg 0.12 expires snapshots from the metadata only and rewrites no data files: both are built here on
its snapshot producers.

- **Compaction** (the Delta side's settings, compaction.py): once a table (a change log: one commit date)
  holds ``compact_files`` small data files (batch.small_files: under ``small_file_bytes`` and its rows), those
  of fewest rows up to its rows and ``budget`` bytes are read and written again (a mirror's rows in key order)
  in one ``replace`` snapshot: the same rows, which Iceberg's incremental readers skip. It carries the batch's
  (app id, batch id) summary properties of the commit it follows, so the job's newest snapshot always names its
  last batch (iceberg_catalog.landed_batch), however many snapshots are expired.
Their settings are the configuration's (``IcebergMaintenance.of``: land.compact_files, land.small_file_bytes,
land.compact_bytes, land.iceberg_expire_every, land.iceberg_snapshot_retention, land.iceberg_metadata_versions).

- **Expiry**: every ``expire_every`` commits of a table, the snapshots older than ``retention`` (the current
  one never) leave the metadata, and the files no remaining snapshot references are deleted: their
  manifest lists, the manifests no longer listed, and the data files they had removed. Only files named
  by committed metadata are deleted (nothing is found by listing directories), so files of a commit in
  flight are never touched. The job's tables have one history (no branches, tags or rollbacks): where one
  has another, its files are left alone."""

from __future__ import annotations

import datetime
import itertools
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ingester.config import LandConfig
from ingester.config_values import duration_seconds

from ..batch.small_files import COMPACT_ROWS, FileSize, fewest_rows, is_small

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger("binlake.land")
METADATA_VERSIONS = "write.metadata.previous-versions-max"
_CHAIN = 50  # snapshots followed since the last look at a table's small files, beyond which it is read again


@dataclass
class SmallFiles:
    """A table's data files under the size bound, as of one snapshot."""

    snapshot_id: int
    files: dict[str, DataFile] = field(default_factory=dict)
    skipped: set[str] = field(default_factory=set)  # files a compaction could not read together


@dataclass
class IcebergMaintenance:
    compact_files: int = 32
    small_file_bytes: int = 8 << 20
    budget: int = 256 << 20
    retention: datetime.timedelta = datetime.timedelta(hours=1)
    expire_every: int = 100
    metadata_versions: int = 20  # previous metadata files a table keeps (write.metadata.previous-versions-max)
    # orphan files (iceberg/orphans.py): removed where older than orphan_age, every orphan_every commits of a table
    orphan_age: datetime.timedelta = datetime.timedelta(hours=1)
    orphan_every: int = 1_000
    _small: dict[tuple[str, str], SmallFiles] = field(default_factory=dict)
    _commits: dict[tuple[str, str], int] = field(default_factory=dict)

    @classmethod
    def of(cls, land: LandConfig) -> IcebergMaintenance:
        """The configuration's settings (land.compact_*, land.iceberg_*)."""
        return cls(land.compact_files, land.small_file_bytes, land.compact_bytes,
                   datetime.timedelta(seconds=duration_seconds(land.iceberg_snapshot_retention)),
                   land.iceberg_expire_every, land.iceberg_metadata_versions,
                   datetime.timedelta(seconds=duration_seconds(land.iceberg_orphan_age)), land.iceberg_orphan_every)

    def table_properties(self) -> dict[str, str]:
        """The properties of a table that bound its metadata files (set at its creation, and on a table made
        with other values at the job's first commit to it)."""
        return {METADATA_VERSIONS: str(self.metadata_versions)}

    def committed(self, name: tuple[str, str], table: Table, properties: dict[str, str], key: list[str]) -> None:
        """The job committed to ``table`` (summary ``properties``): its small files compacted, its old
        snapshots expired where due. ``key``: a mirror's key (its rows' order in a compacted file)."""
        wanted = self.table_properties()
        if name not in self._commits and any(table.metadata.properties.get(k) != v for k, v in wanted.items()):
            with table.transaction() as tx:  # a table made before the setting changed
                tx.set_properties(wanted)
        self.compact(name, table, properties, key)
        n = self._commits[name] = self._commits.get(name, 0) + 1
        if n % self.expire_every == 0:
            expire(table, datetime.datetime.now(datetime.UTC) - self.retention)

    def compact(self, name: tuple[str, str], table: Table, properties: dict[str, str], key: list[str]) -> bool:
        """The small files of the partitions that hold ``compact_files`` of them rewritten together."""
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
        from pyiceberg.table import FileScanTask

        current = table.current_snapshot()
        summary = current.summary if current is not None else None
        if current is None or summary is None or int(summary.get("total-data-files") or 0) < self.compact_files:
            self._small.pop(name, None)  # too few files in all: nothing to track
            return False
        small = self._small_files(name, table, current)
        picked = self._pick(small)
        if picked is None:
            return False
        started = time.monotonic()
        scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
        try:
            rows = scan.to_table([FileScanTask(f) for f in picked])
        except Exception as exc:  # none binlake wrote: columns are only added or promoted
            log.debug("%s.%s: %d small files not compacted: %s", *name, len(picked), exc)
            small.skipped.update(f.file_path for f in picked)
            return False
        if key:
            rows = rows.sort_by([(k, "ascending") for k in key])
        with table.transaction() as tx:
            write = _replace(tx, table, properties)
            for f in picked:
                write.delete_data_file(f)
            for f in _dataframe_to_data_files(tx.table_metadata, rows, table.io, write.commit_uuid, itertools.count()):
                write.append_data_file(f)
            write.commit()
        log.debug("%s.%s: %d small files compacted in %.1fs", *name, len(picked), time.monotonic() - started)
        return True

    def _pick(self, small: SmallFiles) -> list[DataFile] | None:
        """The small files of each partition that has ``compact_files`` of them (most first), those of fewest
        rows first within the compaction's rows and the byte budget in all (batch.small_files)."""
        groups: dict[tuple[Any, ...], list[DataFile]] = {}
        for path, f in sorted(small.files.items()):
            if path not in small.skipped:
                groups.setdefault((f.spec_id, *_values(f.partition)), []).append(f)
        out: list[DataFile] = []
        rows_left, bytes_left = COMPACT_ROWS, self.budget
        for files in sorted(groups.values(), key=len, reverse=True):
            if len(files) < self.compact_files:
                break
            by_path = {f.file_path: f for f in files}
            kept = fewest_rows([FileSize(f.file_path, f.file_size_in_bytes, f.record_count) for f in files],
                               bytes_left, rows_left)
            out += [by_path[k.name] for k in kept]
            rows_left -= sum(k.rows for k in kept)
            bytes_left -= sum(k.size for k in kept)
        return out if len(out) >= 2 else None

    def _small_files(self, name: tuple[str, str], table: Table, current: Snapshot) -> SmallFiles:
        """The table's small files, followed through the snapshots since the last look (their own manifests'
        added and deleted entries), or read whole (the first look, or too many snapshots since)."""
        from pyiceberg.manifest import ManifestEntryStatus

        io = table.io
        known = self._small.get(name)
        since = _since(table, current, known.snapshot_id if known is not None else None)
        if known is None or since is None:
            known = SmallFiles(current.snapshot_id)
            for manifest in current.manifests(io):
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                    if self._is_small(entry.data_file):
                        known.files[entry.data_file.file_path] = entry.data_file
            self._small[name] = known
            return known
        for snapshot in since:
            for manifest in snapshot.manifests(io):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue  # listed before: its entries are known
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    f = entry.data_file
                    if entry.snapshot_id != snapshot.snapshot_id:
                        continue
                    if entry.status == ManifestEntryStatus.ADDED and self._is_small(f):
                        known.files[f.file_path] = f
                    elif entry.status == ManifestEntryStatus.DELETED:
                        known.files.pop(f.file_path, None)
                        known.skipped.discard(f.file_path)
        known.snapshot_id = current.snapshot_id
        return known

    def _is_small(self, f: DataFile) -> bool:
        return is_small(f.file_size_in_bytes, f.record_count, self.small_file_bytes)


def _replace(tx: Any, table: Table, properties: dict[str, str]) -> Any:
    """A ``replace`` snapshot producer (Iceberg's operation of a rewrite of the same rows: data files removed
    and added, no data changed) in ``tx``, with the summary ``properties``. pyiceberg 0.12 sums up the
    totals of overwrites only: its summary is an overwrite's, the operation then named ``replace``."""
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    class Rewrite(_OverwriteFiles):
        def _summary(self, snapshot_properties: dict[str, str] = properties) -> Summary:
            summary = super()._summary(snapshot_properties)
            return Summary(Operation.REPLACE, **summary.additional_properties)

    return Rewrite(operation=Operation.OVERWRITE, transaction=tx, io=table.io, commit_uuid=uuid.uuid4(),
                   snapshot_properties=properties)


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


def history(table: Table) -> list[Snapshot] | None:
    """The table's snapshots, newest (the current one) first, where they are one line of history: each the
    parent of the next, no other branch or tag. None otherwise."""
    current = table.current_snapshot()
    metadata = table.metadata
    if current is None or set(metadata.refs) - {"main"}:
        return None
    chain = [current]
    while chain[-1].parent_snapshot_id is not None:
        parent = table.snapshot_by_id(chain[-1].parent_snapshot_id)
        if parent is None:
            break
        chain.append(parent)
    return chain if len(chain) == len(metadata.snapshots) else None


def expire(table: Table, older: datetime.datetime) -> int:
    """The table's snapshots older than ``older`` (never the current one) expired, and the files only they
    referenced deleted; the number of files deleted."""
    from pyiceberg.manifest import ManifestEntryStatus

    chain = history(table)
    if chain is None:  # not one line: the metadata only, as pyiceberg does it
        table.maintenance.expire_snapshots().older_than(older).commit()
        return 0
    cutoff = int(older.timestamp() * 1000)
    first = next((i for i, s in enumerate(chain) if i > 0 and s.timestamp_ms < cutoff), None)
    if first is None:
        return 0
    expired, live = chain[first:], chain[first - 1]  # the oldest snapshot that stays
    io = table.io
    listed = {m.manifest_path: m for s in [*expired, live] for m in s.manifests(io)}
    kept = {m.manifest_path for s in (live, chain[0]) for m in s.manifests(io)}
    # A data file a snapshot removed is referenced by the snapshots before it only: once its parent is
    # expired (the snapshot itself expired, or the oldest that stays), nothing references it
    removers = {s.snapshot_id for s in [*expired, live]}
    data = {e.data_file.file_path for m in listed.values() if m.deleted_files_count
            for e in m.fetch_manifest_entry(io, discard_deleted=False)
            if e.status == ManifestEntryStatus.DELETED and e.snapshot_id in removers}
    table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in expired]).commit()
    doomed = sorted(data) + sorted(set(listed) - kept) + [s.manifest_list for s in expired]
    for path in doomed:
        try:
            io.delete(path)
        except FileNotFoundError:
            pass
    log.debug("%s: %d snapshots expired, %d files deleted", table.name(), len(expired), len(doomed))
    return len(doomed)


def _values(partition: Any) -> tuple[Any, ...]:
    """A data file's partition values (a pyiceberg Record)."""
    return tuple(partition)
