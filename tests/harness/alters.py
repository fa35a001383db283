"""ALTER TABLE statements run on a server (the daemon publishes their table statement entries), or with an entry made
by hand (the daemon's contract, ingester/records/statement.py: the table's columns before and after as the server
describes them, the snapshot's reader) for a statement the daemon would not describe; and a table's rows as the
server's SELECT."""

from __future__ import annotations

from typing import Any

import orjson

from ingester.daemon.table_reader import table_reader
from ingester.records.format import Sequence, file_number
from ingester.records.snapshot import encode_descriptor
from ingester.records.statement import TableStatement
from tests.harness.statements import publish_statement


def descriptor(server: Any, db: str, table: str) -> tuple[list[dict[str, Any]], list[list[int]] | None]:
    """A table's columns and key in the snapshot descriptor's form."""
    conn = server.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
            collations = {n: int(i) for n, i in cur.fetchall()}
        d = orjson.loads(encode_descriptor(table_reader(conn, db, table, collations, True).table_map, []))
    finally:
        conn.close()
    return d["columns"], d["primary_key"]


def alter(server: Any, kafka: Any, prefix: str, db: str, table: str, sql: str, after: list[str],
          renamed: dict[str, str] | None = None) -> None:
    """The statement on the server (``sql_mode`` non-strict, time zone UTC), then ``after``; with ``renamed`` (new
    column name -> old) also a table statement entry of it made here, at its place in the table's topic."""
    before, _ = descriptor(server, db, table)
    conn = server.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
            cur.execute("SHOW MASTER STATUS")
            file, position = cur.fetchone()[:2]
            cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
            micros = int(cur.fetchone()[0] * 1_000_000)
            cur.execute(sql)
            for statement in after:
                cur.execute(statement)
    finally:
        conn.close()
    if renamed is None:
        return
    columns, key = descriptor(server, db, table)
    entry = TableStatement("alter", db, table, sql, db, micros, "+00:00", columns=columns, primary_key=key,
                           renamed=renamed, before=before, mariadb=True)
    publish_statement(kafka.bootstrap, prefix, entry, Sequence(file_number(file), position + 1))


def select_rows(server: Any, db: str, table: str) -> dict[int, dict[str, Any]]:
    """The server's SELECT * of a table keyed by its first column (time zone UTC)."""
    conn = server.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(f"SELECT * FROM `{table}`")
            names = [d[0] for d in cur.description]
            return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    finally:
        conn.close()
