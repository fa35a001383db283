"""Schema history on a server with binlog_row_metadata=MINIMAL (TABLE_MAPs without column names):
every change consumed through Kafka carries the column names and values the server's own SELECT shows
at that point, across ADD/DROP/reorder/type change/RENAME COLUMN/RENAME TABLE/CREATE ... LIKE, a clean
restart and a kill -9 of the daemon; after every DDL the history's columns equal information_schema's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import pytest

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E
from ingester.daemon.kafka_io import read_compacted
from ingester.records.format import Sequence, file_number
from ingester.schema.capture import capture, capture_databases
from ingester.schema.history import SchemaHistory
from tests.harness.daemon import BINLAKE
from tests.harness.land import mirror_rows, plain_rows, run_land

pytestmark = pytest.mark.integration
DB = "sh"

# (sql, table, ids): DDL when ids is None; else DML whose rows (by id) are checked against SELECT.
PHASE1: list[tuple[str, str, list[int] | None]] = [
    ("INSERT INTO t VALUES (3, 'c', 4000000000, 'z')", "t", [3]),
    ("ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 7 AFTER id", "t", None),
    ("INSERT INTO t VALUES (4, -5, 'd', 1, 'x')", "t", [4]),
    ("UPDATE t SET a = CONCAT(a, '!') WHERE id IN (1, 3)", "t", [1, 3]),
    ("ALTER TABLE t DROP COLUMN a", "t", None),
    ("UPDATE t SET c = c + 1 WHERE id <= 2", "t", [1, 2]),
    ("ALTER TABLE t MODIFY b BIGINT NULL FIRST", "t", None),  # reorder, change type and signedness
    ("INSERT INTO t (id, b, c, e) VALUES (5, -9000000000, 3, 'y')", "t", [5]),
]
PHASE2: list[tuple[str, str, list[int] | None]] = [
    ("ALTER TABLE t CHANGE e e2 ENUM('x', 'y', 'z', 'w') DEFAULT 'w', ALGORITHM=COPY", "t", None),
    ("INSERT INTO t (b, id, c) VALUES (1, 6, 1)", "t", [6]),
    ("ALTER TABLE t RENAME COLUMN c TO c2", "t", None),
    ("UPDATE t SET c2 = 100, e2 = 'w' WHERE id IN (4, 5)", "t", [4, 5]),
    ("RENAME TABLE t TO t2", "t2", None),
    ("DELETE FROM t2 WHERE id = 2", "t2", [2]),
    ("ALTER TABLE t2 ADD COLUMN s SET('p', 'q') FIRST, ADD COLUMN u INT UNSIGNED, DROP PRIMARY KEY, "
     "ADD PRIMARY KEY (id, c2)", "t2", None),
    ("INSERT INTO t2 (id, b, c2, s, u) VALUES (7, 7, 7, 'p,q', 4294967295)", "t2", [7]),
    ("CREATE TABLE t3 LIKE t2", "t3", None),
    ("INSERT INTO t3 SELECT * FROM t2 WHERE id >= 5", "t3", [5, 6, 7]),
    ("CREATE TABLE `we-ird` (`k` INT PRIMARY KEY, `v``x` VARCHAR(5) CHARACTER SET latin1) ENGINE=InnoDB",
     "we-ird", None),
    ("INSERT INTO `we-ird` VALUES (1, 'ü')", "we-ird", [1]),
    ("TRUNCATE t3", "t3", None),
    ("INSERT INTO t3 (id, b, c2, u) VALUES (8, 8, 8, 8)", "t3", [8]),
    ("DROP TABLE t2", "t2", None),
]


# NO_LOG (MariaDB's default): TABLE_MAPs without charsets, signedness or labels. Binary <-> text columns,
# charset conversions, the table's and the database's defaults; every value is checked against SELECT
# (pymysql gives bytes for binary columns and text decoded from the column's charset).
NO_LOG_STEPS: list[tuple[str, str, list[int] | None]] = [
    ("CREATE TABLE c (id INT PRIMARY KEY, a VARCHAR(10), b VARBINARY(10), l VARCHAR(10) CHARACTER SET latin1,"
     " bl BLOB, bn BINARY(4), u INT UNSIGNED)", "c", None),
    ("INSERT INTO c VALUES (1, 'héllo😀', x'ff00c3', 'çà', x'00fffe', x'01', 4000000000)", "c", [1]),
    ("UPDATE c SET b = 'abc', bl = 'blob-text' WHERE id = 1", "c", [1]),
    ("ALTER TABLE c MODIFY b VARCHAR(10), MODIFY bl TEXT", "c", None),  # binary -> text, the table's charset
    ("INSERT INTO c (id, a, b, l, bl) VALUES (2, 'x', 'üñ', 'é', 'ß')", "c", [2]),
    ("ALTER TABLE c MODIFY a VARBINARY(40)", "c", None),  # text -> binary
    ("INSERT INTO c (id, a, b, l, bl, bn) VALUES (3, x'ff00', 'b', 'l', 'ü', x'fffefdfc')", "c", [3]),
    ("UPDATE c SET a = CONCAT(a, x'80') WHERE id IN (1, 2)", "c", [1, 2]),
    ("ALTER TABLE c CONVERT TO CHARACTER SET latin1", "c", None),  # every text column, and the default
    ("INSERT INTO c (id, a, b, l, bl) VALUES (4, x'80', 'é', 'ÿ', 'ß')", "c", [4]),
    ("ALTER TABLE c ADD COLUMN n VARCHAR(5)", "c", None),  # latin1: the table's default now
    ("INSERT INTO c (id, n) VALUES (5, 'ñ')", "c", [5]),
    ("ALTER TABLE c ADD COLUMN m VARCHAR(5), DEFAULT CHARSET=utf8mb4", "c", None),
    ("INSERT INTO c (id, m, n) VALUES (6, '😀', 'x')", "c", [6]),
    ("ALTER TABLE c CHANGE l l2 VARCHAR(10) CHARACTER SET ucs2", "c", None),
    ("UPDATE c SET l2 = CONCAT(COALESCE(l2, ''), '☃') WHERE id <= 4", "c", [1, 2, 3, 4]),
    ("RENAME TABLE c TO c2", "c2", None),
    ("ALTER DATABASE sh CHARACTER SET latin1", "c2", None),
    ("CREATE TABLE d (id INT PRIMARY KEY, v VARCHAR(5), w VARCHAR(5) COLLATE utf8mb4_bin, x CHAR(3) BINARY)",
     "d", None),  # v and x latin1 (x's BINARY is a collation), w utf8mb4 from its collation
    ("INSERT INTO d VALUES (1, 'é', '😀', 'ü')", "d", [1]),
    ("CREATE TABLE e LIKE c2", "e", None),
    ("INSERT INTO e SELECT * FROM c2", "e", [1, 2, 3, 4, 5, 6]),
    ("DELETE FROM c2 WHERE id = 3", "c2", [3]),
]


def _select(conn: Any, table: str, ids: list[int]) -> dict[int, dict[str, Any]]:
    key = "k" if table == "we-ird" else "id"
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table}` WHERE `{key}` IN ({', '.join(map(str, ids))})")
        names = [d[0] for d in cur.description]
        return {row[names.index(key)]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def _compact(tables: dict) -> dict:
    return {t: ([(c.name, c.type, c.charset) for c in s.columns], s.charset) for t, s in tables.items()}


class _Steps:
    """Runs statements and records, per DML, its binlog range and the server's rows it touched."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.conn = server.connect(DB)
        self.history = SchemaHistory(lambda db, t: db == DB)
        with self.conn.cursor() as cur:
            self.history.tables = capture(cur, self.history.accept)
            self.history.databases = capture_databases(cur)
        self.checks: list[tuple[Sequence, Sequence, str, str, dict[int, dict[str, Any]]]] = []

    def seq(self) -> Sequence:
        pos = self.server.current_binlog_position()
        return Sequence(file_number(pos.file), pos.position)

    def run(self, steps: list[tuple[str, str, list[int] | None]]) -> None:
        for sql, table, ids in steps:
            before = _select(self.conn, table, ids) if ids and sql.startswith("DELETE") else None
            start = self.seq()
            with self.conn.cursor() as cur:
                cur.execute(sql)
            if ids is None:  # the parser follows the server: its columns and charsets equal information_schema's
                self.history.apply(DB, sql, "test")
                with self.conn.cursor() as cur:
                    server_tables = capture(cur, self.history.accept)
                    databases = capture_databases(cur)
                assert self.history.tables == server_tables, (sql, _compact(self.history.tables),
                                                              _compact(server_tables))
                assert self.history.databases[DB] == databases[DB], sql
                continue
            kind = "delete" if before is not None else "after"
            self.checks.append((start, self.seq(), table, kind, before if before is not None
                                else _select(self.conn, table, ids)))


def _consumed(kafka: Any, prefix: str) -> list[Any]:
    return [i for i in committed_record_events(kafka.bootstrap, prefix)
            if isinstance(i.event, E.RowsEvent) and i.event.database == DB]


def _check(items: list[Any], steps: _Steps) -> None:
    for start, end, table, kind, expected in steps.checks:
        got: dict[int, dict[str, Any]] = {}
        for item in items:
            ev = item.event
            if start <= item.seq < end and ev.table == table:
                for row in ev.rows:
                    image = row["before"] if kind == "delete" else row["after"]
                    got[image["k" if table == "we-ird" else "id"]] = image
        assert got == expected, (table, kind, start)


def test_minimal_metadata_changes_keep_their_columns_across_ddl_and_restarts(make_mariadb, kafka) -> None:
    server = make_mariadb(binlog_row_metadata="MINIMAL")
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    server.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, a VARCHAR(20), b INT UNSIGNED, e ENUM('x', 'y', 'z'))")
    server.execute(f"INSERT INTO {DB}.t VALUES (1, 'a', 1, 'x'), (2, 'b', 3000000000, 'y')")
    prefix = "hist"
    steps = _Steps(server)
    base = ["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
            "--server-id", "4747", "--snapshot", "initial"]
    # The snapshot captures the schema at its point; phase 1 is streamed by a second, clean start.
    assert main([*base, "--exit-at-end"]) == 0
    snapshot = {r["after"]["id"]: r["after"] for i in _consumed(kafka, prefix) for r in i.event.rows}
    assert snapshot == _select(steps.conn, "t", [1, 2])
    steps.run(PHASE1)
    assert main([*base, "--exit-at-end"]) == 0
    _check(_consumed(kafka, prefix), steps)
    # Phase 2 while a daemon runs; kill -9 it halfway, then finish with a new one.
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([*BINLAKE, *base], env=env, stderr=subprocess.DEVNULL)
    try:
        steps.run(PHASE2[:7])
        time.sleep(2)  # let it commit some of it
    finally:
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    steps.run(PHASE2[7:])
    assert main([*base, "--exit-at-end"]) == 0
    items = _consumed(kafka, prefix)
    _check(items, steps)
    assert {i.event.table for i in items} == {"t", "t2", "t3", "we-ird"}
    seen = [(i.seq, n) for i in items for n in range(len(i.event.rows))]
    assert len(seen) == len(set(seen)), "a change was published twice"
    # The history topic holds each table's latest columns; dropped tables say so.
    history = {k.decode(): v for k, v in read_compacted(kafka.bootstrap, f"{prefix}._schema_history").items()}
    assert b'"dropped":true' in history[f'["{DB}","t2"]'] and b'"dropped":true' in history[f'["{DB}","t"]']
    assert b'"name":"c2"' in history[f'["{DB}","t3"]']


def test_no_log_metadata_keeps_binary_and_text_columns_apart_across_ddl(make_mariadb, kafka) -> None:
    server = make_mariadb(binlog_row_metadata="NO_LOG")
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    steps = _Steps(server)
    base = ["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", "nolog",
            "--server-id", "4748", "--exit-at-end"]
    assert main(base) == 0  # the schema history is captured here (no tables yet: the database's charset)
    steps.run(NO_LOG_STEPS[:9])
    assert main(base) == 0  # a restart reads the history back (the table's and the database's charsets)
    steps.run(NO_LOG_STEPS[9:])
    assert main(base) == 0
    items = _consumed(kafka, "nolog")
    _check(items, steps)
    assert {i.event.table for i in items} == {"c", "c2", "d", "e"}
    types = {type(v) for i in items for r in i.event.rows for image in r.values() for v in image.values()}
    assert bytes in types and str in types


def test_unparsed_ddl_stops_or_skips_the_table(make_mariadb, kafka, monkeypatch, capsys) -> None:
    server = make_mariadb(binlog_row_metadata="MINIMAL")
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {DB}.keep (id INT PRIMARY KEY)")
    server.execute(f"CREATE TABLE {DB}.odd (id INT PRIMARY KEY)")
    base = ["run", "--source", server.url, "--kafka", kafka.bootstrap, "--server-id", "4748", "--exit-at-end"]
    assert main([*base, "--topic-prefix", "unp"]) == 0  # captures the schema; streams from here
    server.execute(f"ALTER TABLE {DB}.odd ADD SYSTEM VERSIONING")  # adds hidden columns
    server.execute(f"INSERT INTO {DB}.odd VALUES (1)")
    server.execute(f"INSERT INTO {DB}.keep VALUES (1)")
    pos = server.current_binlog_position()
    assert main([*base, "--topic-prefix", "unp"]) == 2
    err = capsys.readouterr().err
    assert f"DDL on {DB}.odd that the schema history cannot follow" in err and pos.file in err, err
    monkeypatch.setenv("BINLAKE_SCHEMA_ON_UNPARSED_DDL", "skip-table")
    assert main([*base, "--topic-prefix", "unp"]) == 0
    tables = [(i.event.table, i.event.rows) for i in _consumed(kafka, "unp")]
    assert tables == [("keep", [{"after": {"id": 1}}])]


def test_land_mirrors_a_minimal_metadata_server_with_its_column_names(make_mariadb, kafka, spark,
                                                                      tmp_path) -> None:
    """binlake land decodes the schema entries like FULL table maps: lake columns have the server's names."""
    server = make_mariadb(binlog_row_metadata="MINIMAL")
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    conn = server.connect(DB)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b INT UNSIGNED, e ENUM('x', 'y'))")
        cur.execute("INSERT INTO t VALUES (1, 'one', 4000000000, 'y'), (2, 'two', 2, 'x')")
    base = ["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", "landmin",
            "--server-id", "4749", "--exit-at-end", "--snapshot", "initial"]
    assert main(base) == 0
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE t ADD COLUMN c INT DEFAULT 3 FIRST, RENAME COLUMN a TO a2, DROP COLUMN e")
        cur.execute("INSERT INTO t (id, a2, b) VALUES (3, 'three', 3)")
        cur.execute("UPDATE t SET b = b + 1")  # every row's image now has the current columns
        cur.execute("DELETE FROM t WHERE id = 2")
    assert main(base) == 0
    assert run_land(kafka, "landmin", tmp_path / "lake") == 0
    rows, types = mirror_rows(spark, tmp_path / "lake", DB, "t")
    expected = plain_rows(conn, "t", "id")
    assert {k: {c: row[c] for c in ("id", "c", "a2", "b")} for k, row in rows.items()} == expected
    assert {"id", "c", "a2", "b"} <= set(types) and not any(c.startswith("@") for c in types)
    assert not {"a", "e"} & set(types)  # renamed away and dropped: gone at the ALTER's entry (docs/LAND.md)


def test_mysql84_minimal_metadata_strings_where_docker_exists(mysql84, kafka) -> None:
    """MySQL 8.4 with binlog_row_metadata=MINIMAL (charsets and signedness, no names or labels)."""
    with mysql84.connect() as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
        cur.execute("DROP DATABASE IF EXISTS mini")
        cur.execute("CREATE DATABASE mini CHARACTER SET utf8mb4")
        cur.execute("CREATE TABLE mini.s (id INT PRIMARY KEY, vb VARBINARY(10), bl BLOB, bn BINARY(3), v VARCHAR(9),"
                    " l VARCHAR(9) CHARACTER SET latin1, u TEXT CHARACTER SET ucs2, n INT UNSIGNED, e ENUM('p','q'))")
    try:
        base = ["run", "--source", mysql84.url, "--kafka", kafka.bootstrap, "--topic-prefix", "mini84",
                "--server-id", "4750", "--exit-at-end"]
        assert main(base) == 0  # the schema history is captured here
        with mysql84.connect() as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO mini.s VALUES (1, x'ff00c3', x'00fffe', x'01', 'héllo😀', 'çà', 'ucs2 ☃',"
                        " 4000000000, 'q'), (2, NULL, '', x'', '', '', '', 0, 'p')")
            cur.execute("UPDATE mini.s SET vb = x'80', v = 'ü' WHERE id = 2")
            conn.commit()
        assert main(base) == 0
        with mysql84.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT * FROM mini.s")
            names = [d[0] for d in cur.description]
            expected = {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
        got: dict[int, dict[str, Any]] = {}
        for item in committed_record_events(kafka.bootstrap, "mini84"):
            if isinstance(item.event, E.RowsEvent) and item.event.database == "mini":
                for row in item.event.rows:
                    got[row["after"]["id"]] = row["after"]
        assert got == expected
    finally:
        with mysql84.connect() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
