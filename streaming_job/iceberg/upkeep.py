"""What Iceberg's upkeep (format/upkeep.py: its queue and thread) knows of a table: its Table object, read and
committed through copies (``copy_of``, ``on_copy``: a writer's commit replaces the job's Table's metadata meanwhile),
and a loaded table's entry (``loaded_due``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..batch.keys import recorded_key
from ..format.upkeep import Due

if TYPE_CHECKING:
    from pyiceberg.table import Table


def loaded_due(table: Table, batch: dict[str, str]) -> Due[Table] | None:
    """The tidy upkeep's entry of a table the job loaded (Upkeep.loaded): its newest snapshot's values of a batch's
    summary properties (``batch``'s keys: carried by its compaction's snapshot), a mirror's recorded key; None where
    its newest snapshot is not a batch's."""
    current = table.current_snapshot()
    found = current.summary.additional_properties if current is not None and current.summary is not None else {}
    if not all(k in found for k in batch):
        return None
    return Due(table, {k: found[k] for k in batch}, recorded_key(dict(table.metadata.properties)) or [], commits=0)


def copy_of(table: Table) -> Table:
    """Another Table object of ``table``'s metadata now (a commit through either replaces only its own)."""
    from pyiceberg.table import Table

    return Table(table.name(), table.metadata, table.metadata_location, table.io, table.catalog, table.config)


@contextmanager
def on_copy(table: Table) -> Iterator[Table]:
    """A copy of ``table`` to commit through; then ``table`` takes the copy's metadata, what was committed (also
    where the block failed after a commit)."""
    copy = copy_of(table)
    try:
        yield copy
    finally:
        table.metadata, table.metadata_location = copy.metadata, copy.metadata_location
