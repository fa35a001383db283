"""Every column type through a real MariaDB binlog: our decoded rows, replayed, must equal the
server's own SELECT of each table, and our row counts must equal mariadb-binlog --verbose's.

Expected values come from the server (CAST to text, HEX of bytes, ...), never from our decoder.
"""

from __future__ import annotations

import base64
import collections
import io
import json
import re
import subprocess
from typing import Any

import orjson
import pytest

from ingester.cli.dump import dump_file
from ingester.codec import rows as codec_rows
from ingester.dump import native
from tests.unit.test_columnar import assert_columnar_equals_dicts, assert_land_images_equal_reference

pytestmark = pytest.mark.integration

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
INTS = {"ti", "tiu", "si", "siu", "mi", "miu", "i", "iu", "bi", "biu", "yr", "bo"}


def _select_expr(col: str, sqltype: str) -> str:
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


def _create(conn, rows: bool = True) -> None:
    with conn.cursor() as cur:
        for name, cols in TABLES.items():
            defs = ", ".join(f"`{c}` {t}" for c, t in cols)
            cur.execute(f"CREATE TABLE `{name}` (id INT PRIMARY KEY, {defs})")
    if rows:
        _write(conn)


def _write(conn) -> None:
    """The zoo's rows, updates and deletes."""
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")  # allow zero dates
        cur.execute("SET SESSION time_zone = '+00:00'")
        for name, rows in ROWS.items():
            cur.execute(f"INSERT INTO `{name}` VALUES {', '.join(rows)}")
        for sql in UPDATES + DELETES:
            cur.execute(sql)


def _server_state(conn, name: str) -> dict[int, dict[str, Any]]:
    cols = TABLES[name]
    exprs = ", ".join(_select_expr(c, t) for c, t in cols)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT id, {exprs} FROM `{name}`")
        return {row[0]: dict(zip([c for c, _ in cols], row[1:], strict=True)) for row in cur.fetchall()}


def _canonical(col: str, sqltype: str, value: Any, ours: bool) -> Any:
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
        expected = _server_state(conn, name)
        assert sorted(replayed[name]) == sorted(expected), name
        for pk, row in expected.items():
            for col, sqltype in cols:
                assert _canonical(col, sqltype, replayed[name][pk][col], True) == \
                    _canonical(col, sqltype, row[col], False), f"{name}.{col} id={pk}"


def _replay(jsonl: bytes, db: str) -> dict[str, dict[int, dict[str, Any]]]:
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


def _dump(files, fmt: str) -> bytes:
    out = io.BytesIO()
    for f in files:
        dump_file(str(f), out, fmt)
    return out.getvalue()


def _verbose_counts(files, db: str) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for f in files:
        text = subprocess.run(["mariadb-binlog", "--verbose", str(f)], capture_output=True, check=True).stdout
        for m in re.finditer(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]+)`\.`([^`]+)`", text, re.M):
            if m.group(2).decode() == db:
                counts[(m.group(1).decode().split()[0].lower(), m.group(3).decode())] += 1
    return counts


@pytest.mark.parametrize("options", [
    {},
    {"options": {"log_bin_compress": "ON", "log_bin_compress_min_len": 10}},
    {"binlog_row_image": "MINIMAL"},
    {"binlog_row_image": "NOBLOB", "binlog_checksum": "NONE"},
], ids=["plain", "compressed-events", "minimal-image", "noblob-image-no-checksum"])
def test_type_zoo_replays_to_the_servers_select(make_mariadb, monkeypatch, options) -> None:
    server = make_mariadb(**options)
    db = "zoo"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    _create(conn)
    server.flush_logs()
    files = server.binlog_files()[:-1]
    # The land job's columnar decoder and images agree with the row dicts checked below.
    compared = sum((assert_columnar_equals_dicts(f) for f in files), collections.Counter())
    assert sum(assert_land_images_equal_reference(f) for f in files) == sum(compared.values()) > 20
    if "options" in options:
        assert set(compared) & {166, 167, 168, 169, 170, 171}  # MariaDB compressed rows events
    jsonl = _dump(files, "jsonl")
    with monkeypatch.context() as m:  # the native emitter renders exactly what the Python reference does
        m.setattr(native, "native", None)
        assert _dump(files, "jsonl") == jsonl
    replayed = _replay(jsonl, db)
    for name, cols in TABLES.items():
        expected = _server_state(conn, name)
        got = replayed[name]
        assert sorted(got) == sorted(expected), name
        for pk, row in expected.items():
            for col, sqltype in cols:
                ours = _canonical(col, sqltype, got[pk][col], True)
                theirs = _canonical(col, sqltype, row[col], False)
                assert ours == theirs, f"{name}.{col} id={pk}: ours {got[pk][col]!r}, server {row[col]!r}"
    # Row counts per table and operation agree with mariadb-binlog --verbose.
    ours_counts: collections.Counter = collections.Counter()
    for line in jsonl.splitlines():
        ev = orjson.loads(line)
        if ev.get("database") == db and "rows" in ev:
            ours_counts[(ev["type"].split("_")[0].replace("write", "insert"), ev["table"])] += len(ev["rows"])
    assert ours_counts == _verbose_counts(files, db)
    assert sum(ours_counts.values()) > 20


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL", "NO_LOG"])
def test_type_zoo_through_kafka_equals_the_servers_select_on_every_row_metadata(make_mariadb, kafka, capfdbinary,
                                                                              metadata) -> None:
    """``binlake run`` then ``binlake consume``: with FULL row metadata the TABLE_MAPs say everything; with
    MINIMAL (charsets and signedness, no names or labels) and NO_LOG (MariaDB's default: nothing) the schema
    history adds what they lack, so BINARY/VARBINARY/BLOBs stay bytes and text decodes in its charset."""
    from ingester.cli.main import main

    server = make_mariadb(binlog_row_metadata=metadata)
    db = "zoo"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    _create(conn, rows=False)
    prefix = f"zoo{metadata.lower().replace('_', '')}"
    run = ["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--server-id", "4646",
           "--exit-at-end"]
    assert main(run) == 0  # the schema history (MINIMAL, NO_LOG) is captured here: it streams from this point
    _write(conn)
    assert main(run) == 0
    assert main(["consume", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--from-beginning",
                 "--exit-at-end"]) == 0
    out, err = capfdbinary.readouterr()
    assert b"no character set known" not in err
    assert_replay_equals_select(_replay(out, db), conn)


@pytest.mark.parametrize("metadata", ["MINIMAL", "NO_LOG"])
def test_bare_files_without_full_metadata_decode_alike_in_c_and_python(make_mariadb, monkeypatch, caplog,
                                                                       metadata) -> None:
    """``binlake dump`` of the files alone (no schema history): the C emitter and column walker agree with the
    Python reference; on NO_LOG the strings whose charset nobody gives keep the server's bytes (base64),
    and the log (stderr) says so once per table."""
    server = make_mariadb(binlog_row_metadata=metadata)
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    conn = server.connect("zoo")
    _create(conn)
    server.flush_logs()
    files = server.binlog_files()[:-1]
    compared = sum((assert_columnar_equals_dicts(f) for f in files), collections.Counter())
    assert sum(assert_land_images_equal_reference(f) for f in files) == sum(compared.values()) > 20
    caplog.clear()
    monkeypatch.setattr(codec_rows, "_noticed", set())  # said once per table and process: this process anew
    jsonl = _dump(files, "jsonl")
    err = caplog.text
    with monkeypatch.context() as m:
        m.setattr(native, "native", None)
        assert _dump(files, "jsonl") == jsonl
    strs = {}  # the last image of each strs row, by @1 (its id)
    for line in jsonl.splitlines():
        ev = orjson.loads(line)
        if ev.get("table") == "strs" and "rows" in ev:
            strs.update({row["after"]["@1"]: row["after"] for row in ev["rows"] if "after" in row})
    with conn.cursor() as cur:
        cur.execute("SELECT vc, HEX(vb) FROM strs WHERE id = 1")
        vc, vb = cur.fetchone()
    # strs: id, c, vc, vl, vb, ... (positions: @3 is vc, @5 is vb)
    if metadata == "NO_LOG":
        assert base64.b64decode(strs[1]["@3"]) == vc.encode() and err.count("`zoo`.`strs`: no character set") == 1
    else:  # MINIMAL logs charsets: text is text, binary is bytes
        assert strs[1]["@3"] == vc and "no character set" not in err
    assert base64.b64decode(strs[1]["@5"]).hex().upper() == vb
