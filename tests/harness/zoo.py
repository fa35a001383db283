"""The type zoo: a table per family of column types (every type MariaDB has), rows at their limits, updates
and deletes; the server's own SELECT of each table as canonical text, and the check that JSONL rows, replayed,
equal it. Expected values come from the server (CAST to text, HEX of bytes, ...), never from our decoder."""

from __future__ import annotations

import base64
import collections
import json
from typing import Any

import orjson

# name -> (column definitions, how to SELECT each column as the server's canonical text)
TABLES: dict[str, list[tuple[str, str]]] = {
    "ints": [
        ("ti", "TINYINT"), ("tiu", "TINYINT UNSIGNED"), ("si", "SMALLINT"), ("siu", "SMALLINT UNSIGNED"),
        ("mi", "MEDIUMINT"), ("miu", "MEDIUMINT UNSIGNED"), ("i", "INT"), ("iu", "INT UNSIGNED"),
        ("bi", "BIGINT"), ("biu", "BIGINT UNSIGNED"), ("b1", "BIT(1)"), ("b17", "BIT(17)"), ("b64", "BIT(64)"),
        ("yr", "YEAR"), ("bo", "BOOLEAN"),
    ],
    "nums": [
        ("f", "FLOAT"), ("d", "DOUBLE"), ("d0", "DECIMAL(10,0)"), ("d52", "DECIMAL(5,2)"),
        ("d65", "DECIMAL(65,30)"), ("d189", "DECIMAL(18,9)"), ("du", "DECIMAL(12,4) UNSIGNED"),
    ],
    "times": [
        ("dt", "DATE"), ("t0", "TIME"), ("t1", "TIME(1)"), ("t3", "TIME(3)"), ("t6", "TIME(6)"),
        ("dt0", "DATETIME"), ("dt2", "DATETIME(2)"), ("dt6", "DATETIME(6)"),
        ("ts0", "TIMESTAMP NULL"), ("ts3", "TIMESTAMP(3) NULL"), ("ts6", "TIMESTAMP(6) NULL"),
    ],
    "strs": [
        ("c", "CHAR(10)"), ("vc", "VARCHAR(300)"), ("vl", "VARCHAR(20) CHARACTER SET latin1"),
        ("vb", "VARCHAR(10) CHARACTER SET binary"), ("bn", "BINARY(8)"), ("vbn", "VARBINARY(300)"),
        ("tt", "TINYTEXT"), ("tx", "TEXT"), ("mt", "MEDIUMTEXT"), ("lt", "LONGTEXT"),
        ("tb", "TINYBLOB"), ("bb", "BLOB"), ("mb", "MEDIUMBLOB"), ("lb", "LONGBLOB"),
        ("e", "ENUM('a','b','ç','😀')"), ("s", "SET('x','y','z','ü')"), ("j", "JSON"),
        ("cu", "VARCHAR(50) CHARACTER SET ucs2"), ("gk", "VARCHAR(20) CHARACTER SET gbk"),
        ("vcc", "VARCHAR(500) COMPRESSED"), ("bc", "BLOB COMPRESSED"), ("c255", "CHAR(255)"),
    ],
    "geo": [("g", "GEOMETRY"), ("p", "POINT"), ("pg", "POLYGON")],
}
BINARY = {"vb", "bn", "vbn", "tb", "bb", "mb", "lb", "bc", "g", "p", "pg"}
FLOAT32 = {"f"}
BITS = {"b1", "b17", "b64"}
ENUMS = {c for columns in TABLES.values() for c, t in columns if t.startswith(("ENUM", "SET"))}
INTS = {"ti", "tiu", "si", "siu", "mi", "miu", "i", "iu", "bi", "biu", "yr", "bo"}


def select_expr(col: str, sqltype: str) -> str:
    """How the server SELECTs a zoo column as canonical text (HEX of bytes, bits as numbers, ...)."""
    if col in BINARY:
        return f"HEX(`{col}`)"
    if col in BITS:
        return f"`{col}` + 0"
    if col in INTS:
        return f"`{col}`"
    if col in FLOAT32:
        return f"CAST(`{col}` AS DOUBLE)"  # the exact stored single-precision value
    if sqltype == "DOUBLE":
        return f"`{col}`"
    return f"CAST(`{col}` AS CHAR)"


ROWS: dict[str, list[str]] = {
    "ints": [
        "(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, 0, 0, 0, 1901, 0)",
        "(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807,"
        " 18446744073709551615, 1, 131071, 18446744073709551615, 2155, 1)",
        "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        # bo (TINYINT) follows YEAR: MariaDB gives YEAR a signedness bit, so -1 proves the bits line up.
        "(4, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, b'0', b'10101010101010101', b'1', 0, -1)",
    ],
    "nums": [
        "(1, 3.14, 2.718281828459045, 1234567890, -999.99, "
        "'12345678901234567890123456789012345.123456789012345678901234567890', -0.000000001, 0)",
        "(2, -3.4e38, 1.7976931348623157e308, -9999999999, 0.01, "
        "'-99999999999999999999999999999999999.999999999999999999999999999999', 999999999.999999999, "
        "99999999.9999)",
        "(3, 0, -0.0, 0, 0, 0, 0, 0.0001)",
        "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        "(5, 1.17549435e-38, 5e-324, 1, -0.5, '0.000000000000000000000000000001', -1.5, 1)",
    ],
    "times": [
        "(1, '2024-02-29', '-838:59:59', '-00:00:00.5', '-12:34:56.789', '838:59:59.000000',"
        " '1000-01-01 00:00:00', '9999-12-31 23:59:59.99', '2024-02-29 12:34:56.123456',"
        " '1970-01-01 00:00:01', '2038-01-19 03:14:07.999', '2001-02-03 04:05:06.000007')",
        "(2, '0000-00-00', '00:00:00', '-01:00:00.1', '-00:00:01.001', '-838:59:58.999999',"
        " '0000-00-00 00:00:00', '0000-00-00 00:00:00.00', '2000-01-01 00:00:00.000001',"
        " '0000-00-00 00:00:00', NULL, '2020-06-15 23:59:59.999999')",
        "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        "(4, '2024-00-00', '12:00:00', '00:00:00.9', '23:59:59.999', '-00:00:00.000001',"
        " '2024-00-00 00:00:00', '1999-12-31 23:59:59.50', '1999-12-31 23:59:59.000000',"
        " '2000-01-01 00:00:00', '2000-01-01 00:00:00.100', '2000-01-01 00:00:00.000000')",
    ],
    "strs": [
        "(1, 'abc', 'héllo wörld 😀 𝄞', 'àéî', x'00ff00', x'0001', x'00', 'tiny', 'text 😀', 'medium', 'long',"
        " x'00', x'deadbeef', x'', x'ff00ff', 'ç', 'x,z', '{\"a\": [1, 2.5, null, true], \"b\": \"ü\"}',"
        " 'ucs2 ☃', '中文', REPEAT('abc', 150), REPEAT(x'00ff', 300), 'padded')",
        "(2, '', '', '', x'', x'', x'', '', '', '', '', x'', x'', x'', x'', 'a', '', '[]', '', '', '', x'', '')",
        "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
        " NULL, NULL, NULL, NULL, NULL, NULL)",
        "(4, 'trail  ', CONCAT(REPEAT('x', 299), '€'), 'ÿ', x'20', x'0000000000000000', REPEAT(x'ab', 300),"
        " REPEAT('t', 255), REPEAT('😀', 1000), REPEAT('m', 70000), REPEAT('l', 70000), REPEAT(x'01', 255),"
        " REPEAT(x'02', 65535), REPEAT(x'03', 70000), REPEAT(x'04', 70000), '😀', 'x,y,z,ü', '\"str\"',"
        " REPEAT('☃', 50), REPEAT('中', 20), 'short', x'00', REPEAT('z', 255))",
    ],
    "geo": [
        "(1, ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(-1.5 2.25)'),"
        " ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))'))",
        "(2, ST_GeomFromText('LINESTRING(0 0,1 1,2 4)', 4326), NULL, NULL)",
    ],
}
UPDATES = [
    "UPDATE ints SET i = i - 1, bi = NULL WHERE id = 4",
    "UPDATE ints SET id = 40 WHERE id = 4",
    "UPDATE nums SET d65 = -d65, f = f * 2 WHERE id IN (1, 2)",
    "UPDATE times SET t6 = '-00:00:00.000002', ts0 = '2030-01-01 00:00:00' WHERE id = 1",
    "UPDATE strs SET vc = CONCAT(vc, '!'), s = '', e = NULL, lb = REPEAT(x'05', 100) WHERE id IN (1, 4)",
    "UPDATE geo SET p = ST_GeomFromText('POINT(3 4)') WHERE id = 2",
    "UPDATE strs SET j = 'null' WHERE id = 4",  # the JSON null document, apart from row 3's SQL NULL
]
DELETES = [
    "DELETE FROM ints WHERE id = 1",
    "DELETE FROM nums WHERE id = 3",
    "DELETE FROM times WHERE id = 3",
    "DELETE FROM strs WHERE id = 2",
]


def create(conn, rows: bool = True) -> None:
    """The zoo's tables in the connection's database and, with ``rows``, its rows, updates and deletes."""
    with conn.cursor() as cur:
        for name, cols in TABLES.items():
            defs = ", ".join(f"`{c}` {t}" for c, t in cols)
            cur.execute(f"CREATE TABLE `{name}` (id INT PRIMARY KEY, {defs})")
    if rows:
        write(conn)


def write(conn) -> None:
    """The zoo's rows, updates and deletes."""
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # allow zero dates
        cur.execute("SET SESSION time_zone = '+00:00'")
        for name, rows in ROWS.items():
            cur.execute(f"INSERT INTO `{name}` VALUES {', '.join(rows)}")
        for sql in UPDATES + DELETES:
            cur.execute(sql)


def server_state(conn, name: str) -> dict[int, dict[str, Any]]:
    """The server's SELECT of a zoo table: id -> {column: canonical text (select_expr)}."""
    cols = TABLES[name]
    exprs = ", ".join(select_expr(c, t) for c, t in cols)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT id, {exprs} FROM `{name}`")
        return {row[0]: dict(zip([c for c, _ in cols], row[1:], strict=True)) for row in cur.fetchall()}


def canonical(col: str, sqltype: str, value: Any, ours: bool) -> Any:
    """Bring our JSONL value and the server's SELECT value to one comparable form."""
    if value is None:
        return None
    if col in BINARY:
        raw = base64.b64decode(value) if ours else bytes.fromhex(value)
        return raw.hex()
    if col in FLOAT32 or sqltype == "DOUBLE":
        return float(value)
    if col == "j":  # MariaDB JSON is LONGTEXT: text both ways, compared as JSON ("null" is not SQL NULL)
        return ("json", json.loads(value))
    if col in ("bn",):
        return value
    return value if ours or isinstance(value, int) else str(value)


def assert_replay_equals_select(replayed: dict[str, dict[int, dict[str, Any]]], conn) -> None:
    """Every zoo table, replayed from JSONL, equals the server's SELECT of it."""
    for name, cols in TABLES.items():
        expected = server_state(conn, name)
        assert sorted(replayed[name]) == sorted(expected), name
        for pk, row in expected.items():
            for col, sqltype in cols:
                assert canonical(col, sqltype, replayed[name][pk][col], True) == \
                    canonical(col, sqltype, row[col], False), f"{name}.{col} id={pk}"


def replay(jsonl: bytes, db: str) -> dict[str, dict[int, dict[str, Any]]]:
    """The tables of database ``db`` as the JSONL's row changes leave them: table -> id -> row."""
    state: dict[str, dict[int, dict[str, Any]]] = collections.defaultdict(dict)
    for line in jsonl.splitlines():
        ev = orjson.loads(line)
        if ev.get("database") != db or "rows" not in ev:
            continue
        table = state[ev["table"]]
        for row in ev["rows"]:
            # With binlog_row_image MINIMAL/NOBLOB the images hold only some columns: merge them.
            current = table.pop(row["before"]["id"]) if "before" in row else {}
            if "after" in row:
                current.update(row["after"])
                table[current["id"]] = current
    return state
