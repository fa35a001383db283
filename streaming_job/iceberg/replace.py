"""The ``replace`` snapshot of a compaction (compaction.py) of an Iceberg table with position delete files.

pyiceberg 0.12 rewrites data entries only (``_OverwriteFiles`` writes every manifest it rewrites as a data
manifest): ``ReplaceFiles`` is a snapshot producer of its own on pyiceberg's ``_SnapshotProducer`` (its manifest list,
summary, added-data manifest, commit and retry, and its validation that the rewritten data files are still live and
gained no delete file since), writing the manifests it changes itself: a data manifest through
``_SnapshotProducer.new_manifest_writer``, a delete manifest through position_deletes' ``delete_manifests``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from pyiceberg.exceptions import ValidationException
from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import _SnapshotProducer
from pyiceberg.typedef import EMPTY_DICT, KeyDefaultDict

from .position_deletes import delete_manifest_writer, delete_manifests

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.io import FileIO
    from pyiceberg.manifest import ManifestFile
    from pyiceberg.table import Transaction


class ReplaceFiles(_SnapshotProducer["ReplaceFiles"]):
    """A ``replace`` snapshot (Iceberg's operation of a rewrite of the same rows: files removed and added, no data
    changed) in ``tx``, with the summary ``properties``: the data files ``data`` and the delete files ``deletes``
    removed (each marked DELETED in a copy of its manifest that keeps the others EXISTING, as Java Iceberg does:
    what expiry reads to delete them), the data files appended and the delete files ``added`` added (a delete
    manifest of their own). pyiceberg 0.12 sums up the totals of appends, overwrites and deletes only: the summary
    is an overwrite's, then named ``replace``."""

    def __init__(self, tx: Transaction, io: FileIO, properties: dict[str, str], commit_uuid: uuid.UUID,
                 data: set[DataFile], deletes: set[DataFile], added: list[DataFile]) -> None:
        super().__init__(operation=Operation.OVERWRITE, transaction=tx, io=io, commit_uuid=commit_uuid,
                         snapshot_properties=properties)
        self._deleted_data_files = set(data)  # pyiceberg's validation: still live, no delete file added since
        self._removed_deletes = deletes
        self._added_deletes = added

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []  # written in the manifests they were listed in (_existing_manifests)

    def _existing_manifests(self) -> list[ManifestFile]:
        parent = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id) \
            if self._parent_snapshot_id is not None else None
        if parent is None:
            raise ValueError("a rewrite of a table without a snapshot")
        evaluators: dict[int, Callable[[ManifestFile], bool]] = KeyDefaultDict(self._build_manifest_evaluator)
        out, found = [], set()
        for manifest in parent.manifests(self._io):
            if not (manifest.has_added_files() or manifest.has_existing_files()):
                continue  # its files all removed by an earlier snapshot (which lists it): not carried on
            deletes = manifest.content == ManifestContent.DELETES
            removed = self._removed_deletes if deletes else self._deleted_data_files
            if not removed or not (deletes or evaluators[manifest.partition_spec_id](manifest)):
                out.append(manifest)  # none of the removed files' partitions (data manifests: pyiceberg's pruning)
                continue
            entries = manifest.fetch_manifest_entry(self._io, discard_deleted=True)
            gone = {e.data_file.file_path for e in entries if e.data_file in removed}
            if not gone:
                out.append(manifest)
                continue
            found |= gone
            spec = self.spec(manifest.partition_spec_id)
            writer = delete_manifest_writer(self, spec) if deletes else self.new_manifest_writer(spec)
            with writer:
                for e in entries:
                    dropped = e.data_file.file_path in gone
                    writer.add_entry(ManifestEntry.from_args(
                        status=ManifestEntryStatus.DELETED if dropped else ManifestEntryStatus.EXISTING,
                        snapshot_id=self._snapshot_id if dropped else e.snapshot_id,
                        sequence_number=e.sequence_number, file_sequence_number=e.file_sequence_number,
                        data_file=e.data_file))
            out.append(writer.to_manifest_file())
        missing = {f.file_path for f in (*self._deleted_data_files, *self._removed_deletes)} - found
        if missing:
            raise ValidationException(f"files to rewrite are not live: {sorted(missing)}")
        return [*delete_manifests(self, self._added_deletes), *out]

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        # pyiceberg's summary counts the files it is given by their content (removed-delete-files,
        # removed-position-deletes, the totals): the delete files join the data files for it alone
        added, removed = self._added_data_files, self._deleted_data_files
        self._added_data_files = [*added, *self._added_deletes]
        self._deleted_data_files = {*removed, *self._removed_deletes}
        try:
            summary = super()._summary(snapshot_properties)
        finally:
            self._added_data_files, self._deleted_data_files = added, removed
        return Summary(Operation.REPLACE, **summary.additional_properties)
