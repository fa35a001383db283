"""The snapshot's own reader of result rows (sources/resultset.py, native and Python) gives exactly the rows
pymysql's reader gives for the same SELECT, once each column's converters have run: every column type of
the type zoo, NULLs, masks, and rows of more than 16 MB (multi-packet)."""

from __future__ import annotations

from typing import Any

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
