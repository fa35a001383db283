"""A mirror's scan planning with its manifests' entries kept between batches (issue 39).

pyiceberg plans a scan by reading every manifest of the snapshot whose partition summary the filter cannot rule
out, and decodes each one's Avro entries again at every plan. A batch of keys spread over a mirror rules out none:
each batch read all of its mirror's manifests (a data and a delete manifest more per batch until compaction merges
them), so its planning grew with the table's history. A committed manifest never changes, so its entries, read once
(sequence numbers inherited from the manifest as pyiceberg does), are kept by manifest path within a share of
``land.key_memory`` (batch/recent_files.RecentFiles: the least recently used go first), and a plan reads only the
manifests the last commits added. The entries are then filtered and paired with their delete files by pyiceberg's
own planner, unchanged.

``DeletedPositions``: the positions a position delete file deletes, by data file, kept the same way (a delete file
never changes either): a batch searching a data file with delete files reads none it read before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestFile
from pyiceberg.table import ManifestGroupPlanner, _min_sequence_number
from pyiceberg.typedef import KeyDefaultDict
from pyiceberg.utils.concurrent import ExecutorFactory

from ..batch.recent_files import RecentFiles

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.io import FileIO
    from pyiceberg.table import FileScanTask, Table

_ENTRY_BYTES = 2048  # a decoded manifest entry (a DataFile with its column statistics), roughly, in Python objects
ONE_CALL = 1 << 62  # a KeptManifests budget that drops nothing: what one call reads
_DATA_FILE_BYTES = 256  # a delete file's positions of one data file: the path and the array's overhead


class _Entries:
    """A manifest's live entries as read (its ``nbytes``: their estimated size)."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[ManifestEntry]) -> None:
        self.entries = entries

    @property
    def nbytes(self) -> int:
        return _ENTRY_BYTES * max(len(self.entries), 1)


class _Positions:
    """A position delete file's positions, by the data file they delete from."""

    __slots__ = ("by_path",)

    def __init__(self, by_path: dict[str, np.ndarray]) -> None:
        self.by_path = by_path

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes + _DATA_FILE_BYTES for a in self.by_path.values()) or _DATA_FILE_BYTES


class KeptManifests:
    """Manifests' entries and position delete files' positions kept between a job's batches within ``budget``
    bytes, shared by its tables (paths are the lake's, unique across tables); ``setting``: the budget's, named
    where what is dropped for want of room is read again."""

    def __init__(self, budget: int, setting: str | None = None) -> None:
        self.entries: RecentFiles[_Entries] = RecentFiles(budget // 2, setting)
        self.positions: RecentFiles[_Positions] = RecentFiles(budget // 2, setting)

    def plan(self, table: Table, row_filter: BooleanExpression) -> list[FileScanTask]:
        """``table.scan(row_filter).plan_files()`` of the current snapshot, its manifests read once."""
        snapshot = table.current_snapshot()
        if snapshot is None:
            return []
        planner = _KeptPlanner(self, table.metadata, table.io, row_filter)
        return list(planner.plan_files(snapshot.manifests(table.io)))

    def manifest(self, io: FileIO, manifest: ManifestFile) -> list[ManifestEntry]:
        """A committed manifest's live entries."""
        kept = self.entries.get(manifest.manifest_path)
        if kept is None:
            kept = _Entries(manifest.fetch_manifest_entry(io, discard_deleted=True))
            self.entries.put(manifest.manifest_path, kept)
        return kept.entries

    def deleted(self, io: FileIO, path: str, delete_files: Iterable[DataFile]) -> np.ndarray:
        """The positions of the data file ``path`` that its position delete files ``delete_files`` delete (sorted,
        distinct)."""
        found = [self._delete_file(io, d).by_path.get(path) for d in delete_files
                 if d.content == DataFileContent.POSITION_DELETES]
        arrays = [a for a in found if a is not None]
        return np.unique(np.concatenate(arrays)) if arrays else np.zeros(0, np.int64)

    def live(self, io: FileIO, path: str, delete_files: Iterable[DataFile], positions: np.ndarray) -> np.ndarray:
        """Those of ``positions`` (of the data file ``path``) that its position delete files ``delete_files`` do not
        delete: each delete file's positions searched (a batch's few rows of a file against its many deleted
        ones; merging them first, as ``deleted`` does, took most of a batch's time on a mirror of 1,000,000 rows
        under spread updates)."""
        kept = np.ones(len(positions), bool)
        for d in delete_files:
            if d.content != DataFileContent.POSITION_DELETES:
                continue
            gone = self._delete_file(io, d).by_path.get(path)
            if gone is not None and len(gone):
                at = np.minimum(np.searchsorted(gone, positions), len(gone) - 1)
                kept &= gone[at] != positions
        return positions[kept]

    def _delete_file(self, io: FileIO, delete_file: DataFile) -> _Positions:
        kept = self.positions.get(delete_file.file_path)
        if kept is None:
            if delete_file.file_format != FileFormat.PARQUET:
                raise ValueError(f"a position delete file in {delete_file.file_format}: {delete_file.file_path}")
            with io.new_input(delete_file.file_path).open() as f:
                rows = pq.read_table(f, columns=["file_path", "pos"])
            grouped = rows.group_by("file_path").aggregate([("pos", "list")])
            kept = _Positions({p: np.sort(np.asarray(v, np.int64)) for p, v in zip(  # (sorted: the spec's order)
                grouped.column("file_path").to_pylist(), grouped.column("pos_list").to_pylist(), strict=True)})
            self.positions.put(delete_file.file_path, kept)
        return kept


class _KeptPlanner(ManifestGroupPlanner):
    """pyiceberg's planner of a group of manifests, their entries taken from ``kept``."""

    def __init__(self, kept: KeptManifests, metadata: Any, io: FileIO, row_filter: BooleanExpression) -> None:
        super().__init__(metadata, io, row_filter)
        self.kept = kept

    def plan_manifest_entries(self, manifests: Iterable[ManifestFile]) -> Iterator[list[ManifestEntry]]:
        evaluators: dict[int, Any] = KeyDefaultDict(self._build_manifest_evaluator)
        found = [m for m in manifests if evaluators[m.partition_spec_id](m)]
        partitions: dict[int, Any] = KeyDefaultDict(self._build_partition_evaluator)
        metrics = self._build_metrics_evaluator()
        least = _min_sequence_number(found)

        def matching(job: tuple[ManifestFile, Any]) -> list[ManifestEntry]:
            manifest, wanted = job
            return [e for e in self.kept.manifest(self.io, manifest) if wanted(e.data_file) and metrics(e.data_file)]

        return ExecutorFactory.get_or_create().map(  # (the evaluators built here, not on the pool's threads)
            matching, [(m, partitions[m.partition_spec_id]) for m in found if self._check_sequence_number(least, m)])
