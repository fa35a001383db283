"""Lake tables in memory for the land side's statement tests (table_statements.StatementTables without Spark or a
lake): each table's properties, columns and rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from streaming_job.statements.table_statements import Properties, StatementTables


class MemoryTables(StatementTables):
    """Lake tables in memory: name -> {"properties", "columns", "rows" (a mirror's keys, a change log's ops)}."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0

    def properties(self, db: str, name: str) -> dict[str, str] | None:
        found = self.tables.get((db, name))
        return None if found is None else dict(found["properties"])

    def columns(self, db: str, name: str) -> list[tuple[str, str]]:
        found = self.tables.get((db, name))
        return [] if found is None else list(found["columns"])

    def _set(self, table: dict[str, Any], properties: Properties) -> None:
        self.writes += 1
        for k, v in properties.items():
            if v is None:
                table["properties"].pop(k, None)
            else:
                table["properties"][k] = v

    def change_row(self, db: str, name: str, columns: list[tuple[str, str]], row: pa.Table | None,
                   properties: Properties, batch_id: int) -> None:
        table = self.tables.setdefault((db, name), {"properties": {}, "columns": [], "rows": []})
        table["columns"] = list(columns)
        if row is not None:
            r = row.to_pylist()[0]
            table["rows"].append((r["op"], r["rename_from"], r["rename_to"]))
        self._set(table, properties)

    def empty_mirror(self, db: str, table: str, properties: Properties, batch_id: int) -> None:
        found = self.tables[(db, table)]
        found["rows"] = []
        self._set(found, properties)

    def replace_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       properties: Properties, batch_id: int) -> None:
        found = self.tables[(db, table)] = {"properties": {"key": ",".join(key)}, "columns": list(columns), "rows": []}
        self._set(found, properties)

    def copy_mirror(self, source: tuple[str, str], target: tuple[str, str], properties: Properties,
                    batch_id: int) -> None:
        src = self.tables[source]
        found = self.tables[target] = {"properties": dict(src["properties"]), "columns": list(src["columns"]),
                                       "rows": list(src["rows"])}
        self._set(found, properties)
