"""pyiceberg's transactions, their staged metadata worked out once per change.

pyiceberg (0.12) works out a transaction's ``table_metadata`` (the table's metadata with the updates staged so far)
at every access: the updates applied again, then a deep copy of the whole metadata, every snapshot and log entry
of it. A commit of a snapshot reads it 15-20 times (its schema, spec, manifests, summary, requirements), so on a
mirror with a few hundred snapshots these copies were ~13% of a running job's driver time (py-spy, 2,000 UPDATEs/s
on a 1,000,000-row Iceberg mirror). The metadata is a frozen model and the updates a tuple that staging replaces:
the result is kept while both stay the same objects.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata


class KeptTransaction(Transaction):
    """A Transaction whose staged metadata is worked out again only when its table's metadata or its updates
    change."""

    def __init__(self, table: Table, autocommit: bool = False) -> None:
        super().__init__(table, autocommit)
        self._kept: tuple[Any, Any, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        kept = self._kept
        if kept is None or kept[0] is not base or kept[1] is not updates:
            kept = self._kept = (base, updates, super().table_metadata)
        return kept[2]


def transaction(table: Table) -> Transaction:
    """A transaction of ``table`` (``table.transaction()``'s, its metadata kept between changes)."""
    return KeptTransaction(table)
