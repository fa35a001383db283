"""Removal of an Iceberg table's orphan files (docs/LAND.md, "Iceberg"): files under the table's ``data/`` and
``metadata/`` that no live metadata names, left by a crash (a batch's data files written but never committed,
the files of snapshots expired just before it, a metadata file written but never made current).

The job is the only writer of its lake (the lease, lake/lease.py) and a table is written by one thread at a
time, so the job looks at a table where nothing of it is in flight: when it first loads the table (after
taking the lease, before its first commit to it), when it creates the table (an earlier creation's metadata file,
written before a crash kept the catalog from naming it, is at the same location) and after every ``every``
commits of it (in the table's upkeep, upkeep.py, which runs while no writer holds the table). A file is deleted
only where all of these hold:

- it is under ``<table location>/data/`` or ``/metadata/`` and of a kind the writers make (``.parquet``,
  ``.avro``, ``.metadata.json``, ``.puffin``, ``.stats``): anything else (a Hadoop catalog's
  ``version-hint.text``) is never touched;
- it is older than ``age`` (its modification time);
- it was listed *before* the live files were gathered (a file committed meanwhile is then among them), and
  none of these names it: the current metadata file, every metadata file of its metadata log, and for
  each of them every snapshot's manifest list, each manifest those list (any status: deleted entries too)
  and each data file those manifests list, with the statistics files. A file of a previous metadata file's
  snapshot stays as long as that metadata file is in the log.

Any file that cannot be read for another reason than its absence (a previous metadata file or a manifest
deleted already is absent) stops the removal for that table: nothing is deleted on a partial view."""

from __future__ import annotations

import datetime
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from ..lake.files import LakeFiles
from .catalog import first_line

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger("binlake.land")
KINDS = (".parquet", ".avro", ".metadata.json", ".puffin", ".stats")
_DIRECTORIES = ("data", "metadata")


@dataclass
class OrphanFiles:
    files: LakeFiles
    lake: str  # the lake's URI (IcebergCatalog.warehouse): only tables located in it are looked at
    age: datetime.timedelta = datetime.timedelta(hours=1)
    every: int = 1_000  # commits of a table between two looks (0: only when the job first loads it)
    _commits: dict[tuple[str, str], int] = field(default_factory=dict)

    def due(self, name: tuple[str, str]) -> bool:
        """The job committed to the table: whether its orphans are to be looked for (every ``every`` commits)."""
        n = self._commits[name] = self._commits.get(name, 0) + 1
        return bool(self.every) and n % self.every == 0

    def remove(self, table: Table) -> list[str]:
        """The table's orphan files older than ``age`` deleted (their paths, as the filesystem names them)."""
        started = time.monotonic()
        root = self.files.path(table.location()).rstrip("/")
        if not (root + "/").startswith(self.files.path(self.lake).rstrip("/") + "/"):
            return []  # not a table of this lake
        cutoff = time.time() - self.age.total_seconds()
        listed = self._listed(root)  # before the live files: one committed meanwhile is among them
        candidates = [path for path, mtime in listed if mtime is None or mtime <= cutoff]
        if not candidates:
            return []
        try:
            live = live_files(table, self.files)
        except Exception as exc:
            log.warning("%s: orphan files not removed: its metadata could not be read whole: %s", table.name(),
                        first_line(exc))
            return []
        doomed = sorted(p for p in candidates if p not in live)
        for path in doomed:
            try:
                self.files.filesystem.delete_file(path)
            except FileNotFoundError:
                pass
        if doomed:
            log.info("%s: %d orphan files removed (named by no live metadata, older than %s) in %.1fs",
                     ".".join(table.name()), len(doomed), self.age, time.monotonic() - started)
        return doomed

    def _listed(self, root: str) -> list[tuple[str, float | None]]:
        """The files of the kinds the writers make under the table's data/ and metadata/, with their
        modification times (seconds since the epoch)."""
        out: list[tuple[str, float | None]] = []
        for directory in _DIRECTORIES:
            selector = pafs.FileSelector(f"{root}/{directory}", allow_not_found=True, recursive=True)
            for info in self.files.filesystem.get_file_info(selector):
                if info.type == pafs.FileType.File and info.path.endswith(KINDS):
                    mtime = info.mtime.timestamp() if info.mtime is not None else None
                    out.append((info.path, mtime))
        return out


def live_files(table: Table, files: LakeFiles) -> set[str]:
    """Every file the table's live metadata names, as ``files``' paths (LakeFiles.path): the current metadata file
    and those of its metadata log, and each of their snapshots' manifest lists, manifests and data files."""
    from pyiceberg.serializers import FromInputFile

    io = table.io
    metadata_files = [table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)]
    live = set(metadata_files)
    snapshots: dict[str, Any] = {}
    for path in metadata_files:
        if path == table.metadata_location:
            metadata = table.metadata
        else:
            try:
                metadata = FromInputFile.table_metadata(io.new_input(path))
            except FileNotFoundError:
                continue  # deleted already (older than the log's bound): it names nothing more
        for snapshot in metadata.snapshots:
            snapshots.setdefault(snapshot.manifest_list, snapshot)
        live.update(s.statistics_path for s in metadata.statistics)
        live.update(s.statistics_path for s in getattr(metadata, "partition_statistics", []))
    live.update(snapshots)
    manifests: dict[str, Any] = {}
    for snapshot in snapshots.values():
        try:
            for manifest in snapshot.manifests(io):
                manifests.setdefault(manifest.manifest_path, manifest)
        except FileNotFoundError:
            continue  # the manifest list of a snapshot expired since: its files are a live snapshot's or gone
    live.update(manifests)
    for manifest in manifests.values():
        try:
            live.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=False))
        except FileNotFoundError:
            continue
    return {files.path(p) for p in live}

