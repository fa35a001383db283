"""The snapshot's own reader of result rows (sources/resultset.py, native and Python) gives exactly the rows
pymysql's reader gives for the same SELECT, once each column's converters have run: every column type of
the type zoo, NULLs, masks, and rows of more than 16 MB (multi-packet)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ingester.config import load_config
from ingester.daemon.source_conn import connect, unbuffered_cursor
from ingester.daemon.table_reader import table_reader
from ingester.sources import resultset
from tests.harness import zoo

pytestmark = pytest.mark.integration


def _pymysql_rows(conn: Any, reader: Any, sql: str) -> list[list[Any]]:
    """pymysql's own rows, each column's converters applied as they were before the native reader."""
    with conn.cursor() as cur:
        cur.execute(sql)
        rows = [list(r) for r in cur.fetchall()]
    for row in rows:
        for i, f in reader.converters:
            if row[i] is not None:
                row[i] = f(row[i])
    return rows


def _our_rows(conn: Any, reader: Any, sql: str, limit: int = -1) -> list[list[Any]]:
    with conn.cursor(unbuffered_cursor()) as cur:
        cur.execute(sql)
        result = reader.result(cur)
        rows: list[list[Any]] = []
        while batch := result.fetch(limit):
            rows += reader.convert(batch)
        cur.execute("SELECT 1")  # the connection is ready for the next query
        assert list(cur.fetchall()) == [("1",)]  # (no converters on this connection)
    return rows


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_rows_equal_pymysqls_for_every_column_type(make_mariadb, monkeypatch, native: bool) -> None:
    if native and resultset._native is None:
        pytest.fail("the native reader is not built (pip install -e . compiles it)")
    if not native:
        monkeypatch.setattr(resultset, "_native", None)
    server = make_mariadb(options={"max_allowed_packet": "64M"})
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    zoo.create(server.connect("zoo"))
    server.execute("CREATE TABLE zoo.big (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT, n INT)")
    conn = server.connect("zoo")
    with conn.cursor() as cur:  # made by the server: 17 MB of every byte value, 21 MB of UTF-8
        cur.execute("INSERT INTO big VALUES (1, REPEAT(UNHEX(%s), 17 * 4096 + 3), REPEAT('é😀x', 3 << 20), 7),"
                    " (2, NULL, 'a\\nb', NULL), (3, '', '', -1)", (bytes(range(256)).hex(),))
    conn.commit()
    raw = connect(load_config(environ={}, overrides={"source": {"url": server.url}}))
    with raw.cursor() as cur:
        cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
        collations = {name.decode(): int(cid) for name, cid in cur.fetchall()}
    compared = 0
    for name in [*zoo.TABLES, "big"]:
        reader = table_reader(raw, "zoo", name, collations, mariadb=True)
        sql = reader.query(1000, None)[0]
        theirs = _pymysql_rows(raw, reader, sql)
        assert theirs, name
        if name == "big":
            assert len(theirs[0][1]) > 16 << 20 and len(theirs[0][2]) == 3 * 3 << 20, "rows of several packets"
        assert _our_rows(raw, reader, sql) == theirs, name
        assert _our_rows(raw, reader, sql, limit=2) == theirs, name  # fetched in pieces
        compared += len(theirs)
    assert reader.utf8 and b"i" in reader.plan[0] and b"r" in reader.plan[0]  # big: id INT, t LONGTEXT fused
    assert compared > 3


def test_json_rows_are_orjsons_json_of_pymysqls_rows(make_mariadb) -> None:
    """Where every column's value is its text (integers, UTF-8 and ASCII text: DECIMAL, dates and times, ZEROFILL,
    escapes, NULLs), fetch_json's records hold byte for byte orjson's JSON of pymysql's rows, each record within
    the bound asked for, in pieces and in one fetch, a 17 MB row (a multi-packet, read in Python) among them."""
    server = make_mariadb(options={"max_allowed_packet": "64M"})
    server.execute("CREATE DATABASE j CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE j.t (id BIGINT UNSIGNED PRIMARY KEY, z INT(6) ZEROFILL, n INT, s VARCHAR(200),"
                   " d DECIMAL(12,3), dt DATETIME(6), tm TIME(3), y YEAR, e ENUM('a', 'é'), t LONGTEXT)")
    conn = server.connect("j")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", [
            (i, i % 1000, -i if i % 2 else None, f'"q\\{i}\n\t\x01é😀' * (i % 4), f"{i}.{i % 1000:03d}",
             f"2024-02-{i % 28 + 1:02d} 01:02:03.{i:06d}", f"-{i % 800}:01:02.5", 1901 + i % 200,
             "é" if i % 2 else "a", "x" * (i % 50)) for i in range(1, 3001)])
        cur.execute("UPDATE t SET t = REPEAT('é😀x', 3 << 20), id = 18446744073709551615 WHERE id = 1500")
    conn.commit()
    raw = connect(load_config(environ={}, overrides={"source": {"url": server.url}}))
    with raw.cursor() as cur:
        cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
        collations = {name.decode(): int(cid) for name, cid in cur.fetchall()}
    reader = table_reader(raw, "j", "t", collations, mariadb=True)
    sql = reader.query(5000, None)[0]
    theirs = _pymysql_rows(raw, reader, sql)
    assert len(theirs) == 3000 and any(len((r[9] or "").encode()) > 16 << 20 for r in theirs)
    for limit, max_bytes in ((-1, 900_000), (700, 50_000), (1, 1_000_000)):
        groups, count = [], 0
        with raw.cursor(unbuffered_cursor()) as cur:
            cur.execute(sql)
            result = reader.result(cur)
            assert reader.json_rows, reader.plan
            while (got := result.fetch_json(limit, max_bytes)).rows:
                assert got.last == theirs[count + got.rows - 1]
                groups += got.groups
                count += got.rows
        at = 0
        for group in groups:
            rows = len(orjson.loads(group))
            assert group == orjson.dumps(theirs[at : at + rows])
            assert len(group) <= max_bytes or rows == 1
            at += rows
        assert at == count == len(theirs)
