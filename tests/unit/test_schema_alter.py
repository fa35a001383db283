"""ALTER table statements without Spark or a lake (streaming_job/statements/schema_alter.py over in-memory tables): the
plan of each column, the mirror's rows rewritten once, the change log's row and generation, a replay that writes
nothing, the stop mode's line, and the fallback without schema history."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from ingester.records.format import Sequence
from ingester.records.statement import TableStatement
from streaming_job.decode.lake_types import arrow_type
from streaming_job.lake.generations import CURRENT_PROPERTY, ChangeLogGenerations
from streaming_job.runtime.errors import LandError
from streaming_job.statements.schema_alter import SOURCE_PROPERTY, Alters, MirrorRewrite, Transform
from streaming_job.statements.statements import STATEMENT_PROPERTY, ApplyPart, StatementAt, plan
from streaming_job.statements.table_statements import Properties, TableStatements
from tests.harness.memory_lake import MemoryTables

META = ["_binlake_seq", "_binlake_commit_ts"]
LATIN1, UTF8MB4, BINARY = 8, 45, 63


def _col(name: str, code: int, meta: int = 0, nullable: bool = True, collation: int | None = None,
         unsigned: bool = False, enum: list[str] | None = None) -> dict[str, Any]:
    binlog = 254 if code in (247, 248) else code
    return {"name": name, "type": code, "binlog_type": binlog, "meta": meta, "nullable": nullable,
            "unsigned": unsigned, "collation": collation, "enum_values": enum, "set_values": None,
            "geometry_type": None}


ID = _col("id", 3, nullable=False)


class MemoryMirrors(MirrorRewrite):
    """Mirrors as Arrow tables beside MemoryTables' bookkeeping (their columns and properties)."""

    def __init__(self, tables: MemoryTables) -> None:
        self.tables = tables
        self.rows: dict[tuple[str, str], pa.Table] = {}
        self.rewrites = 0

    def rewrite_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       transform: Transform, properties: Properties, batch_id: int) -> None:
        self.rows[(db, table)] = transform(self.rows[(db, table)])
        self.rewrites += 1
        found = self.tables.tables[(db, table)]
        found["columns"] = list(columns)
        self.tables._set(found, properties)

    def add_mirror_columns(self, db: str, table: str, added: list[tuple[str, str]], properties: Properties,
                           batch_id: int) -> None:
        found = self.tables.tables[(db, table)]
        rows = self.rows[(db, table)]
        for name, dtype in added:
            rows = rows.add_column(rows.num_columns - len(META), name, pa.nulls(len(rows), arrow_type(dtype)))
        self.rows[(db, table)] = rows
        found["columns"] = [*found["columns"], *added]
        self.tables._set(found, properties)


def _lake(columns: list[tuple[str, str]], rows: dict[str, list[Any]], values: dict[str, Any] | None = None,
          mode: str = "rewrite") -> tuple[MemoryTables, MemoryMirrors, TableStatements]:
    tables = MemoryTables()
    tables.tables[("d", "t")] = {"properties": {"binlake.key": '["id"]'}, "columns": columns, "rows": []}
    tables.tables[("d", "t__changes")] = {"properties": {}, "columns": columns, "rows": [("insert", None, None)]}
    mirrors = MemoryMirrors(tables)
    n = len(next(iter(rows.values())))
    data = {c: pa.array(rows[c], arrow_type(t)) for c, t in columns}
    data[META[0]] = pa.array([bytes([i]) * 16 for i in range(n)], pa.binary())
    data[META[1]] = pa.array([0] * n, pa.timestamp("us", tz="UTC"))
    mirrors.rows[("d", "t")] = pa.table(data)
    statements = TableStatements(tables, ChangeLogGenerations(tables.properties), lambda *n: None)
    given = values or {}
    statements.alters = Alters(statements, mirrors, lambda fills, types: {d.column: pa.scalar(given[d.column])
                                                                          for d in fills}, META)
    statements.alters.mode = "stop" if mode == "stop" else "rewrite"
    return tables, mirrors, statements


def _at(op: str, db: str, table: str, pos: int, text: str, **more: Any) -> StatementAt:
    statement = TableStatement(op, db, table, text, default_database=db, **more)
    return StatementAt(statement, Sequence(1, pos).encode(), f"1:{pos}:0", "0-1-1", 1_700_000_000_000_000,
                       f"p.{db}.{table}", 0, 0, 7, 0)


def _alter(statements: TableStatements, sql: str, pos: int, columns: list[dict[str, Any]] | None,
           before: list[dict[str, Any]] | None = None, renamed: dict[str, str] | None = None,
           time_zone: str = "+00:00") -> None:
    at = _at("alter", "d", "t", pos, sql, columns=columns, primary_key=[[0, 0]] if columns else None,
             renamed=renamed or {}, before=before, micros=1_700_000_000_000_000, time_zone=time_zone, mariadb=True)
    for step in plan([at]):
        if isinstance(step, ApplyPart):
            for action in step.actions:
                statements.apply(action)


def _mirror(mirrors: MemoryMirrors) -> dict[str, list[Any]]:
    rows = mirrors.rows[("d", "t")]
    return {c: rows.column(c).to_pylist() for c in rows.column_names if not c.startswith("_binlake")}


def test_added_columns_get_the_servers_defaults_and_set_default_leaves_them() -> None:
    tables, mirrors, statements = _lake([("id", "int"), ("v", "string")], {"id": [1, 2], "v": ["a", None]},
                                        {"g": datetime.datetime(2020, 2, 2, 2, 2, 2, 123000), "nn": 0})
    v = _col("v", 15, 40, collation=UTF8MB4)
    after = [ID, v, _col("g", 18, 3), _col("nn", 3, nullable=False), _col("z", 15, 20, collation=UTF8MB4)]
    _alter(statements, "ALTER TABLE t ADD COLUMN g DATETIME(3) DEFAULT '2020-02-02 02:02:02.123', ADD COLUMN nn "
                       "INT NOT NULL, ADD COLUMN z VARCHAR(5)", 100, after)
    g = datetime.datetime(2020, 2, 2, 2, 2, 2, 123000)
    assert _mirror(mirrors) == {"id": [1, 2], "v": ["a", None], "g": [g, g], "nn": [0, 0], "z": [None, None]}
    added = [("g", "timestamp_ntz"), ("nn", "int"), ("z", "string")]
    assert tables.tables[("d", "t__changes")]["columns"][-3:] == added
    assert tables.tables[("d", "t__changes")]["rows"][-1] == ("alter", None, None)
    _alter(statements, "ALTER TABLE t ALTER COLUMN nn SET DEFAULT 5", 200, after)  # existing rows keep theirs
    assert _mirror(mirrors)["nn"] == [0, 0] and mirrors.rewrites == 1
    writes = tables.writes
    _alter(statements, "ALTER TABLE t ALTER COLUMN nn SET DEFAULT 5", 200, after)  # replayed: nothing written
    assert tables.writes == writes


def test_dropped_renamed_and_converted_columns_and_the_change_logs_generation() -> None:
    columns = [("id", "int"), ("a", "int"), ("b", "string"), ("v", "string"), ("d", "decimal(10,4)"), ("i", "int")]
    tables, mirrors, statements = _lake(columns, {"id": [1, 2], "a": [10, None], "b": ["x", "y"],
                                                  "v": ["café €", "ok"], "d": [Decimal("1.2345"), Decimal("-0.0050")],
                                                  "i": [300, -5]})
    before = [ID, _col("a", 3), _col("b", 15, 40, collation=UTF8MB4), _col("v", 15, 20, collation=LATIN1),
              _col("d", 246, 10 << 8 | 4), _col("i", 3)]
    after = [ID, _col("a2", 3), _col("v", 15, 40, collation=BINARY), _col("d", 246, 10 << 8 | 2), _col("i", 1)]
    _alter(statements, "ALTER TABLE t DROP COLUMN b, RENAME COLUMN a TO a2, MODIFY v VARBINARY(40), MODIFY d "
                       "DECIMAL(10,2), MODIFY i TINYINT", 100, after, before, {"a2": "a"})
    assert _mirror(mirrors) == {"id": [1, 2], "a2": [10, None], "v": [b"caf\xe9 \x80", b"ok"],
                                "d": [Decimal("1.23"), Decimal("-0.01")], "i": [127, -5]}
    # a narrowing keeps the lake's wider type; binary and the new scale cannot join the change log: generation 2
    assert tables.tables[("d", "t")]["columns"] == [("id", "int"), ("a2", "int"), ("v", "binary"),
                                                   ("d", "decimal(10,2)"), ("i", "int")]
    assert tables.tables[("d", "t")]["properties"][CURRENT_PROPERTY] == "t__changes__v2"
    assert tables.tables[("d", "t__changes")]["rows"][-1] == ("alter", None, None)
    assert tables.tables[("d", "t__changes__v2")]["rows"] == [("alter", None, None)]
    assert SOURCE_PROPERTY in tables.tables[("d", "t")]["properties"]
    writes = tables.writes
    _alter(statements, "ALTER TABLE t DROP COLUMN b", 100, after, before, {"a2": "a"})  # replayed
    assert tables.writes == writes and mirrors.rewrites == 1


def test_without_the_columns_before_the_lake_types_stand_in_and_unknown_values_are_reread(caplog) -> None:
    ts = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    _tables, mirrors, statements = _lake([("id", "int"), ("v", "string"), ("t", "timestamp"), ("n", "bigint")],
                                        {"id": [1, 2], "v": ["plain", "café"], "t": [ts, None], "n": [300, 5]})
    after = [ID, _col("v", 15, 40, collation=BINARY), _col("t", 18, 0), _col("n", 1)]
    _alter(statements, "ALTER TABLE t MODIFY v VARBINARY(40), MODIFY t DATETIME, MODIFY n TINYINT", 100, after)
    assert _mirror(mirrors) == {"id": [1, 2], "v": [b"plain", None], "t": [datetime.datetime(2024, 1, 1), None],
                                "n": [127, 5]}
    # the session's time zone SYSTEM: a TIMESTAMP as local time only the server knows; non-ASCII text of a charset
    # the lake does not know (no columns before the statement) as bytes neither
    _, mirrors, statements = _lake([("id", "int"), ("v", "string"), ("t", "timestamp")],
                                   {"id": [1, 2], "v": ["plain", "café"], "t": [ts, None]})
    after = [ID, _col("v", 15, 40, collation=BINARY), _col("t", 18, 0)]
    _alter(statements, "ALTER TABLE t MODIFY t DATETIME", 100, after, time_zone="SYSTEM")
    assert _mirror(mirrors) == {"id": [1, 2], "v": [b"plain", None], "t": [None, None]}
    assert "`d`.`t`: the mirror's column `t` (timestamp -> timestamp_ntz) is null in the rows written before" in \
        caplog.text
    assert "d.t: the mirror's column `v` (string -> binary) is null in 1 rows" in caplog.text
    assert "binlake snapshot --tables d.t" in caplog.text


def test_stop_mode_stops_with_one_line_and_no_history_keeps_the_row_alone() -> None:
    _, _, statements = _lake([("id", "int"), ("v", "string")], {"id": [1], "v": ["x"]}, mode="stop")
    after = [ID, _col("v", 15, 40, collation=BINARY)]
    with pytest.raises(LandError, match=r"`d`.`t`: column `v` changed from string to binary at binlog position "
                                        r"1:100:0 .* MODIFY v VARBINARY\(40\); not a safe widening"):
        _alter(statements, "ALTER TABLE t MODIFY v VARBINARY(40)", 100, after)
    tables, mirrors, statements = _lake([("id", "int"), ("v", "string")], {"id": [1], "v": ["x"]})
    _alter(statements, "ALTER TABLE t MODIFY v VARBINARY(40)", 100, None)
    assert _mirror(mirrors) == {"id": [1], "v": ["x"]} and mirrors.rewrites == 0
    assert tables.tables[("d", "t__changes")]["rows"][-1] == ("alter", None, None)
    assert STATEMENT_PROPERTY in tables.tables[("d", "t__changes")]["properties"]
