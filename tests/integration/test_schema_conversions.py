"""The value conversions of streaming_job/schema_changes.py against the server's own: a table with many values
of each source type, read as binlake reads it (the snapshot's reader: the TABLE_MAP the server would log, the
codec's values, the lake's Arrow arrays), then ALTER TABLE ... MODIFY on MariaDB, read again; each column's
values after the ALTER equal the conversion of its values before (docs/LAND.md, "Schema changes")."""

from __future__ import annotations

import base64
from typing import Any

import pyarrow as pa
import pytest

from ingester.daemon.snapshot import table_reader
from streaming_job.arrow_rows import LakeColumn
from streaming_job.schema_changes import (
    ZERO,
    Statement,
    Unknown,
    converter,
    same_values,
    time_zone_offset,
    vector_converter,
)

pytestmark = pytest.mark.integration

# (source type, values as SQL literals, target type). A column per case; rows as many as the longest list.
CASES: list[tuple[str, list[str], str]] = [
    # text <-> binary in several charsets (latin1 is the server's cp1252-like one)
    ("VARCHAR(20) CHARACTER SET latin1", ["'café €š'", "'plain'", "''", "'Ÿ‰'"], "VARBINARY(20)"),
    ("VARCHAR(20) CHARACTER SET utf8mb4", ["'café €😀'", "'plain'", "'日本'"], "VARBINARY(40)"),
    ("VARCHAR(20) CHARACTER SET utf8mb3", ["'ÀÉ'", "'x'"], "BLOB"),
    ("CHAR(5) CHARACTER SET latin1", ["'ab'", "'abcde'", "''"], "BINARY(6)"),
    ("VARCHAR(20) CHARACTER SET cp1251", ["'Привет'", "'x'"], "VARBINARY(20)"),
    ("VARBINARY(20)", ["0xC3A9", "0xE9FF41", "'plain'", "0xE282", "0xF09F9880"], "VARCHAR(20) CHARACTER SET utf8mb4"),
    ("VARBINARY(20)", ["0xE9FF41", "0x80", "0x81", "'ok'"], "VARCHAR(20) CHARACTER SET latin1"),
    ("BLOB", ["0xC0C1", "'z'"], "TEXT CHARACTER SET cp1251"),
    ("VARCHAR(20) CHARACTER SET utf8mb4", ["'héllo'", "'x€y'", "'😀'"], "VARCHAR(20) CHARACTER SET latin1"),
    ("VARCHAR(20) CHARACTER SET utf8mb4", ["'x€y'", "'ok'"], "VARCHAR(20) CHARACTER SET ascii"),
    ("VARCHAR(20) CHARACTER SET utf8mb4", ["'a😀b'", "'ok'"], "VARCHAR(20) CHARACTER SET utf8mb3"),
    ("VARCHAR(20)", ["'abcdefghijkl'", "'ab'"], "VARCHAR(5)"),
    # integer narrowing and signedness
    ("INT", ["300", "-300", "100", "0"], "TINYINT"),
    ("INT", ["-300", "300", "5"], "TINYINT UNSIGNED"),
    ("BIGINT", ["5000000000", "-5000000000", "7"], "INT"),
    ("TINYINT", ["-5", "5"], "TINYINT UNSIGNED"),
    ("INT UNSIGNED", ["4000000000", "1"], "INT"),
    ("BIGINT UNSIGNED", ["18446744073709551615", "9223372036854775808", "3"], "BIGINT"),
    ("MEDIUMINT", ["-8388608", "8388607"], "SMALLINT"),
    # DECIMAL scale and precision; FLOAT/DOUBLE <-> DECIMAL; numbers across families
    ("DECIMAL(10,4)", ["123.4567", "-0.00005", "999999.99995", "0.005"], "DECIMAL(10,2)"),
    ("DECIMAL(10,4)", ["-0.00005", "0.00005", "123456.0001"], "DECIMAL(5,4)"),
    ("DECIMAL(10,3)", ["2.5", "-2.5", "1.5", "-0.5"], "INT"),
    ("DECIMAL(30,10)", ["12345678901234567890.0123456789", "-1"], "DECIMAL(12,1)"),
    ("FLOAT", ["0.1", "2.5", "-2.5", "0.125", "123456.789"], "DECIMAL(10,2)"),
    ("FLOAT", ["0.1", "1.17549435e-38"], "DECIMAL(20,10)"),
    ("DOUBLE", ["0.1", "2.675", "1.005", "123.456789", "1e30"], "DECIMAL(10,2)"),
    ("DOUBLE", ["2.5", "3.5", "-2.5", "0.5", "1e30"], "INT"),
    ("DECIMAL(8,3)", ["1.5", "-2.25", "12345.678"], "DOUBLE"),
    ("DECIMAL(8,3)", ["1.5", "12345.678"], "FLOAT"),
    ("INT", ["16777217", "-3"], "FLOAT"),
    # numbers <-> text
    ("FLOAT", ["0.1", "123456.789", "3.4e38", "1e-7", "16777217", "1.17549435e-38", "0"], "VARCHAR(40)"),
    ("DOUBLE", ["0.1", "1e20", "123456789012345678", "0.000012345", "1e15", "1e-5", "-123456789.123",
                "1e16", "123456789012345.6"], "VARCHAR(40)"),
    ("INT", ["-42", "0", "2147483647"], "VARCHAR(12)"),
    ("DECIMAL(10,3)", ["-1.5", "0", "1234567.125"], "VARCHAR(20)"),
    ("BIGINT UNSIGNED", ["18446744073709551615", "0"], "VARCHAR(30)"),
    ("VARCHAR(30)", ["'12abc'", "' 1.5'", "'-2.5'", "'1e3'", "'abc'", "''", "'99999999999999999999'", "'+3'",
                     "'0x1F'"], "INT"),
    ("VARCHAR(30)", ["'-2.5'", "'99999999999999999999'", "'7'", "'18446744073709551615'"], "BIGINT UNSIGNED"),
    ("VARCHAR(30)", ["'1.2.3'", "'1e3'", "'123.455'", "'-123.455'", "''", "'  -0'", "'9e9'", "'.5'"],
     "DECIMAL(8,2)"),
    ("VARCHAR(30)", ["'-2.5e1x'", "'1e400'", "'0.125'", "'abc'"], "DOUBLE"),
    # ENUM/SET relabelled, and across text and numbers
    ("ENUM('x','y','z')", ["'x'", "'z'", "'y'", "NULL"], "ENUM('z','x','w')"),
    ("ENUM('Lo','hi')", ["'Lo'", "'hi'"], "ENUM('LO','HI','x')"),
    ("SET('p','q','r')", ["'p,r'", "'q'", "''", "'p,q,r'"], "SET('r','q','s')"),
    ("ENUM('x','y')", ["'x'", "'y'"], "VARCHAR(10)"),
    ("ENUM('x','y')", ["'x'", "'y'"], "INT"),
    ("SET('a','b')", ["'a,b'", "'b'", "''"], "INT"),
    ("VARCHAR(10)", ["'y'", "'Y'", "''", "'nope'"], "ENUM('x','y')"),
    ("VARCHAR(10)", ["'q,p'", "'zz,p'", "'q,q'", "''"], "SET('p','q')"),
    ("INT", ["2", "0", "5", "1"], "ENUM('a','b','c')"),
    ("INT", ["3", "8", "7", "0", "9"], "SET('a','b','c')"),
    # dates and times
    ("DATETIME(6) NOT NULL", ["'2024-01-31 23:59:59.999999'", "'0000-00-00 00:00:00'", "'1999-12-31 00:00:01.5'"],
     "DATETIME"),
    ("DATETIME(6)", ["'2024-01-31 23:59:59.5'", "'2024-06-01 00:00:00'"], "DATE"),
    ("DATETIME(3)", ["'2020-02-02 02:02:02.123'", "'2024-06-01 00:00:00.999'"], "TIME(3)"),
    ("DATE NOT NULL", ["'2024-02-29'", "'0000-00-00'"], "DATETIME(3)"),
    ("TIME(6)", ["'-12:34:56.789'", "'00:00:01.5'", "'838:59:59'"], "TIME"),
    ("TIME", ["'838:59:59'", "'-01:00:00'", "'12:00:00'"], "DATETIME"),
    ("TIMESTAMP(6) NULL", ["'2024-01-31 23:59:59.999999'", "'1970-01-01 00:00:01'"], "DATETIME(3)"),
    ("DATETIME(6)", ["'2024-01-31 12:00:00.25'", "'2024-06-01 00:00:00'"], "TIMESTAMP(6) NULL"),
    ("TIMESTAMP NULL", ["'2024-01-31 23:30:00'", "'2024-06-01 01:00:00'"], "DATE"),
    ("VARCHAR(30)", ["'2024-01-05 03:04:05'", "'2024-1-5 3:4:5'", "'20240105'", "'2024-02-30 10:00'",
                     "'20240105101112'", "'2024-01-05 03:04:05.123456789'"], "DATETIME(6)"),
    ("VARCHAR(30)", ["'2024-01-05'", "'2024-13-01'", "'20240229'"], "DATE"),
    ("DATETIME(2) NOT NULL", ["'1999-12-31 23:59:59.99'", "'0000-00-00 00:00:00'"], "VARCHAR(30)"),
    ("DATE NOT NULL", ["'2024-02-29'", "'0000-00-00'"], "VARCHAR(12)"),
    ("TIME(2)", ["'-1:02:03.5'", "'00:00:00'", "'100:00:00.25'"], "VARCHAR(15)"),
    ("TIMESTAMP(3) NULL", ["'2024-01-31 23:59:59.5'"], "VARCHAR(30)"),
    ("INT", ["20240131", "0"], "DATE"),
    ("DECIMAL(20,6)", ["20240131123456.5", "0"], "DATETIME(6)"),
    # JSON is LONGTEXT on MariaDB
    ("JSON", ["'{\"a\": 1,\"b\":[1,2]}'", "'\"s\"'"], "TEXT"),
    ("TEXT", ["'{\"x\":  1}'", "'[1]'"], "JSON"),
    ("YEAR", ["2024", "0", "1999"], "INT"),
]


def _read(server: Any, db: str, table: str) -> tuple[Any, dict[str, list[Any]]]:
    """The table's columns (as its TABLE_MAP would describe them) and each column's lake values (snapshot read)."""
    import pymysql

    conn = server.connect(db, conv={k: v for k, v in pymysql.converters.conversions.items()
                                    if not isinstance(k, int)})
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION character_set_results = binary, time_zone = '+00:00'")
            cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
            collations = {(n.decode() if isinstance(n, bytes) else n): int(i) for n, i in cur.fetchall()}
        reader = table_reader(conn, db, table, collations, True)
        cur = conn.cursor(pymysql.cursors.SSCursor)
        cur.execute(*reader.query(100_000, None))
        wire = reader.convert(reader.result(cur).fetch())
        cur.close()
    finally:
        conn.close()
    tm = reader.table_map
    for row in wire:  # the snapshot's bytes travel as base64 (its descriptor's "binary" columns)
        for i in reader.binary:
            row[i] = None if row[i] is None else base64.b64decode(row[i])
    values = {c.name: LakeColumn(c, True).array([row[c.index] for row in wire]).to_pylist() for c in tm.columns}
    return tm, values


def test_conversions_equal_the_servers_alter(mariadb) -> None:
    db = "conversions"
    mariadb.execute(f"DROP DATABASE IF EXISTS {db}")
    mariadb.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    rows = max(len(v) for _, v, _ in CASES)
    columns = ", ".join(f"c{i} {source}" for i, (source, _, _) in enumerate(CASES))
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+02:00'")
        cur.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {columns})")
        for r in range(rows):
            values = ", ".join(v[r % len(v)] for _, v, _ in CASES)
            cur.execute(f"INSERT INTO t VALUES ({r}, {values})")
    before_tm, before = _read(mariadb, db, "t")
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+02:00'")
        cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
        micros = int(cur.fetchone()[0] * 1_000_000)
        cur.execute("ALTER TABLE t " + ", ".join(f"MODIFY c{i} {target}" for i, (_, _, target) in enumerate(CASES)))
    after_tm, after = _read(mariadb, db, "t")
    stmt = Statement(micros, time_zone_offset("+02:00"), mariadb=True)
    old = {c.name: c for c in before_tm.columns}
    wrong, unknown = {}, {}
    for i, (source, _, target) in enumerate(CASES):
        name = f"c{i}"
        o, n = old[name], after_tm.columns[old[name].index]
        try:
            convert = converter(o, n, stmt)
            got = [convert(ZERO if v is None and not o.nullable else v) for v in before[name]]
            got = pa.array(got, LakeColumn(n, True).type).to_pylist()  # as the rewrite's Arrow array holds them
            vector = vector_converter(o, n, stmt)  # the whole array's conversion, where Arrow's kernels do it
            if vector is not None:
                typ = LakeColumn(n, True).type
                whole = vector(pa.array(before[name], LakeColumn(o, True).type)).cast(typ).to_pylist()
                assert whole == got, (name, whole, got)
        except Unknown as exc:
            unknown[f"{name} {source} -> {target}"] = str(exc)
            continue
        except Exception as exc:
            wrong[f"{name} {source} -> {target}"] = (before[name], repr(exc), after[name])
            continue
        if got != after[name]:
            wrong[f"{name} {source} -> {target}"] = (before[name], got, after[name])
        if same_values(o, n, True) and o.type == n.type:  # nothing to convert
            assert before[name] == after[name], name
    assert not wrong and not unknown, str(unknown) + "\n" + "\n".join(
        f"{k}: before {b!r}\n  ours   {g!r}\n  server {s!r}" for k, (b, g, s) in wrong.items())
