"""The value conversions of streaming_job/statements/schema_changes.py against the server's own: a table with many
values of each source type, read as binlake reads it (the snapshot's reader: the TABLE_MAP the server would log, the
codec's values, the lake's Arrow arrays), then ALTER TABLE ... MODIFY, read again; each column's values after the ALTER
equal the conversion of its values before (docs/LAND.md, "Schema changes"). Run on MariaDB and on MySQL 8.0, each with
its own rules (``Statement.mariadb``); the session's sql_mode is '' on both (the non-strict rules: a strict ALTER
succeeds only where every value converts exactly, and refused, never reaches the binlog)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from ingester.codec.constants import ColumnType as T
from ingester.codec.jsonb import JSON_NULL
from ingester.daemon.table_reader import table_reader
from streaming_job.decode.arrow_rows import LakeColumn
from streaming_job.statements.column_kinds import ZERO, Statement, Unknown, time_zone_offset
from streaming_job.statements.schema_changes import converter, same_values, vector_converter

pytestmark = pytest.mark.integration

BOTH = ("mariadb", "mysql80")


@dataclass(frozen=True)
class Case:
    """A column: its source type, values as SQL literals, the type the ALTER gives it, the servers it runs on
    (a case one server refuses says why beside it). Rows are as many as the longest list of values."""

    source: str
    values: list[str]
    target: str
    servers: tuple[str, ...] = BOTH


# Every case runs on both servers: each accepts every ALTER below under sql_mode ''. A case one server refuses
# (a charset or type it lacks) names the other alone in ``servers``, with the reason beside it.
CASES: list[Case] = [
    # text <-> binary in several charsets (latin1 is the server's cp1252-like one)
    Case("VARCHAR(20) CHARACTER SET latin1", ["'café €š'", "'plain'", "''", "'Ÿ‰'"], "VARBINARY(20)"),
    Case("VARCHAR(20) CHARACTER SET utf8mb4", ["'café €😀'", "'plain'", "'日本'"], "VARBINARY(40)"),
    Case("VARCHAR(20) CHARACTER SET utf8mb3", ["'ÀÉ'", "'x'"], "BLOB"),
    Case("CHAR(5) CHARACTER SET latin1", ["'ab'", "'abcde'", "''"], "BINARY(6)"),
    Case("VARCHAR(20) CHARACTER SET cp1251", ["'Привет'", "'x'"], "VARBINARY(20)"),
    # bytes invalid in the new charset: MariaDB writes a ? for each, MySQL cuts the text before the first
    Case("VARBINARY(20)", ["0xC3A9", "0xE9FF41", "'plain'", "0xE282", "0xF09F9880", "0x41E942"],
         "VARCHAR(20) CHARACTER SET utf8mb4"),
    Case("VARBINARY(20)", ["0x41A442", "0xE1E2", "0x41AA"], "VARCHAR(20) CHARACTER SET greek"),
    Case("VARBINARY(20)", ["0xE9FF41", "0x80", "0x81", "'ok'"], "VARCHAR(20) CHARACTER SET latin1"),
    Case("BLOB", ["0xC0C1", "'z'"], "TEXT CHARACTER SET cp1251"),
    Case("VARCHAR(20) CHARACTER SET utf8mb4", ["'héllo'", "'x€y'", "'😀'"], "VARCHAR(20) CHARACTER SET latin1"),
    Case("VARCHAR(20) CHARACTER SET utf8mb4", ["'x€y'", "'ok'"], "VARCHAR(20) CHARACTER SET ascii"),
    Case("VARCHAR(20) CHARACTER SET utf8mb4", ["'a😀b'", "'ok'"], "VARCHAR(20) CHARACTER SET utf8mb3"),
    Case("VARCHAR(20)", ["'abcdefghijkl'", "'ab'"], "VARCHAR(5)"),
    # integer narrowing and signedness
    Case("INT", ["300", "-300", "100", "0"], "TINYINT"),
    Case("INT", ["-300", "300", "5"], "TINYINT UNSIGNED"),
    Case("BIGINT", ["5000000000", "-5000000000", "7"], "INT"),
    Case("TINYINT", ["-5", "5"], "TINYINT UNSIGNED"),
    Case("INT UNSIGNED", ["4000000000", "1"], "INT"),
    Case("BIGINT UNSIGNED", ["18446744073709551615", "9223372036854775808", "3"], "BIGINT"),
    Case("MEDIUMINT", ["-8388608", "8388607"], "SMALLINT"),
    # DECIMAL scale and precision; FLOAT/DOUBLE <-> DECIMAL; numbers across families
    Case("DECIMAL(10,4)", ["123.4567", "-0.00005", "999999.99995", "0.005"], "DECIMAL(10,2)"),
    Case("DECIMAL(10,4)", ["-0.00005", "0.00005", "123456.0001"], "DECIMAL(5,4)"),
    Case("DECIMAL(10,3)", ["2.5", "-2.5", "1.5", "-0.5"], "INT"),
    Case("DECIMAL(30,10)", ["12345678901234567890.0123456789", "-1"], "DECIMAL(12,1)"),
    Case("FLOAT", ["0.1", "2.5", "-2.5", "0.125", "123456.789"], "DECIMAL(10,2)"),
    Case("FLOAT", ["0.1", "1.17549435e-38"], "DECIMAL(20,10)"),
    Case("DOUBLE", ["0.1", "2.675", "1.005", "123.456789", "1e30"], "DECIMAL(10,2)"),
    Case("DOUBLE", ["2.5", "3.5", "-2.5", "0.5", "1e30"], "INT"),
    Case("DECIMAL(8,3)", ["1.5", "-2.25", "12345.678"], "DOUBLE"),
    Case("DECIMAL(8,3)", ["1.5", "12345.678"], "FLOAT"),
    Case("INT", ["16777217", "-3"], "FLOAT"),
    # numbers <-> text
    Case("FLOAT", ["0.1", "123456.789", "3.4e38", "1e-7", "16777217", "1.17549435e-38", "0"], "VARCHAR(40)"),
    Case("DOUBLE", ["0.1", "1e20", "123456789012345678", "0.000012345", "1e15", "1e-5", "-123456789.123",
                    "1e16", "123456789012345.6"], "VARCHAR(40)"),
    Case("INT", ["-42", "0", "2147483647"], "VARCHAR(12)"),
    Case("DECIMAL(10,3)", ["-1.5", "0", "1234567.125"], "VARCHAR(20)"),
    Case("BIGINT UNSIGNED", ["18446744073709551615", "0"], "VARCHAR(30)"),
    Case("VARCHAR(30)", ["'12abc'", "' 1.5'", "'-2.5'", "'1e3'", "'abc'", "''", "'99999999999999999999'", "'+3'",
                         "'0x1F'"], "INT"),
    Case("VARCHAR(30)", ["'-2.5'", "'99999999999999999999'", "'7'", "'18446744073709551615'"], "BIGINT UNSIGNED"),
    Case("VARCHAR(30)", ["'1.2.3'", "'1e3'", "'123.455'", "'-123.455'", "''", "'  -0'", "'9e9'", "'.5'"],
         "DECIMAL(8,2)"),
    Case("VARCHAR(30)", ["'-2.5e1x'", "'1e400'", "'0.125'", "'abc'"], "DOUBLE"),
    # ENUM/SET relabelled, and across text and numbers
    Case("ENUM('x','y','z')", ["'x'", "'z'", "'y'", "NULL"], "ENUM('z','x','w')"),
    Case("ENUM('Lo','hi')", ["'Lo'", "'hi'"], "ENUM('LO','HI','x')"),
    Case("SET('p','q','r')", ["'p,r'", "'q'", "''", "'p,q,r'"], "SET('r','q','s')"),
    Case("ENUM('x','y')", ["'x'", "'y'"], "VARCHAR(10)"),
    Case("ENUM('x','y')", ["'x'", "'y'"], "INT"),
    Case("SET('a','b')", ["'a,b'", "'b'", "''"], "INT"),
    Case("VARCHAR(10)", ["'y'", "'Y'", "''", "'nope'"], "ENUM('x','y')"),
    Case("VARCHAR(10)", ["'q,p'", "'zz,p'", "'q,q'", "''"], "SET('p','q')"),
    Case("INT", ["2", "0", "5", "1"], "ENUM('a','b','c')"),
    Case("INT", ["3", "8", "7", "0", "9"], "SET('a','b','c')"),
    # dates and times
    Case("DATETIME(6) NOT NULL", ["'2024-01-31 23:59:59.999999'", "'0000-00-00 00:00:00'", "'1999-12-31 00:00:01.5'"],
         "DATETIME"),
    Case("DATETIME(6)", ["'2024-01-31 23:59:59.5'", "'2024-06-01 00:00:00'", "'2024-01-31 23:59:59.4'"], "DATE"),
    Case("DATETIME(6)", ["'2024-01-31 23:59:59.9'", "'2024-01-31 12:00:00.4'", "'2024-01-31 12:00:00.5'"], "TIME"),
    Case("TIMESTAMP(6) NULL", ["'2024-01-31 23:59:59.5'", "'2024-01-31 10:00:00.2'"], "DATE"),
    Case("VARCHAR(30)", ["'2024-01-31 23:59:59.5'", "'2024-01-31 10:00:00.4'"], "DATE"),
    Case("VARCHAR(30)", ["'12:00:00.12345'", "'-1:00:00.0005'", "'10:00:00.9999999'", "'10:00:00.1234565'"],
         "TIME(6)"),
    Case("DATETIME(3)", ["'2020-02-02 02:02:02.123'", "'2024-06-01 00:00:00.999'"], "TIME(3)"),
    Case("DATE NOT NULL", ["'2024-02-29'", "'0000-00-00'"], "DATETIME(3)"),
    Case("TIME(6)", ["'-12:34:56.789'", "'00:00:01.5'", "'838:59:59'"], "TIME"),
    Case("TIME", ["'838:59:59'", "'-01:00:00'", "'12:00:00'"], "DATETIME"),
    Case("TIMESTAMP(6) NULL", ["'2024-01-31 23:59:59.999999'", "'1970-01-01 00:00:01'"], "DATETIME(3)"),
    Case("DATETIME(6)", ["'2024-01-31 12:00:00.25'", "'2024-06-01 00:00:00'"], "TIMESTAMP(6) NULL"),
    Case("TIMESTAMP NULL", ["'2024-01-31 23:30:00'", "'2024-06-01 01:00:00'"], "DATE"),
    Case("VARCHAR(30)", ["'2024-01-05 03:04:05'", "'2024-1-5 3:4:5'", "'20240105'", "'2024-02-30 10:00'",
                         "'20240105101112'", "'2024-01-05 03:04:05.123456789'", "'2024-01-05 23:59:59.9999995'"],
         "DATETIME(6)"),
    Case("VARCHAR(30)", ["'2024-01-05'", "'2024-13-01'", "'20240229'"], "DATE"),
    Case("DATETIME(2) NOT NULL", ["'1999-12-31 23:59:59.99'", "'0000-00-00 00:00:00'"], "VARCHAR(30)"),
    Case("DATE NOT NULL", ["'2024-02-29'", "'0000-00-00'"], "VARCHAR(12)"),
    Case("TIME(2)", ["'-1:02:03.5'", "'00:00:00'", "'100:00:00.25'"], "VARCHAR(15)"),
    Case("TIMESTAMP(3) NULL", ["'2024-01-31 23:59:59.5'"], "VARCHAR(30)"),
    Case("INT", ["20240131", "0"], "DATE"),
    Case("DECIMAL(20,6)", ["20240131123456.5", "0"], "DATETIME(6)"),
    # JSON: MariaDB's is LONGTEXT; MySQL's a binary document (the lake: its compact text), as text in its layout
    Case("JSON", ["'{\"a\": 1,\"b\":[1,2]}'", "'\"s\"'",
                  "'{\"bb\": 1, \"a\": [1.5, \"x\\\\ny\", null, true], \"c\": 1e30}'",
                  "'null'", "'[0.1, -2.0, 18446744073709551615, \"é\"]'"], "TEXT"),
    Case("TEXT", ["'{\"x\":  1}'", "'[1]'", "'{\"zz\": 1, \"a\": {\"y\": 2, \"x\": 1}, \"a\": 3}'",
                  "'[18446744073709551616, 1e2, 2.50, \"\\\\u00e9\"]'", "'null'"], "JSON"),
    Case("YEAR", ["2024", "0", "1999"], "INT"),
    Case("YEAR", ["2024", "0", "1999"], "VARCHAR(4)"),
    Case("BIT(8)", ["b'101'", "b'11111111'", "0"], "TINYINT"),
    Case("BIT(64)", ["b'1'", "0xFFFFFFFFFFFFFFFF"], "BIGINT UNSIGNED"),
]


def _read(server: Any, db: str, table: str, mariadb: bool) -> tuple[Any, dict[str, list[Any]]]:
    """The table's columns (as its TABLE_MAP would describe them) and each column's lake values (snapshot read)."""
    import pymysql

    conn = server.connect(db, conv={k: v for k, v in pymysql.converters.conversions.items()
                                    if not isinstance(k, int)})
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION character_set_results = binary, time_zone = '+00:00'")
            cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
            collations = {(n.decode() if isinstance(n, bytes) else n): int(i) for n, i in cur.fetchall()}
        reader = table_reader(conn, db, table, collations, mariadb)
        cur = conn.cursor(pymysql.cursors.SSCursor)
        cur.execute(*reader.query(100_000, None))
        wire = reader.convert(reader.result(cur).fetch())
        cur.close()
    finally:
        conn.close()
    tm = reader.table_map
    json_columns = [c.index for c in tm.columns if c.type == T.JSON]
    for row in wire:  # as ingester/records/snapshot.py reads them: the bytes travel as base64 (its descriptor's
        for i in reader.binary:  # "binary" columns), MySQL's null JSON document as its JSONL form
            row[i] = None if row[i] is None else base64.b64decode(row[i])
        for i in json_columns:
            row[i] = JSON_NULL if row[i] == JSON_NULL.to_json() else row[i]
    values = {c.name: LakeColumn(c, mariadb).array([row[c.index] for row in wire]).to_pylist() for c in tm.columns}
    return tm, values


@dataclass(frozen=True)
class Source:
    """The server the test runs on: its fixture's name and whether it is MariaDB."""

    name: str
    server: Any
    mariadb: bool


@pytest.fixture(params=["mariadb", "mysql80"])
def source(request: pytest.FixtureRequest) -> Source:
    return Source(request.param, request.getfixturevalue(request.param), request.param == "mariadb")


def test_conversions_equal_the_servers_alter(source: Source) -> None:
    server, mariadb = source.server, source.mariadb
    db = "conversions"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    cases = {f"c{i}": case for i, case in enumerate(CASES) if source.name in case.servers}
    rows = max(len(case.values) for case in cases.values())
    columns = ", ".join(f"{name} {case.source}" for name, case in cases.items())
    conn = server.connect(db)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+02:00'")
        cur.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {columns})")
        for r in range(rows):
            values = ", ".join(case.values[r % len(case.values)] for case in cases.values())
            cur.execute(f"INSERT INTO t VALUES ({r}, {values})")
    before_tm, before = _read(server, db, "t", mariadb)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+02:00'")
        cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
        micros = int(cur.fetchone()[0] * 1_000_000)
        cur.execute("ALTER TABLE t " + ", ".join(f"MODIFY {name} {case.target}" for name, case in cases.items()))
    after_tm, after = _read(server, db, "t", mariadb)
    stmt = Statement(micros, time_zone_offset("+02:00"), mariadb=mariadb)
    old = {c.name: c for c in before_tm.columns}
    wrong, unknown = {}, {}
    for name, case in cases.items():
        label = f"{name} {case.source} -> {case.target}"
        o, n = old[name], after_tm.columns[old[name].index]
        try:
            convert = converter(o, n, stmt)
            got = [convert(ZERO if v is None and not o.nullable else v) for v in before[name]]
            got = pa.array(got, LakeColumn(n, mariadb).type).to_pylist()  # as the rewrite's Arrow array holds them
            vector = vector_converter(o, n, stmt)  # the whole array's conversion, where Arrow's kernels do it
            if vector is not None:
                typ = LakeColumn(n, mariadb).type
                whole = vector(pa.array(before[name], LakeColumn(o, mariadb).type)).cast(typ).to_pylist()
                assert whole == got, (name, whole, got)
        except Unknown as exc:
            unknown[label] = str(exc)
            continue
        except Exception as exc:
            wrong[label] = (before[name], repr(exc), after[name])
            continue
        if got != after[name]:
            wrong[label] = (before[name], got, after[name])
        if same_values(o, n, mariadb) and o.type == n.type:  # nothing to convert
            assert before[name] == after[name], name
    assert not wrong and not unknown, str(unknown) + "\n" + "\n".join(
        f"{k}: before {b!r}\n  ours   {g!r}\n  server {s!r}" for k, (b, g, s) in wrong.items())
