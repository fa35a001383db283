"""An Iceberg mirror's schema changes (schema_alter.MirrorRewrite), by pyiceberg from the driver: a rewrite is the
mirror's rows read, transformed (schema_alter's transform) and written anew, a part at a time, in one transaction
that also drops the columns gone or of another type and adds the new ones (iceberg_statements' mirror made anew:
Iceberg keys columns by field id, so a changed column is a new field); columns added without values are a schema
change alone (rows written before read them as null). Iceberg's initial defaults (a v3 table's
``initial-default``) are not used: format version 2 tables, and Spark's and pyiceberg's readers of them, have
none."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from ..batch.default_values import default_values
from ..batch.mirror import COMMIT_TS, SEQ
from ..statements.schema_alter import Alters, MirrorRewrite, Transform
from ..statements.table_statements import Properties, TableStatements
from .renames import field_paths, has_field
from .statements import IcebergStatementTables, _properties, mirror_parts
from .tables import columns_property, mirror_schema, recorded_columns
from .transactions import transaction

if TYPE_CHECKING:
    from .format import IcebergFormat


class IcebergMirrorRewrite(MirrorRewrite):
    def __init__(self, tables: IcebergStatementTables) -> None:
        self.tables = tables

    @property
    def fmt(self) -> IcebergFormat:
        return self.tables.fmt

    def rewrite_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       transform: Transform, properties: Properties, batch_id: int) -> None:
        with self.fmt.upkeep.hold((db, table)):  # its files read before its commit: no upkeep of it meanwhile
            found = self.fmt.table(db, table)
            assert found is not None
            self.tables._anew(db, table, columns, key, mirror_parts(found, transform), properties, batch_id)

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


    def joins(self, old: str, new: str) -> bool:
        """Iceberg's promotions in place: int to long, float to double, a decimal's precision (its scale the same);
        TINYINT and SMALLINT are Iceberg ints already."""
        ints = ("tinyint", "smallint", "int")
        if old == new or (old in ints and new in (*ints, "bigint")) or (old, new) == ("float", "double"):
            return True
        if old.startswith("decimal(") and new.startswith("decimal("):
            (p, s), (np_, ns) = (tuple(int(x) for x in t[8:-1].split(",")) for t in (old, new))
            return s == ns and np_ >= p
        return False

    def rename_change_log(self, db: str, name: str, renames: list[tuple[str, str]]) -> None:
        """The change log's images' fields renamed in place (iceberg/renames.py), its recorded columns with them;
        those renamed already (a replay) left alone."""

        found = self.fmt.table(db, name)
        if found is None:
            return
        columns = recorded_columns(dict(found.metadata.properties)) or []
        with self.fmt.upkeep.hold((db, name)), transaction(found) as tx:
            for move in renames:  # one at a time: a -> b, then b -> c
                paths = field_paths([move], partial(has_field, tx), True)
                if paths:
                    with tx.update_schema() as update:
                        for path, new in paths:
                            update.rename_column(path, new)
            names = [n for n, _ in columns]
            for old, new in renames:
                if old in names and new not in names:
                    names = [new if n == old else n for n in names]
            tx.set_properties(columns_property([(n, t) for n, (_, t) in zip(names, columns, strict=True)]))
        self.fmt.forget(db, name)


def iceberg_alters(tables: IcebergStatementTables, statements: TableStatements) -> Alters:
    """ALTER statements on an Iceberg lake (schema_alter.py); added columns' defaults need the format's Spark."""
    fmt = tables.fmt
    return Alters(statements, IcebergMirrorRewrite(tables),
                  lambda fills, types: default_values(fmt.spark, fills, types) if fmt.spark is not None else {},
                  [SEQ, COMMIT_TS])
