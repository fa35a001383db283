"""Table statement entries (issue 37; docs/FORMAT.md "Table statements") from a real MariaDB through a real Kafka,
on binlog_row_metadata FULL, MINIMAL and NO_LOG: one server and two daemon runs per mode (the first captures the
schema history, the second publishes the statement sequence), read back as `binlake consume` reads them.

- every statement that changes a captured table's rows or columns has its entries where they belong: in the
  table's topic, between the rows before and after it, at the statement's sequence (steps in order: a RENAME swap);
  excluded tables and statements that change neither (an index, a comment, ANALYZE) have none;
- each entry's ``columns`` and ``primary_key`` equal the table's description from information_schema after the
  statement (the snapshot's reader), and on FULL the next TABLE_MAP the server wrote for the table.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import BinlogDecoder
from ingester.codec import events as E
from ingester.codec.table_map import TableMap
from ingester.daemon.table_reader import table_reader
from ingester.records.format import RecordEvent, Sequence, file_number
from ingester.records.statement import TableStatementEvent
from ingester.schema.table_columns import COLUMN_FIELDS
from tests.harness.daemon import run_daemon

pytestmark = pytest.mark.integration
DB = "ts"
INCLUDE = "ts.*,ts2.*"
EXCLUDE = "ts.skip*"

# (statement, the entries it gives: (table, op, fields checked) in order; None: DML). After each DDL a row of
# each table it names, for the TABLE_MAP after it (its entry's columns are compared with the table's description
# from information_schema then; "_as": another table's, that has the columns now; "_before": a table's before the
# statement)
STEPS: list[tuple[str, list[tuple[str, str, dict[str, Any]]] | None]] = [
    ("CREATE TABLE tr (id INT PRIMARY KEY, v VARCHAR(10) COLLATE utf8mb4_bin)", [("tr", "create", {})]),
    ("INSERT INTO tr VALUES (1, 'a'), (2, 'b')", None),
    ("TRUNCATE TABLE tr", [("tr", "truncate", {})]),
    ("INSERT INTO tr VALUES (3, 'c')", None),
    ("CREATE TABLE dr (id INT PRIMARY KEY, old TEXT)", [("dr", "create", {})]),
    ("INSERT INTO dr VALUES (1, 'x')", None),
    ("DROP TABLE dr", [("dr", "drop", {})]),
    ("CREATE TABLE dr (k BIGINT UNSIGNED NOT NULL, n CHAR(3) BINARY, UNIQUE uk (k))", [("dr", "create", {})]),
    ("INSERT INTO dr VALUES (5, 'n')", None),
    ("CREATE OR REPLACE TABLE dr (k BIGINT NOT NULL PRIMARY KEY, e ENUM('x', 'y') CHARACTER SET latin1)",
     [("dr", "drop", {}), ("dr", "create", {})]),
    ("CREATE TABLE k (id INT PRIMARY KEY, s SET('p', 'q'))", [("k", "create", {})]),
    ("INSERT INTO k VALUES (1, 'p')", None),
    ("RENAME TABLE k TO k2", [("k", "rename", {"to": (DB, "k2")}), ("k2", "rename", {"source": (DB, "k")})]),
    ("INSERT INTO k2 VALUES (2, 'q')", None),
    ("ALTER TABLE k2 RENAME TO k3, ADD COLUMN z INT", [("k2", "rename", {"to": (DB, "k3")}),
                                                      ("k3", "rename", {"source": (DB, "k2"), "_before": "k2"}),
                                                      ("k3", "alter", {})]),
    ("CREATE TABLE lk LIKE k3", [("lk", "create", {})]),
    ("CREATE TABLE u (id INT PRIMARY KEY, a DECIMAL(12,3) UNSIGNED)", [("u", "create", {})]),
    ("INSERT INTO u VALUES (1, 1.5)", None),
    ("ALTER TABLE u ADD COLUMN g DATETIME(3) DEFAULT '2024-01-02 03:04:05.678', ADD h TIMESTAMP(6) NULL DEFAULT"
     " CURRENT_TIMESTAMP(6)", [("u", "alter", {})]),
    ("ALTER TABLE u ADD INDEX ix (a), COMMENT 'no columns changed'", []),
    ("ANALYZE TABLE u", []),
    ("ALTER TABLE u CHANGE a a2 DECIMAL(14,2), RENAME COLUMN g TO g2", [("u", "alter", {"renamed": {"a2": "a",
                                                                                               "g2": "g"}})]),
    ("CREATE TABLE s1 (id INT PRIMARY KEY, one INT)", [("s1", "create", {})]),
    ("CREATE TABLE s2 (id INT PRIMARY KEY, two VARCHAR(5))", [("s2", "create", {})]),
    ("INSERT INTO s1 VALUES (1, 1)", None),
    ("RENAME TABLE s1 TO tmp, s2 TO s1, tmp TO s2",  # gh-ost's and pt-osc's swap
     [("s1", "rename", {"to": (DB, "tmp")}), ("tmp", "rename", {"source": (DB, "s1"), "_as": "s2"}),
      ("s2", "rename", {"to": (DB, "s1")}), ("s1", "rename", {"source": (DB, "s2")}),
      ("tmp", "rename", {"to": (DB, "s2")}), ("s2", "rename", {"source": (DB, "tmp")})]),
    ("INSERT INTO s2 VALUES (2, 2)", None),
    ("CREATE TABLE nk (a INT NOT NULL, b VARCHAR(4) NOT NULL, c TEXT)", [("nk", "create", {})]),
    ("ALTER TABLE nk ADD UNIQUE INDEX ub (b)", [("nk", "alter", {})]),  # the table's key now
    ("ALTER TABLE nk ADD PRIMARY KEY (a, b(2))", [("nk", "alter", {})]),
    ("CREATE TABLE p (id INT NOT NULL PRIMARY KEY, v INT) PARTITION BY RANGE (id)"
     " (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)", [("p", "create", {})]),
    ("INSERT INTO p VALUES (1, 1), (20, 20)", None),
    ("ALTER TABLE p TRUNCATE PARTITION p0", [("p", "partition", {"partition": {"action": "truncate",
                                                                               "names": ["p0"]}})]),
    ("CREATE TABLE px (id INT NOT NULL PRIMARY KEY, v INT)", [("px", "create", {})]),
    ("INSERT INTO px VALUES (30, 30)", None),
    ("DELETE FROM px WHERE id < 10", None),  # what does not fit p1 (MariaDB 10.11 validates: no WITHOUT VALIDATION)
    ("ALTER TABLE p EXCHANGE PARTITION p1 WITH TABLE px",
     [("p", "partition", {"partition": {"action": "exchange", "names": ["p1"], "with": [DB, "px"]}}),
      ("px", "partition", {"partition": {"action": "exchange", "names": ["p1"], "with": [DB, "p"]}})]),
    ("ALTER TABLE p REORGANIZE PARTITION p1 INTO (PARTITION p1a VALUES LESS THAN (50),"
     " PARTITION p1b VALUES LESS THAN MAXVALUE)",
     [("p", "partition", {"partition": {"action": "reorganize", "names": ["p1"]}})]),
    ("CREATE TABLE z (id INT PRIMARY KEY, t TINYINT UNSIGNED, m MEDIUMINT, f FLOAT, f2 FLOAT(30), d DOUBLE,"
     " de DECIMAL, bi BIT(10), y YEAR, da DATE, ti TIME(2), ts TIMESTAMP NULL, c CHAR(5), vb VARBINARY(7),"
     " tt TINYTEXT, tx TEXT(300) CHARACTER SET latin1, mt MEDIUMTEXT COLLATE utf8mb4_unicode_ci, lb LONGBLOB,"
     " j JSON, g GEOMETRY, pt POINT, e ENUM('a', 'b') NOT NULL DEFAULT 'b', n NATIONAL CHAR(2), bo BOOL,"
     " vc VARCHAR(300) COMPRESSED, ser SERIAL)", [("z", "create", {})]),
    ("ALTER TABLE z CONVERT TO CHARACTER SET latin1 COLLATE latin1_bin", [("z", "alter", {})]),
    ("ALTER TABLE z MODIFY c CHAR(5) CHARACTER SET utf8mb4, DEFAULT CHARSET utf8mb4, ADD w VARCHAR(3)",
     [("z", "alter", {})]),
    ("CREATE TABLE skipped (id INT PRIMARY KEY)", []),  # excluded by the filters
    ("TRUNCATE TABLE skipped", []),
    ("CREATE DATABASE ts2 CHARACTER SET latin1", []),
    ("CREATE TABLE ts2.a (id INT PRIMARY KEY, v VARCHAR(3))", [("ts2.a", "create", {})]),
    ("CREATE TABLE ts2.b (id INT PRIMARY KEY)", [("ts2.b", "create", {})]),
    ("DROP DATABASE ts2", [("ts2.a", "drop", {}), ("ts2.b", "drop", {})]),
    ("DROP TABLE tr, k3", [("tr", "drop", {}), ("k3", "drop", {})]),
    ("CREATE TABLE cs SELECT 1 AS a", [("cs", "create", {})]),  # logged as a CREATE TABLE of its columns
    # FULL only (elsewhere the daemon stops on them: schema.on_unparsed_ddl): the history cannot follow them, a
    # warning; the table's entries have no columns until a CREATE TABLE defines it again
    ("ALTER TABLE cs ADD SYSTEM VERSIONING", [("cs", "alter", {"_full": True, "_columns": False})]),
    ("ALTER TABLE cs DROP SYSTEM VERSIONING", [("cs", "alter", {"_full": True, "_columns": False})]),
    ("TRUNCATE TABLE cs", [("cs", "truncate", {"_full": True, "_columns": False})]),
    ("CREATE OR REPLACE TABLE cs (a INT PRIMARY KEY)", [("cs", "drop", {}), ("cs", "create", {})]),
]


def _name(table: str) -> tuple[str, str]:
    db, _, name = table.rpartition(".")
    return (db or DB, name)


def _described(conn: Any, table: tuple[str, str], collations: dict[str, int]) -> tuple[list[dict], Any]:
    """A table's columns and key as the snapshot's reader describes them from information_schema."""
    tm = table_reader(conn, *table, collations, mariadb=True).table_map
    return [{f: getattr(c, f) for f in COLUMN_FIELDS} for c in tm.columns], [list(k) for k in tm.primary_key or ()]


def _table_maps(server: Any) -> list[tuple[Sequence, TableMap]]:
    """Every TABLE_MAP of the server's binlog files, with where it is."""
    server.flush_logs()
    out = []
    for path in server.binlog_files():
        data = path.read_bytes()
        dec = BinlogDecoder(str(path))
        pos = 4
        while pos < len(data):
            size = int.from_bytes(data[pos + 9 : pos + 13], "little")
            ev = dec.decode(data[pos : pos + size], pos)
            if isinstance(ev, E.TableMapEvent):
                out.append((Sequence(file_number(path.name), pos), ev.table_map))
            pos += size
    return out


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL", "NO_LOG"])
def test_statements_of_each_kind_reach_their_tables_topics(make_mariadb, kafka, monkeypatch, capsys, metadata) -> None:
    server = make_mariadb(binlog_row_metadata=metadata)
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    conn = server.connect(DB)
    with conn.cursor() as cur:
        cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
        collations = {name: int(cid) for name, cid in cur.fetchall()}
    monkeypatch.setenv("BINLAKE_FILTERS_INCLUDE", INCLUDE)
    monkeypatch.setenv("BINLAKE_FILTERS_EXCLUDE", EXCLUDE)
    prefix = f"bts{metadata.lower()}"
    run_daemon(server, kafka, prefix)  # the schema history captured here (FULL: streaming from the binlog's start)
    # (table, op, fields, its description after, whether the next TABLE_MAP has it)
    expected: list[tuple[str, str, dict[str, Any], Any, bool]] = []
    for sql, entries in STEPS:
        if any(given.get("_full") for _, _, given in entries or ()) and metadata != "FULL":
            continue
        before = {t: _described(conn, _name(t), collations) for _, _, given in entries or ()
                  for t in [given.get("_before")] if t}
        with conn.cursor() as cur:
            cur.execute(sql)
            for table, op, given in entries or ():
                name, fields = _name(table), dict(given)
                fields.pop("_full", None)
                kept = op != "drop" and not (op == "rename" and "to" in fields) and fields.pop("_columns", True)
                described = _name(fields.pop("_as", table))
                if "_before" in fields:
                    expected.append((f"{name[0]}.{name[1]}", op, fields, before[fields.pop("_before")], False))
                    continue
                expected.append((f"{name[0]}.{name[1]}", op, fields, _described(conn, described, collations) if kept
                                 else None, described == name))
                if described == name and op != "drop" and "to" not in fields:  # a rows event: the TABLE_MAP after it
                    if not cur.execute(f"INSERT IGNORE INTO `{name[0]}`.`{name[1]}` () VALUES ()"):
                        cur.execute(f"DELETE FROM `{name[0]}`.`{name[1]}` LIMIT 1")
    run_daemon(server, kafka, prefix)

    items = list(committed_record_events(kafka.bootstrap, prefix))
    # in sequence order (a step's entries of several topics: "to" before "from")
    entries = sorted(((item, item.event.statement) for item in items if isinstance(item.event, TableStatementEvent)),
                     key=lambda x: (x[0].seq, x[1].source is not None))
    got = [(f"{s.database}.{s.table}", s.op) for _, s in entries]
    assert got == [(table, op) for table, op, _, _, _ in expected], "\n".join(map(str, got))
    maps = _table_maps(server) if metadata == "FULL" else []
    for (item, statement), (table, op, fields, described, mapped) in zip(entries, expected, strict=True):
        where = f"{table} {op}: {statement.statement[:70]}"
        for key, value in fields.items():
            assert getattr(statement, key) == value, where
        assert statement.mariadb and statement.default_database in (DB, "ts2")  # DROP DATABASE: its own
        if described is None:
            assert statement.columns is None, where
            continue
        columns, key = described
        assert statement.columns is not None, where
        assert [{f: c[f] for f in COLUMN_FIELDS} for c in statement.columns] == columns, where
        assert (statement.primary_key or []) == key, where
        if maps and mapped:  # the next TABLE_MAP the server wrote for the table (but hidden columns)
            tm = next(tm for seq, tm in maps if seq > item.seq and (tm.database, tm.table) == _name(table))
            server_columns = [{f: getattr(c, f) for f in COLUMN_FIELDS} for c in tm.columns[: len(columns)]]
            assert [{f: c[f] for f in COLUMN_FIELDS} for c in statement.columns] == server_columns, where
            assert (statement.primary_key or []) == [list(k) for k in tm.primary_key or ()], where
    _rows_around_statements(items)
    defaults = {c["name"]: c.get("default", c.get("default_expression"))
                for c in next(s for _, s in entries if s.op == "alter" and s.table == "u").columns or ()}
    assert defaults == {"id": None, "a": None, "g": "2024-01-02 03:04:05.678", "h": "CURRENT_TIMESTAMP(6)"}
    # `binlake consume`'s JSON lines: the entries, as "table_statement"
    capsys.readouterr()
    assert main(["consume", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--from-beginning",
                 "--exit-at-end"]) == 0
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((f"{x['database']}.{x['table']}", x["op"]) for x in lines if x["type"] == "table_statement") == \
        sorted(got)


def _rows_around_statements(items: list[RecordEvent]) -> None:
    """In each table's topic, the rows written before a statement come before its entry, those after it after."""
    topics: dict[tuple[str, str], list[RecordEvent]] = {}
    for item in items:
        ev = item.event
        if isinstance(ev, TableStatementEvent):
            topics.setdefault((ev.statement.database, ev.statement.table), []).append(item)
        elif isinstance(ev, E.RowsEvent):
            topics.setdefault((ev.table_map.database, ev.table_map.table), []).append(item)
    kinds = [[r["after"]["id"] for r in i.event.rows] if isinstance(i.event, E.RowsEvent) else i.event.statement.op
             for i in topics[(DB, "tr")]]
    assert kinds == ["create", [0], [1, 2], "truncate", [0], [3], "drop"], kinds
    for seqs in topics.values():
        assert [i.seq for i in seqs] == sorted(i.seq for i in seqs)
