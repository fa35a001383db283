"""pyiceberg's transactions and commits without whole copies of the table's metadata (issue 39).

pyiceberg (0.12) works out a table's metadata with updates applied (``update_table_metadata``) by applying each
update to the frozen metadata model (each a shallow ``model_copy`` with the changed fields), then returns a deep
copy of the result: every snapshot, summary and log entry copied. A transaction does it at every read of its
``table_metadata`` (15-20 a commit of a snapshot) and the catalog once more at the commit, so a commit's cost grew
with the table's snapshots: an append to a table of 600 snapshots took ~0.2 s, 0.15 ms more per snapshot kept,
while a job landing every second keeps ~3,600 per table at the default retention (land.iceberg_snapshot_retention,
1 hour). The models are frozen and every update makes new ones, so nothing needs the copy:

- ``staged_metadata``: the updates applied as pyiceberg applies them (its own per-update functions and checks),
  without the deep copy;
- ``KeptTransaction``: a transaction whose ``table_metadata`` is that, worked out again only when its table's
  metadata or its updates change (``transaction(table)``: the job's transactions);
- ``StagedCommits``: a catalog mix-in staging each commit to an existing table the same way (the Hadoop catalog,
  iceberg/hadoop.py, and the SQL one, iceberg/catalog.py); a table's creation keeps pyiceberg's validated path.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyiceberg.table import Table, Transaction
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)
from pyiceberg.utils.datetime import datetime_to_millis


def staged_metadata(base: TableMetadata, updates: tuple[TableUpdate, ...],
                    metadata_location: str | None = None) -> TableMetadata:
    """``base`` with ``updates`` applied, as pyiceberg's ``update_table_metadata`` returns it (``metadata_location``:
    the current metadata file's, which a commit logs), sharing what did not change with ``base``."""
    changes = _TableMetadataUpdateContext()
    staged = base
    for update in updates:
        staged = _apply_table_update(update, staged, changes)
    if changes.has_changes():
        if metadata_location:
            staged = _update_table_metadata_log(staged, metadata_location, base.last_updated_ms)
        if staged.last_updated_ms == base.last_updated_ms:
            staged = staged.model_copy(update={"last_updated_ms": datetime_to_millis(datetime.now().astimezone())})
    schema = staged.schema()
    staged.spec().check_compatible(schema)
    staged.sort_order().check_compatible(schema)
    return staged


class KeptTransaction(Transaction):
    """A Transaction whose staged metadata is ``staged_metadata``'s, worked out again only when its table's
    metadata or its updates change."""

    def __init__(self, table: Table, autocommit: bool = False) -> None:
        super().__init__(table, autocommit)
        self._kept: tuple[Any, Any, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        kept = self._kept
        if kept is None or kept[0] is not base or kept[1] is not updates:
            kept = self._kept = (base, updates, staged_metadata(base, updates))
        return kept[2]


def transaction(table: Table) -> Transaction:
    """A transaction of ``table`` (``table.transaction()``'s, its metadata staged without copies)."""
    return KeptTransaction(table)


class StagedCommits:
    """A mix-in of a pyiceberg ``MetastoreCatalog`` whose commits to an existing table stage the new metadata with
    ``staged_metadata`` (the next metadata file's location as the catalog names it)."""

    def _update_and_stage_table(self, current_table: Table | None, table_identifier: Any,
                                requirements: tuple[Any, ...], updates: tuple[TableUpdate, ...]) -> Any:
        from pyiceberg.table import StagedTable

        if current_table is None:
            return super()._update_and_stage_table(  # type: ignore[misc]
                current_table, table_identifier, requirements, updates)
        for requirement in requirements:
            requirement.validate(current_table.metadata)
        metadata = staged_metadata(current_table.metadata, updates, current_table.metadata_location)
        version = self._parse_metadata_version(current_table.metadata_location) + 1  # type: ignore[attr-defined]
        location = load_location_provider(metadata.location, metadata.properties).new_table_metadata_file_location(
            version)
        return StagedTable(identifier=table_identifier, metadata=metadata, metadata_location=location,
                           io=self._load_file_io(properties=metadata.properties,  # type: ignore[attr-defined]
                                                 location=location),
                           catalog=self)  # type: ignore[arg-type]
