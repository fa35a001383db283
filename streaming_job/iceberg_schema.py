"""An Iceberg mirror's schema changes (schema_alter.MirrorRewrite), by pyiceberg from the driver: a rewrite is the
mirror's rows read, transformed (schema_alter's transform) and written anew in one transaction that also drops the
columns gone or of another type and adds the new ones (iceberg_statements' mirror made anew: Iceberg keys columns
by field id, so a changed column is a new field); columns added without values are a schema change alone (rows
written before read them as null). Iceberg's initial defaults (a v3 table's ``initial-default``) are not used:
format version 2 tables, and Spark's and pyiceberg's readers of them, have none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .iceberg_defaults import default_values
from .iceberg_statements import IcebergStatementTables, _properties
from .iceberg_tables import columns_property, mirror_schema, recorded_columns
from .mirror import COMMIT_TS, SEQ
from .schema_alter import Alters, MirrorRewrite, Transform
from .table_statements import Properties, TableStatements

if TYPE_CHECKING:
    from .iceberg_format import IcebergFormat


class IcebergMirrorRewrite(MirrorRewrite):
    def __init__(self, tables: IcebergStatementTables) -> None:
        self.tables = tables

    @property
    def fmt(self) -> IcebergFormat:
        return self.tables.fmt

    def rewrite_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       transform: Transform, properties: Properties, batch_id: int) -> None:
        found = self.fmt.table(db, table)
        assert found is not None
        rows = transform(found.scan().to_arrow()) if found.current_snapshot() is not None else None
        self.tables._anew(db, table, columns, key, rows, properties, batch_id)

    def add_mirror_columns(self, db: str, table: str, added: list[tuple[str, str]], properties: Properties,
                           batch_id: int) -> None:
        found = self.fmt.table(db, table)
        assert found is not None
        columns = [*(recorded_columns(dict(found.metadata.properties)) or []), *added]
        summary = self.fmt._batch(batch_id)

        def write(tx: Any) -> None:
            if added:
                with tx.update_schema() as update:
                    update.union_by_name(mirror_schema(columns))
            _properties(tx, {**columns_property(columns), **properties})

        self.fmt._commit(db, table, found, write, summary)
        self.fmt.forget(db, table)


def iceberg_alters(tables: IcebergStatementTables, statements: TableStatements) -> Alters:
    """ALTER statements on an Iceberg lake (schema_alter.py); added columns' defaults need the format's Spark."""
    fmt = tables.fmt
    return Alters(statements, IcebergMirrorRewrite(tables),
                  lambda fills, types: default_values(fmt.spark, fills, types) if fmt.spark is not None else {},
                  [SEQ, COMMIT_TS])
