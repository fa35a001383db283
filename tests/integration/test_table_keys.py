"""A table's key (its primary key, or the UNIQUE index the server uses in its place) as the daemon knows it
without FULL row metadata, against the server's own word: after every statement below, on a FULL MariaDB,

- the schema history's indexes and nullability equal information_schema's (``capture``),
- the key the history puts in a record's schema entry (``attachment``, applied by ``enrich``) equals the
  primary key of the TABLE_MAP the server writes for the table's next row (FULL metadata: the server's
  key, which for a table without a PRIMARY KEY is the first UNIQUE index of NOT NULL whole columns),
- and so does the key of the snapshot's table description (``table_reader``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ingester.codec import BinlogDecoder
from ingester.codec import events as E
from ingester.codec.table_map import TableMap
from ingester.daemon.table_reader import table_reader
from ingester.schema.capture import capture, capture_databases
from ingester.schema.history import SchemaHistory, enrich

pytestmark = pytest.mark.integration
DB = "tablekeys"

# (statement, the table whose key is checked after it; None: its indexes only)
STEPS = [
    # nullable UNIQUE indexes are never the key; of the NOT NULL ones, the first in the server's order
    ("CREATE TABLE t (a INT, b INT NOT NULL, c VARCHAR(10) NOT NULL, d INT, UNIQUE un (a), UNIQUE uk (b, c))", "t"),
    ("ALTER TABLE t MODIFY b INT NULL", "t"),  # uk has a nullable column now: no key
    ("ALTER TABLE t MODIFY a INT NOT NULL", "t"),  # un
    ("ALTER TABLE t MODIFY b INT NOT NULL", "t"),  # both: un stays first (the server keeps its order)
    ("ALTER TABLE t ADD PRIMARY KEY (d)", "t"),  # a primary key beats every UNIQUE index
    ("ALTER TABLE t DROP PRIMARY KEY", "t"),
    ("ALTER TABLE t DROP INDEX un", "t"),  # uk
    ("ALTER TABLE t RENAME COLUMN c TO c2, RENAME INDEX uk TO uk2", "t"),
    ("ALTER TABLE t CHANGE b b2 BIGINT NOT NULL FIRST", "t"),
    # a prefix is never the key; a prefix as long as the column is none
    ("CREATE TABLE u (a VARCHAR(10) NOT NULL, b TEXT NOT NULL, c INT NOT NULL, e VARCHAR(4) NOT NULL,"
     " UNIQUE u0 (a(5)), KEY k (c), KEY kb (b(8)))", "u"),
    ("CREATE UNIQUE INDEX uc ON u (c)", "u"),
    ("ALTER TABLE u ADD CONSTRAINT ue UNIQUE (e(4))", "u"),  # after uc
    ("DROP INDEX uc ON u", "u"),  # ue
    ("ALTER TABLE u DROP CONSTRAINT ue, ADD COLUMN s SERIAL FIRST", "u"),  # SERIAL: NOT NULL UNIQUE
    ("CREATE OR REPLACE INDEX s ON u (s)", "u"),  # now an index that is not UNIQUE, of the same name
    ("ALTER TABLE u ADD UNIQUE INDEX IF NOT EXISTS u0 (c), ADD UNIQUE KEY (a, c)", "u"),
    # MariaDB's long UNIQUE (a hash: of a BLOB or TEXT column, or USING HASH) is never the key, and sorts last
    # (its hidden hash column is in the TABLE_MAP, which the history does not know: indexes only)
    ("CREATE TABLE h (a INT NOT NULL, b TEXT NOT NULL, c INT NOT NULL, UNIQUE ub (b), UNIQUE uc (c) USING HASH,"
     " UNIQUE ua (a))", None),
    # names the server gives: the first column's, then _2, _3; a CONSTRAINT's symbol
    ("CREATE TABLE v (x INT NOT NULL, y INT NOT NULL UNIQUE, z INT NOT NULL, UNIQUE (x), UNIQUE (y), KEY (z),"
     " CONSTRAINT c1 UNIQUE (z), FULLTEXT KEY ft (w), w TEXT)", "v"),
    ("ALTER TABLE v DROP INDEX y, ADD UNIQUE (y)", "v"),  # y_2 first now
    ("ALTER TABLE v DROP KEY y_2, DROP INDEX x", "v"),  # y (added last), c1, ...
    ("CREATE TABLE w LIKE v", "w"),
    ("ALTER TABLE w DROP COLUMN y", "w"),  # its index goes with it
    ("ALTER TABLE w CHANGE z z2 INT NULL", "w"),  # c1 nullable: no key
    ("ALTER TABLE w ADD COLUMN n INT NOT NULL, ADD CONSTRAINT UNIQUE un (n, x)", "w"),
    # a FOREIGN KEY's own index, and the one that makes it redundant
    ("CREATE TABLE p (id INT PRIMARY KEY)", "p"),
    ("CREATE TABLE r (a INT NOT NULL, b INT NOT NULL, CONSTRAINT fr FOREIGN KEY (a) REFERENCES p (id))", "r"),
    ("ALTER TABLE r ADD UNIQUE ua (a, b)", "r"),  # serves the FOREIGN KEY: its index fr goes
    ("ALTER TABLE r ADD FOREIGN KEY fb (b) REFERENCES p (id)", "r"),
    ("ALTER TABLE r DROP FOREIGN KEY fb", "r"),  # its index stays
    ("ALTER TABLE r DROP INDEX fb, ADD UNIQUE (b)", "r"),
    ("ALTER TABLE r ADD PRIMARY KEY (b) USING BTREE COMMENT 'the key'", "r"),
    ("ALTER TABLE r DROP INDEX `PRIMARY`", "r"),
]


def _table_map(server: Any, table: str) -> TableMap:
    """The TABLE_MAP the server wrote for ``table``'s last row (in the binlog before the last one)."""
    server.flush_logs()
    path = server.binlog_files()[-2]
    data = path.read_bytes()
    dec = BinlogDecoder(str(path))
    found = None
    pos = 4
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        ev = dec.decode(data[pos : pos + size], pos)
        if isinstance(ev, E.TableMapEvent) and ev.table_map.database == DB and ev.table_map.table == table:
            found = ev.table_map
        pos += size
    assert found is not None, table
    return found


def _names(tm: TableMap) -> list[str]:
    return [tm.columns[i].name for i, _ in tm.primary_key or ()]


def test_the_history_and_the_snapshot_name_the_key_the_server_names(mariadb) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")
    mariadb.execute(f"CREATE DATABASE {DB}")
    conn = mariadb.connect(DB)
    history = SchemaHistory(lambda db, t: db == DB)
    with conn.cursor() as cur:
        cur.execute("SET SESSION foreign_key_checks = 0, sql_mode = ''")
        history.tables = capture(cur, history.accept)
        history.databases = capture_databases(cur)
        cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
        collations = {name: int(cid) for name, cid in cur.fetchall()}
    keys = set()
    for sql, table in STEPS:
        with conn.cursor() as cur:
            cur.execute(sql)
            history.apply(DB, sql, "test")
            server = capture(cur, history.accept)
            assert history.tables == server, sql
            if table is None:
                continue
            cur.execute(f"INSERT IGNORE INTO `{table}` () VALUES ()")  # a row, for its TABLE_MAP
            tm = _table_map(mariadb, table)
            cur.execute(f"DELETE FROM `{table}`")
        plain = dataclasses.replace(tm, primary_key=None, columns=[dataclasses.replace(c, name=f"@{c.index + 1}")
                                                                   for c in tm.columns], has_names=False)
        entry = history.attachment(plain, "test")
        assert entry is not None
        assert _names(enrich(plain, entry)) == _names(tm), sql
        assert _names(table_reader(conn, DB, table, collations, mariadb=True).table_map) == _names(tm), sql
        keys.add(tuple(_names(tm)))
    # the steps have keys of one and of several columns, and tables without any
    assert () in keys and any(len(k) == 1 for k in keys) and any(len(k) > 1 for k in keys)
