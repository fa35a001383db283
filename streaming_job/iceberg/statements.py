"""Table statements (table_statements.py) on an Iceberg lake: each write one transaction of pyiceberg's (its snapshots
carrying the batch part's app id: lake_format.LakeFormat.part) that also sets the action's marker in the table's
properties. A mirror emptied is a delete of every file (no file rewritten); a mirror made anew keeps its table (its
history, its location) and gets the new columns (the old ones whose type differs dropped first: Iceberg keys
columns by field id, so the new ones are new fields); a renamed table's mirror is the old one's rows written anew
under the new name (Iceberg's data files name their columns by field id, which a new table assigns afresh: the
files themselves cannot be listed by it). Rows written anew (a renamed mirror, a rewrite) are read and written in
parts of at most ``PART_ROWS`` rows, each an append of the one transaction: the driver holds a part at a time,
never the whole mirror."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..batch.keys import key_property, recorded_key
from ..batch.writer import PARTITION_COLUMN
from ..statements.statements import STATEMENT_COLUMNS, Name
from ..statements.table_statements import Properties, StatementTables
from .tables import (
    TS,
    Reshape,
    WantedTable,
    change_log_properties,
    change_log_schema,
    mirror_properties,
    mirror_schema,
    recorded_columns,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from .format import IcebergFormat

PART_ROWS = 500_000  # rows read and written at a time where a mirror's rows are written anew
Parts = Iterator[pa.Table]


def mirror_parts(table: Table, change: Callable[[pa.Table], pa.Table] = lambda rows: rows,
                 limit: int | None = None) -> Parts:
    """The table's rows (its current snapshot's) in parts of at most ``limit`` (``PART_ROWS``) rows, each passed
    through ``change`` (a row-by-row transform); none for a table without a snapshot. The files to read are
    planned at the call and read one at a time as the parts are taken (pyiceberg's own readers of a scan read
    every file at once)."""
    if table.current_snapshot() is None:
        return iter(())
    from pyiceberg.io.pyarrow import ArrowScan

    scan = table.scan()
    tasks = list(scan.plan_files())
    reader = ArrowScan(scan.table_metadata, scan.io, scan.projection(), scan.row_filter, scan.case_sensitive)
    size = limit or PART_ROWS

    def parts() -> Parts:
        held: list[pa.Table] = []
        count = 0
        for task in tasks:
            rows = reader.to_table([task])
            while len(rows):
                take = rows.slice(0, size - count)
                held.append(take)
                count += len(take)
                rows = rows.slice(len(take))
                if count == size:
                    yield change(pa.concat_tables(held))
                    held, count = [], 0
        if count:
            yield change(pa.concat_tables(held))

    return parts()


def append_parts(tx: Any, parts: Parts, schema: pa.Schema | None = None,
                 summary: dict[str, str] | None = None) -> None:
    """Each part (cast to ``schema`` where given) appended in the transaction ``tx``, a part at a time."""
    for rows in parts:
        if len(rows):
            tx.append(rows if schema is None else rows.select(schema.names).cast(schema),
                      snapshot_properties=summary or {})


class IcebergStatementTables(StatementTables):
    def __init__(self, fmt: IcebergFormat) -> None:
        self.fmt = fmt

    def properties(self, db: str, name: str) -> dict[str, str] | None:
        found = self.fmt.table(db, name)
        return None if found is None else dict(found.metadata.properties)

    def columns(self, db: str, name: str) -> list[tuple[str, str]]:
        return recorded_columns(self.properties(db, name) or {}) or []

    def change_row(self, db: str, name: str, columns: list[tuple[str, str]], row: pa.Table | None,
                   properties: Properties, batch_id: int) -> None:
        schema = change_log_schema(columns)
        for n in STATEMENT_COLUMNS:
            schema = schema.append(pa.field(n, pa.string()))
        table = self.fmt.ready(WantedTable(db, name, schema, columns, lambda: change_log_properties(columns),
                                           partition=PARTITION_COLUMN), Reshape(nested=True))
        summary = self.fmt._batch(batch_id)
        rows = None
        if row is not None:
            dates = pc.cast(pc.cast(row.column("commit_ts"), pa.timestamp("us")), pa.date32())
            rows = row.append_column(PARTITION_COLUMN, dates).append_column(
                "ingest_ts", pa.array([time.time_ns() // 1000], TS))

        def write(tx: Any) -> None:
            have = {f.name for f in tx.table_metadata.schema().fields}
            if not all(n in have for n in STATEMENT_COLUMNS):  # a change log's first statement row
                with tx.update_schema() as update:
                    update.union_by_name(schema)
            if rows is not None:
                have = {f.name for f in tx.table_metadata.schema().fields}
                if any(n not in have for n in STATEMENT_COLUMNS):  # a change log that had no statement row yet
                    with tx.update_schema() as update:
                        update.union_by_name(schema)
                tx.append(rows, snapshot_properties=summary)
            _properties(tx, properties)

        self.fmt._commit(db, name, table, write, summary)

    def empty_mirror(self, db: str, table: str, properties: Properties, batch_id: int) -> None:
        found = self.fmt.table(db, table)
        if found is None:
            return
        summary = self.fmt._batch(batch_id)

        def write(tx: Any) -> None:
            if found.current_snapshot() is not None:
                from pyiceberg.expressions import AlwaysTrue

                tx.delete(AlwaysTrue(), snapshot_properties=summary)
            _properties(tx, properties)

        self.fmt._commit(db, table, found, write, summary)

    def replace_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       properties: Properties, batch_id: int) -> None:
        self._anew(db, table, columns, key, None, properties, batch_id)

    def copy_mirror(self, source: Name, target: Name, properties: Properties, batch_id: int) -> None:
        with self.fmt.upkeep.hold(source):  # its files read while the target is written: no upkeep of it meanwhile
            found = self.fmt.table(*source)
            assert found is not None
            own = dict(found.metadata.properties)
            columns = recorded_columns(own) or []
            self._anew(*target, columns, recorded_key(own) or [], mirror_parts(found), properties, batch_id)

    def mirror_rows(self, db: str, table: str) -> int:
        found = self.fmt.table(db, table)
        snapshot = found.current_snapshot() if found is not None else None
        if snapshot is None or snapshot.summary is None:
            return 0
        return int(snapshot.summary.additional_properties.get("total-records") or 0)

    def copy_rows(self, source: Name, target: Name) -> int:
        """Iceberg's copy writes the rows anew (its files name columns by the old table's field ids)."""
        return self.mirror_rows(*source)

    def _anew(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str], rows: Parts | None,
              properties: Properties, batch_id: int) -> None:
        """The mirror with ``columns`` and ``key`` and no rows but ``rows`` (mirror_parts: read as they are
        written), in one transaction (created where the lake has none): its rows deleted, the columns it had of
        another type dropped, the new ones added."""
        schema = mirror_schema(columns)
        own = mirror_properties(columns, key_property(key), key)
        found = self.fmt.table(db, table)
        if found is None:
            found = self.fmt.create(WantedTable(db, table, schema, columns, lambda: own))
        summary = self.fmt._batch(batch_id)
        had = dict(recorded_columns(dict(found.metadata.properties)) or [])
        wanted = dict(columns)
        current = found

        def write(tx: Any) -> None:
            if current.current_snapshot() is not None:
                from pyiceberg.expressions import AlwaysTrue

                tx.delete(AlwaysTrue(), snapshot_properties=summary)
            names = [f.name for f in tx.table_metadata.schema().fields]
            gone = [n for n in names if not n.startswith("_binlake_") and wanted.get(n) != had.get(n)]
            if gone:
                with tx.update_schema(allow_incompatible_changes=True) as update:
                    for n in gone:
                        update.delete_column(n)
            with tx.update_schema() as update:
                update.union_by_name(schema)
            if [f.name for f in tx.table_metadata.schema().fields] != schema.names:  # the columns in the new order
                with tx.update_schema() as update:
                    for previous, name in zip(schema.names, schema.names[1:], strict=False):
                        update.move_after(name, previous)
            if rows is not None:
                append_parts(tx, rows, schema, summary)
            _properties(tx, {**own, **properties})

        self.fmt._commit(db, table, found, write, summary, key)
        self.fmt.forget(db, table)


def _properties(tx: Any, properties: Properties) -> None:
    """``properties`` set (a value None: removed) in the transaction."""
    set_ = {k: v for k, v in properties.items() if v is not None}
    if set_:
        tx.set_properties(set_)
    have = tx.table_metadata.properties
    gone = [k for k, v in properties.items() if v is None and k in have]  # pyiceberg refuses to remove a missing one
    if gone:
        tx.remove_properties(*gone)

