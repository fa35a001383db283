"""Keeping a long-running job's Iceberg tables bounded by the job itself (docs/LAND.md, "Iceberg"): compaction of
their small data files, and expiry of old snapshots with the deletion of the files only those referenced.
pyiceberg 0.12 expires snapshots from the metadata only and rewrites no data files: both are built here on
its snapshot producers. Both run after the job's commits to a table, on the upkeep's one thread beside the next
batches (upkeep.py), never two at once: a compaction reads and writes its files while the job's writers go on, and
keeps them out of the table only while it commits (upkeep.Upkeep.exclusive), as does the expiry.

- **Compaction** (iceberg/compaction.py; the Delta side's settings, delta/compaction.py): once a table (a change
  log: one commit date) holds ``compact_files`` small data files (batch.small_files: under ``small_file_bytes``
  and its rows), or a data file whose position-deleted rows pass batch.small_files.MERGE_SHARE of it, those of
  fewest rows up to its rows and ``budget`` bytes are read (with their delete files applied) and written again
  (a mirror's rows in key order) in one ``replace`` snapshot: the same rows, which Iceberg's incremental readers
  skip; the delete files naming no live data file left are removed in it, and a partition's delete files merged
  once it holds ``compact_files``. It carries the batch's (app id, batch id) summary properties of the newest commit
  it follows (it commits after the table's newest snapshot, while no writer commits: upkeep.py; it is given up, its
  files deleted, where a commit since it read the table removed a file it replaces, added a delete file naming a
  data file it rewrites, or changed the schema), so the job's newest snapshot always names its last batch
  (iceberg_catalog.landed_batch), however many snapshots are expired. Its reads and writes of data files run in a
  worker process at the lowest CPU priority (iceberg/rewrite.py), off the CPU time the batches and Spark use.
  A table no commit changed for land.quiet_compaction (30 s) is compacted whole, step by step (upkeep.py's
  tidy upkeeps; compaction.Compaction.plan's ``tidy``): every data file with deleted rows rewritten, its small files
  merged, its delete files merged or removed, so that a quiet table reads as fast as a compacted one.
Their settings are the configuration's (``IcebergMaintenance.of``: land.compact_files, land.small_file_bytes,
land.compact_bytes, land.iceberg_expire_every, land.iceberg_snapshot_retention, land.iceberg_metadata_versions,
land.quiet_compaction).

- **Expiry**: every ``expire_every`` commits of a table (an upkeep after several commits counts each), the
  snapshots older than ``retention`` (the current one never) leave the metadata, and the files no remaining snapshot
  references are deleted: their manifest lists, the manifests no longer listed, and the data and delete files they
  had removed. Only files named by committed metadata are deleted (nothing is found by listing directories), so
  files of a commit in flight are never touched. The job's tables have one history (no branches, tags or
  rollbacks): where one has another, its files are left alone."""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ingester.config import LandConfig
from ingester.config_values import duration_seconds

from ..batch.small_files import MERGE_FILES, MERGE_ROWS
from .rewrite import Rewriter, WorkerProcess
from .transactions import transaction

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

    from .compaction import Compaction, Prepared
    from .planning import KeptManifests

log = logging.getLogger("binlake.land")
METADATA_VERSIONS = "write.metadata.previous-versions-max"


@dataclass
class IcebergMaintenance:
    compact_files: int = MERGE_FILES
    small_file_bytes: int = 8 << 20
    budget: int = 256 << 20
    retention: datetime.timedelta = datetime.timedelta(hours=1)
    expire_every: int = 100
    metadata_versions: int = 20  # previous metadata files a table keeps (write.metadata.previous-versions-max)
    # orphan files (iceberg/orphans.py): removed where older than orphan_age, every orphan_every commits of a table
    orphan_age: datetime.timedelta = datetime.timedelta(hours=1)
    orphan_every: int = 1_000
    merge_rows: int = MERGE_ROWS  # a compaction's most rows (batch.small_files)
    # a compaction's reads and writes of data files: in a worker process at the lowest CPU priority (rewrite.py)
    rewriter: Rewriter = field(default_factory=WorkerProcess)
    quiet_after: float = 30.0  # seconds after a table's last commit when it is compacted whole (upkeep.py; 0: never)
    _compaction: Compaction | None = None
    _commits: dict[tuple[str, str], int] = field(default_factory=dict)

    @classmethod
    def of(cls, land: LandConfig) -> IcebergMaintenance:
        """The configuration's settings (land.compact_*, land.iceberg_*)."""
        return cls(land.compact_files or MERGE_FILES, land.small_file_bytes, land.compact_bytes,
                   datetime.timedelta(seconds=duration_seconds(land.iceberg_snapshot_retention)),
                   land.iceberg_expire_every, land.iceberg_metadata_versions,
                   datetime.timedelta(seconds=duration_seconds(land.iceberg_orphan_age)), land.iceberg_orphan_every,
                   quiet_after=duration_seconds(land.quiet_compaction))

    def table_properties(self) -> dict[str, str]:
        """The properties of a table that bound its metadata files (set at its creation, and on a table made
        with other values at the job's first commit to it)."""
        return {METADATA_VERSIONS: str(self.metadata_versions)}

    def prepare(self, name: tuple[str, str], table: Table, key: list[str],
                pause: Callable[[], None] = lambda: None, manifests: KeptManifests | None = None,
                tidy: bool = False) -> Prepared | None:
        """The table's compaction as of its current snapshot, read and written, not committed (None: none due).
        Called by the upkeep's one thread (format/upkeep.py) while the job's writers may commit to the table;
        ``pause`` between its steps; ``manifests``: the job's kept manifests (planning.py), its plan's; ``tidy``:
        a quiet table's, which leaves it compacted (compaction.Compaction.plan)."""
        return self._compactor().prepare(name, table, key, pause, manifests, tidy)

    def catch_up(self, name: tuple[str, str], table: Table, prepared: Prepared | None) -> Prepared | None:
        """``prepared`` with the deletes committed since it read followed onto its new files, beside the writers
        (compaction.py: ``finish`` then follows only the newest); None where it was given up (or was None)."""
        return prepared if prepared is not None and self._compactor().catch_up(name, table, prepared) else None

    def finish(self, name: tuple[str, str], table: Table, prepared: Prepared | None, properties: dict[str, str],
               commits: int = 1) -> bool:
        """After the job made ``commits`` commits to the table since its last upkeep (summary ``properties``: the
        newest's): ``prepared`` committed (or given up where a commit since conflicts with it: compaction.py; whether
        it was committed), then the table's old snapshots expired where due. Called by the upkeep's thread while no
        writer commits to the table (upkeep.Upkeep.exclusive), ``table`` its newest."""
        wanted = self.table_properties()
        if name not in self._commits and any(table.metadata.properties.get(k) != v for k, v in wanted.items()):
            with transaction(table) as tx:  # a table made before the setting changed
                tx.set_properties(wanted)
        compacted = prepared is not None and self._compactor().finish(name, table, prepared, properties)
        before = self._commits.get(name, 0)
        n = self._commits[name] = before + commits
        if n // self.expire_every > before // self.expire_every:  # a multiple of expire_every passed
            expire(table, datetime.datetime.now(datetime.UTC) - self.retention)
        return compacted

    def compact(self, name: tuple[str, str], table: Table, properties: dict[str, str], key: list[str]) -> bool:
        """The table's due rewrites (iceberg/compaction.py) made in one ``replace`` snapshot; whether one was."""
        return self._compactor().compact(name, table, properties, key)

    def _compactor(self) -> Compaction:
        from .compaction import Compaction

        if self._compaction is None:
            self._compaction = Compaction(self.compact_files, self.small_file_bytes, self.budget, self.merge_rows,
                                          self.rewriter)
        return self._compaction

    def close(self) -> None:
        """The compactions' worker process ended (rewrite.py; the next compaction starts one again)."""
        self.rewriter.close()


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
    # A data or delete file a snapshot removed (a DELETED entry of a data or delete manifest it wrote) is
    # referenced by the snapshots before it only: once its parent is expired (the snapshot itself expired, or
    # the oldest that stays), nothing references it
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
