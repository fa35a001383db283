"""``binlake verify`` on an Iceberg lake (iceberg/format.IcebergFormat): a mirror's rows read by pyiceberg for
the comparison (verify.py). The scan is pruned by the mirror's key statistics (the key columns are the
mirror's only column metrics): by the chunks' range of the first key column where it is an integer or a
decimal, by the chunks' keys where they are looked up; the rows are then cut in Arrow as Delta's are. The
results themselves are the Iceberg table ``_binlake.verify`` (format/verify_results.py), written by the format and
read back here (``IcebergResults``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..batch.mirror import SEQ, conform
from ..format.mirror_read import KeyCut, MirrorRead
from ..format.verify_results import ICEBERG_VERIFY, VerifyResults
from .tables import E, key_filter, range_filter, recorded_columns

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from .catalog import IcebergCatalog


class IcebergMirror(MirrorRead):
    """A mirror as pyiceberg loaded it from the catalog."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.columns = recorded_columns(dict(table.metadata.properties)) or []

    def rows(self, cut: KeyCut) -> pa.Table:
        schema = cut.schema
        if self.table.current_snapshot() is None or (cut.keys is not None and not cut.keys):
            return schema.empty_table()
        scan = self.table.scan(row_filter=_pruned(cut), selected_fields=(*cut.names, SEQ))
        return cut.filter(conform(scan.to_arrow(), schema))


def _pruned(cut: KeyCut) -> Any:
    """pyiceberg's row filter for the cut (files whose key statistics rule it out are not read): the keys looked
    up, or the first key column's range where pyiceberg compares it as MySQL orders it (integers, decimals)."""
    if cut.keys is not None:
        return key_filter(cut.key_table(), cut.pk)
    first = cut.pk[0]
    kind = cut.types[first]
    if not (kind in ("tinyint", "smallint", "int", "bigint") or kind.startswith("decimal(")):
        return E.AlwaysTrue()
    return range_filter(first, cut.bounds())


class IcebergResults(VerifyResults):
    def __init__(self, where: IcebergCatalog) -> None:
        self.where = where
        self._catalog: Catalog | None = None  # opened once: a reader polls

    def _rows(self, run: str | None) -> list[dict[str, Any]]:
        from pyiceberg import expressions
        from pyiceberg.exceptions import NoSuchTableError

        E: Any = expressions  # pydantic models whose constructors mypy misreads

        if self._catalog is None:
            self._catalog = self.where.open()
        try:
            table = self._catalog.load_table(ICEBERG_VERIFY)
        except NoSuchTableError:
            return []
        if table.current_snapshot() is None:
            return []
        where = E.AlwaysTrue() if run is None else E.EqualTo("run", run)
        return table.scan(row_filter=where).to_arrow().to_pylist()
