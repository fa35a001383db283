"""Table statement entries as the record builder makes them (records/table_statements.py, docs/FORMAT.md "Table
statements"): in the affected tables' own topics, at the statement's sequence, between the table's earlier and
later rows; for the parser's operations (TRUNCATE, partitions, CREATE OR REPLACE, RENAME swaps, DROP DATABASE) with
and without a schema history. The server cross-check is tests/integration/test_table_statements.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ingester.codec import BinlogDecoder
from ingester.codec import events as E
from ingester.records.builder import Record, RecordBuilder
from ingester.records.format import RecordEvent, Sequence, record_events
from ingester.records.statement import TableStatement, TableStatementEvent
from ingester.schema.ddl import parse_ddl
from ingester.schema.ddl_operations import Partition, TruncateTable
from ingester.schema.history import SchemaHistory
from ingester.sources.binlog_file import binlog_frames
from tests.harness.binlogs import statement_binlog

T_COLUMNS = "(id INT NOT NULL PRIMARY KEY, name VARCHAR(20))"  # name_table_map's table


def _records(path: Path, history: SchemaHistory | None = None, accept: Any = None) -> list[Record]:
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(accept=accept or (lambda db, t: db == "db"), file="mysql-bin.000001", schema=history)
    out: list[Record] = []
    for pos, raw in binlog_frames(path, dec):
        out += builder.feed(dec, raw, pos)
        builder.checkpoint()
    return out + builder.flush()


def _topic(records: list[Record], topic: str) -> list[RecordEvent]:
    return [item for r in records if r.topic == topic
            for item in record_events(dict(r.headers), r.value, f"{r.topic}@{r.seq}")]


def _statements(records: list[Record]) -> list[tuple[str, TableStatement]]:
    """Every entry, in sequence order (a step's entries: "to" before "from"): (topic, statement)."""
    items = sorted(((item.seq, r.topic, item.event.statement) for r in records if not r.topic.startswith("_")
                    for item in record_events(dict(r.headers), r.value)
                    if isinstance(item.event, TableStatementEvent)),
                   key=lambda x: (x[0], x[2].source is not None))  # a step's "to" before its "from"
    return [(topic, statement) for _, topic, statement in items]


def _history(*ddl: str) -> SchemaHistory:
    history = SchemaHistory(lambda db, t: db == "db")
    history.databases["db"] = "utf8mb4"
    for sql in ddl:
        history.apply("db", sql, "setup")
    return history


def test_parser_operations_of_truncate_partitions_and_create_or_replace() -> None:
    assert parse_ddl("TRUNCATE t", "d") == parse_ddl("truncate table `d`.`t` WAIT 2", "x") == [
        TruncateTable(("d", "t"))]
    [op] = parse_ddl("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE o.t2 WITHOUT VALIDATION", "d")
    assert op.partition == Partition("exchange", ["p0"], ("o", "t2")) and not op.specs
    assert [parse_ddl(f"ALTER TABLE t {clause}", "d")[0].partition for clause in (
        "TRUNCATE PARTITION p1, p2", "TRUNCATE PARTITION ALL", "DROP PARTITION IF EXISTS p0",
        "ADD PARTITION (PARTITION p3 VALUES LESS THAN (30), PARTITION p4 VALUES LESS THAN MAXVALUE)",
        "ADD PARTITION PARTITIONS 2", "REORGANIZE PARTITION a, b INTO (PARTITION c VALUES LESS THAN (9))",
        "COALESCE PARTITION 2", "REMOVE PARTITIONING", "REBUILD PARTITION p1", "PARTITION BY HASH (id) PARTITIONS 4",
        "CONVERT PARTITION p1 TO TABLE t9", "CONVERT TABLE t9 TO PARTITION p1 VALUES LESS THAN (5)",
        "ANALYZE PARTITION p1", "ALGORITHM=INPLACE, OPTIMIZE PARTITION ALL")] == [
        Partition("truncate", ["p1", "p2"]), Partition("truncate"), Partition("drop", ["p0"]),
        Partition("add", ["p3", "p4"]), Partition("add", count=2), Partition("reorganize", ["a", "b"]),
        Partition("coalesce", count=2), Partition("remove"), Partition("rebuild", ["p1"]), Partition("repartition"),
        Partition("convert_to_table", ["p1"], ("d", "t9")), Partition("convert_from_table", ["p1"], ("d", "t9")),
        None, None]
    [op] = parse_ddl("CREATE OR REPLACE TABLE t (a INT)", "d")
    assert op.replace and op.name == ("d", "t")
    # the history: partitions and TRUNCATE change no columns; a converted partition is a table of its own
    h = _history(f"CREATE TABLE t {T_COLUMNS}")
    assert h.apply("db", "TRUNCATE TABLE t", "f:1") == []
    assert h.apply("db", "ALTER TABLE t TRUNCATE PARTITION p0, p1", "f:2") == [("db", "t")]
    assert h.apply("db", "ALTER TABLE t CONVERT PARTITION p0 TO TABLE t0", "f:3") == [("db", "t"), ("db", "t0")]
    assert [c.name for c in h.tables[("db", "t0")].columns] == ["id", "name"]
    assert h.apply("db", "ALTER TABLE t CONVERT TABLE t0 TO PARTITION p0 VALUES LESS THAN (9)", "f:4") == [
        ("db", "t"), ("db", "t0")] and ("db", "t0") not in h.tables


@pytest.mark.parametrize("history", [False, True])
def test_rows_statement_rows_of_one_batch_decode_in_order(tmp_path, history) -> None:
    """INSERT, TRUNCATE, INSERT with no commit between: the table's topic has the rows, the entry, the rows."""
    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("rows", (b"t", [1, 2])), ("rows", (b"u", [7])), ("query", (b"db", b"TRUNCATE TABLE t")),
        ("rows", (b"t", [3])), ("query", (b"other", b"TRUNCATE TABLE other.x")),  # not captured: no entry
        ("query", (b"db", b"TRUNCATE TABLE u")), ("rows", (b"u", [8]))])
    records = _records(path, _history(f"CREATE TABLE t {T_COLUMNS}", f"CREATE TABLE u {T_COLUMNS}") if history
                       else None)
    items = _topic(records, "db.t")
    kinds = [type(i.event).__name__ for i in items]
    assert kinds == ["WriteRowsEvent", "TableStatementEvent", "WriteRowsEvent"]
    assert [i.seq for i in items] == sorted(i.seq for i in items)
    rows = [[r["after"]["id"] for r in i.event.rows] for i in items if isinstance(i.event, E.WriteRowsEvent)]
    assert rows == [[1, 2], [3]]
    truncate = items[1].event.statement
    assert (truncate.op, truncate.database, truncate.table, truncate.statement) == (
        "truncate", "db", "t", "TRUNCATE TABLE t")
    assert truncate.default_database == "db" and truncate.micros == 1_700_000_000_000_000
    # the statement's own sequence (the schema topic's record of it has the same)
    schema = [i for i in _topic(records, "_schema") if i.event.query == "TRUNCATE TABLE t"]
    assert [items[1].seq] == [i.seq for i in schema]
    if history:  # the table's columns as a TABLE_MAP has them
        assert [c["name"] for c in truncate.columns] == ["id", "name"] and truncate.primary_key == [[0, 0]]
        assert truncate.columns[1]["meta"] == 80 and truncate.columns[1]["collation"] == 45  # VARCHAR(20) utf8mb4
    else:
        assert truncate.columns is None
    assert [type(i.event).__name__ for i in _topic(records, "db.u")] == [
        "WriteRowsEvent", "TableStatementEvent", "WriteRowsEvent"]
    assert all(t.startswith(("db.", "_")) for t in {r.topic for r in records})


@pytest.mark.parametrize("history", [False, True])
def test_rename_swaps_apply_pair_by_pair(tmp_path, history) -> None:
    """gh-ost's and pt-osc's swap: each pair gives a "to" entry in the old name's topic and a "from" entry in the
    new name's, numbered in the order the server applies them."""
    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("rows", (b"a", [1])), ("query", (b"db", b"RENAME TABLE a TO tmp, b TO a, tmp TO b")),
        ("query", (b"db", b"RENAME TABLE db.a TO other.a")), ("query", (b"db", b"ALTER TABLE b RENAME TO c")),
        ("query", (b"db", b"RENAME TABLE other.z TO db.z, db.view TO db.view2"))])
    h = _history(f"CREATE TABLE a {T_COLUMNS}", "CREATE TABLE b (k INT PRIMARY KEY)") if history else None
    records = _records(path, h)
    got = [(topic, s.op, s.to, s.source) for topic, s in _statements(records)]
    assert got == [
        ("db.a", "rename", ("db", "tmp"), None), ("db.tmp", "rename", None, ("db", "a")),
        ("db.b", "rename", ("db", "a"), None), ("db.a", "rename", None, ("db", "b")),
        ("db.tmp", "rename", ("db", "b"), None), ("db.b", "rename", None, ("db", "tmp")),
        ("db.a", "rename", ("other", "a"), None),  # other.a is not captured: no entry of its own
        ("db.b", "rename", ("db", "c"), None), ("db.c", "rename", None, ("db", "b")),
        # a table the filters left out arrives (rows the lake never saw); a view is no table (with a history)
        ("db.z", "rename", None, ("other", "z")),
        *([] if history else [("db.view", "rename", ("db", "view2"), None), ("db.view2", "rename", None,
                                                                              ("db", "view"))])]
    seqs = sorted({item.seq for r in records if r.topic.startswith("db.")
                   for item in record_events(dict(r.headers), r.value)
                   if isinstance(item.event, TableStatementEvent)
                   and "RENAME TABLE a TO" in item.event.statement.statement})
    assert [s.sub for s in seqs] == [0, 1, 2] and len({(s.file_number, s.position) for s in seqs}) == 1
    entries = _statements(records)
    if history:  # the new name's entry has the table's columns: a's are b's now
        assert [c["name"] for c in entries[3][1].columns or ()] == ["k"]
        assert [c["name"] for c in entries[1][1].columns or ()] == ["id", "name"]
    # a topic's entries of one statement are one record of their own, after the table's earlier rows
    a_records = [r for r in records if r.topic == "db.a"]
    assert [len(list(record_events(dict(r.headers), r.value))) for r in a_records] == [1, 2, 1]


def test_drop_database_create_or_replace_and_alter(tmp_path) -> None:
    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("rows", (b"t", [1])),
        ("query", (b"db", b"ALTER TABLE t ADD COLUMN g DATETIME(3) DEFAULT '2024-01-02 03:04:05.678'")),
        ("query", (b"db", b"ALTER TABLE t ADD INDEX ix (name), COMMENT 'c'")),  # neither columns nor key: none
        ("query", (b"db", b"ALTER TABLE u ADD UNIQUE INDEX uk (k)")),  # u's key (k NOT NULL): an entry
        ("query", (b"db", b"ALTER TABLE t CHANGE name nm VARCHAR(20), RENAME COLUMN g TO g2")),
        ("query", (b"db", b"CREATE OR REPLACE TABLE u (z INT)")),
        ("query", (b"db", b"CREATE TABLE IF NOT EXISTS t (x INT)")),  # there already: none
        ("query", (b"db", b"ALTER TABLE t TRUNCATE PARTITION p0")),
        ("query", (b"db", b"DROP DATABASE db"))])
    h = _history(f"CREATE TABLE t {T_COLUMNS}", "CREATE TABLE u (k INT NOT NULL)", "CREATE TABLE v (a INT)")
    entries = _statements(_records(path, h))
    assert [(topic, s.op) for topic, s in entries] == [
        ("db.t", "alter"), ("db.u", "alter"), ("db.t", "alter"), ("db.u", "drop"), ("db.u", "create"),
        ("db.t", "partition"), ("db.t", "drop"), ("db.u", "drop"), ("db.v", "drop")]
    added = entries[0][1]
    assert [c["name"] for c in added.columns or ()] == ["id", "name", "g"]
    assert added.columns[2]["default"] == "2024-01-02 03:04:05.678" and added.columns[2]["meta"] == 3  # type: ignore
    assert entries[1][1].primary_key == [[0, 0]]  # the UNIQUE index of NOT NULL k: the key
    assert entries[2][1].renamed == {"nm": "name", "g2": "g"}
    assert [c["name"] for c in entries[4][1].columns or ()] == ["z"]
    assert entries[5][1].partition == {"action": "truncate", "names": ["p0"]}
    # without a history: DROP DATABASE drops the tables the stream mapped or gave entries; alter entries without
    # columns (for an index, a comment: where a UNIQUE index may make a key)
    entries = _statements(_records(path))
    assert [(topic, s.op) for topic, s in entries] == [
        ("db.t", "alter"), ("db.u", "alter"), ("db.t", "alter"), ("db.u", "drop"), ("db.u", "create"),
        ("db.t", "partition"), ("db.t", "drop"), ("db.u", "drop")]
    assert all(s.columns is None for _, s in entries)


def test_excluded_tables_and_other_statements_give_no_entry(tmp_path) -> None:
    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("query", (b"db", b"CREATE TABLE x (a INT)")), ("query", (b"db", b"TRUNCATE x")),
        ("query", (b"db", b"ANALYZE TABLE t")), ("query", (b"db", b"CREATE VIEW w AS SELECT 1")),
        ("query", (b"db", b"GRANT SELECT ON db.* TO u")), ("query", (b"db", b"ALTER TABLE t COMMENT 'x'")),
        ("query", (b"db", b"RENAME TABLE x TO y")), ("query", (b"db", b"DROP TABLE x, y"))])
    records = _records(path, _history(f"CREATE TABLE t {T_COLUMNS}"), accept=lambda db, t: t == "t")
    assert _statements(records) == []
    assert all(r.topic.startswith("_") for r in records)


def test_a_history_captured_after_a_statement_does_not_apply_it_again(tmp_path) -> None:
    """A stream that starts before the history's capture (a FULL server's first start): the statements before it
    are in the captured columns already, and their entries come without columns."""
    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("query", (b"db", b"ALTER TABLE t ADD COLUMN x INT")), ("query", (b"db", b"ALTER TABLE t ADD COLUMN y INT"))])
    h = _history("CREATE TABLE t (id INT NOT NULL PRIMARY KEY, name VARCHAR(20), x INT)")
    positions = [pos for pos, _ in binlog_frames(path, BinlogDecoder(str(path)))]
    h.valid_from = Sequence(0, positions[-1]).encode()  # captured just before the second ALTER (no ROTATE: file 0)
    entries = _statements(_records(path, h))
    assert [s.columns is None for _, s in entries] == [True, False]
    assert [c["name"] for c in entries[1][1].columns or ()] == ["id", "name", "x", "y"]


@pytest.mark.parametrize("avro", [False, True])
def test_debezium_formats_publish_truncates_unless_skipped(tmp_path, avro) -> None:
    """A truncate entry is Debezium's truncate change event (op "t", no key, no images) in the table's schema: its
    change events' before it, the entry's own columns where none came yet; other entries are no change events."""
    from ingester.records.debezium.encoder import DebeziumAvro, DebeziumJson, DebeziumOptions
    from tests.harness.avro import Registry

    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("query", (b"db", b"TRUNCATE TABLE u")), ("rows", (b"u", [1])),  # u's schema from the entry, then its rows'
        ("rows", (b"t", [1])), ("query", (b"db", b"TRUNCATE TABLE t")),
        ("query", (b"db", b"ALTER TABLE t COMMENT 'x'")), ("rows", (b"t", [2]))])
    records = _records(path, _history(f"CREATE TABLE t {T_COLUMNS}", f"CREATE TABLE u {T_COLUMNS}"))
    registry = Registry()

    def encoder(skipped: frozenset[str]) -> Any:
        options = DebeziumOptions("p", skipped=skipped)
        return DebeziumAvro(options, registry, lambda n: "mysql-bin.000001", 900_000) if avro else \
            DebeziumJson(options, lambda n: "mysql-bin.000001", 900_000)

    def payloads(skipped: frozenset[str]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        enc = encoder(skipped)
        for m in [m for r in records for m in enc.messages(r)] + list(enc.before_commit()):
            if m.topic.startswith("p.db.") and m.value is not None:
                value = registry.decode(m.value) if avro else orjson.loads(m.value)
                out.setdefault(m.topic, []).append((m.key, value if avro else value["payload"],
                                                    None if avro else value["schema"]))
        return out

    events = payloads(frozenset())
    assert [v["op"] for _, v, _ in events["p.db.t"]] == ["c", "t", "c"]
    assert [v["op"] for _, v, _ in events["p.db.u"]] == ["t", "c"]
    for key, value, schema in (events["p.db.t"][1], events["p.db.u"][0]):
        assert key is None and value["before"] is None and value["after"] is None
        source = value["source"]
        assert (source["table"], source["row"], source["snapshot"], source["query"]) in (
            ("t", 0, "false", None), ("u", 0, "false", None))
        assert schema == events[f"p.db.{source['table']}"][-1][2]  # the table's schema, as its rows events have it
    skipping = payloads(frozenset(("t",)))
    assert [v["op"] for _, v, _ in skipping["p.db.t"]] == ["c", "c"]
    assert [v["op"] for _, v, _ in skipping["p.db.u"]] == ["c"]


def test_a_resnapshot_chunk_with_a_statement_in_its_window_is_read_again(tmp_path) -> None:
    """Rows a chunk read between its watermarks may be from before a TRUNCATE (or an ALTER) in that window, or after:
    the chunk is read again, its progress where it was."""
    from ingester.config import Config
    from ingester.daemon.resnapshot import Resnapshotter, _Chunk
    from ingester.daemon.table_reader import TableReader

    path = statement_binlog(tmp_path / "mysql-bin.000001", [("rows", (b"t", [5])), ("query", (b"db", b"TRUNCATE t"))])
    records = [r for r in _records(path) if r.topic == "db.t"]
    cfg = Config()
    cfg.snapshot_signal_table = "db.sig"
    resnap = Resnapshotter(cfg)
    resnap.state = {"tables": ["db.t"], "last_pk": None, "rows": 0}
    tm = next(i.event.table_map for i in _topic(records, "db.t") if isinstance(i.event, E.RowsEvent))
    reader = TableReader("db.t", tm, [], [], [], [0], b"")
    for statement in (False, True):
        resnap.chunk = chunk = _Chunk(reader, "high", {(1,): [1, "a"], (5,): [5, "b"]}, None)
        for record in records if statement else records[:1]:
            assert not resnap.takes(record)
        chunk.high = (Sequence(0, 10**6), 0)
        assert (chunk.void is not None) == statement
        published = resnap.before_commit()
        assert resnap.chunk is None
        if statement:  # nothing published, the table's progress unchanged: the next chunk reads it again
            assert published == [] and resnap.state["tables"] == ["db.t"] and resnap.state["rows"] == 0
        else:  # row 5 changed in the window: its change is published, the chunk's other row read
            assert resnap.state["rows"] == 1 and resnap.state["tables"] == []
            resnap.state = {"tables": ["db.t"], "last_pk": None, "rows": 0}


def test_masked_columns_have_no_default_in_entries(tmp_path) -> None:
    """filters.columns: the default of a column whose values are masked is not published either."""
    from ingester.column_rules import ColumnRules

    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("query", (b"db", b"ALTER TABLE t ADD COLUMN ssn VARCHAR(11) DEFAULT '123-45-6789', ADD n INT DEFAULT 3"))])
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(accept=lambda db, t: db == "db", file="mysql-bin.000001",
                            schema=_history(f"CREATE TABLE t {T_COLUMNS}"), masks=ColumnRules({"db.t.ssn": "mask"}))
    records = [r for pos, raw in binlog_frames(path, dec) for r in builder.feed(dec, raw, pos)] + builder.flush()
    [(_, alter)] = _statements(records)
    assert {c["name"]: c.get("default") for c in alter.columns or ()} == {"id": None, "name": None, "ssn": None,
                                                                          "n": "3"}


def test_columns_follow_collations_as_the_server_names_them() -> None:
    """A column's collation: COLLATE's, its charset's default (the server's table of collations), the table's, the
    database's, BINARY's _bin; CONVERT TO and DEFAULT CHARSET; described by id as a FULL TABLE_MAP has it."""
    from ingester.schema.collations import Collations
    from ingester.schema.table_columns import history_columns

    h = _history()
    h.collations = Collations([("utf8mb4_general_ci", "utf8mb4", 45, True), ("utf8mb4_bin", "utf8mb4", 46, False),
                               ("utf8mb4_uca1400_ai_ci", "utf8mb4", 2304, False), ("latin1_swedish_ci", "latin1", 8,
                                                                                   True),
                               ("latin1_bin", "latin1", 47, False), ("utf8mb3_general_ci", "utf8mb3", 33, True)])
    h.collations.defaults["utf8mb4"] = 2304  # character_set_collations
    h.apply("db", "CREATE TABLE c (a VARCHAR(2), b VARCHAR(2) COLLATE utf8mb4_bin, c CHAR(1) BINARY,"
                  " d VARCHAR(2) CHARACTER SET latin1, e ENUM('x'), f NCHAR(1), g VARBINARY(2), j JSON)"
                  " COLLATE latin1_bin", "f:1")

    def collations() -> list[int | None]:
        described = history_columns(h.tables[("db", "c")], True, h.collations)
        assert described is not None
        return [c["collation"] for c in described[0]]

    assert collations() == [47, 46, 47, 8, 47, 33, 63, 46]
    h.apply("db", "ALTER TABLE c ADD z VARCHAR(1), DEFAULT CHARSET utf8mb4", "f:2")
    assert collations()[-1] == 2304  # the table's new default: utf8mb4's default collation here
    h.apply("db", "ALTER TABLE c CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "f:3")
    assert collations() == [46, 46, 46, 46, 46, 46, 63, 46, 46]


def test_partition_maintenance_that_moves_rows_is_followed_by_a_reload_where_the_daemon_reads_again(tmp_path) -> None:
    """TRUNCATE/DROP/EXCHANGE PARTITION remove or move rows the binlog does not name: where the daemon reads the
    table again (``reload``: its re-snapshotter, RecordBuilder.reload), a reload entry follows the statement's
    entries, after them in sequence, and the partition entry says so; REORGANIZE moves no row; a table the daemon
    cannot read again gets no reload entry."""
    path = statement_binlog(tmp_path / "mysql-bin.000001", [
        ("query", (b"db", b"ALTER TABLE t TRUNCATE PARTITION p0")),
        ("query", (b"db", b"ALTER TABLE t REORGANIZE PARTITION p1 INTO (PARTITION p1 VALUES LESS THAN (9))")),
        ("query", (b"db", b"ALTER TABLE t EXCHANGE PARTITION p2 WITH TABLE u")),
        ("query", (b"db", b"ALTER TABLE u DROP PARTITION p3"))])
    h = _history(f"CREATE TABLE t {T_COLUMNS}", "CREATE TABLE u (k INT NOT NULL PRIMARY KEY)")
    asked: list[tuple[str, str]] = []

    def reload(db: str, table: str) -> bool:
        asked.append((db, table))
        return table == "t"

    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(accept=lambda db, t: db == "db", file="mysql-bin.000001", schema=h, reload=reload)
    records: list[Record] = []
    for pos, raw in binlog_frames(path, dec):
        records += builder.feed(dec, raw, pos)
        builder.checkpoint()
    items = sorted((item.seq, r.topic, item.event.statement) for r in records + builder.flush()
                   if not r.topic.startswith("_") for item in record_events(dict(r.headers), r.value))
    said = [(topic, s.op, (s.partition or {}).get("action"), (s.partition or {}).get("reload"))
            for _, topic, s in items]
    assert said == [("db.t", "partition", "truncate", True), ("db.t", "reload", None, None),
            ("db.t", "partition", "reorganize", None),
            ("db.t", "partition", "exchange", True), ("db.u", "partition", "exchange", None),
            ("db.t", "reload", None, None),
            ("db.u", "partition", "drop", None)]
    assert asked == [("db", "t"), ("db", "t"), ("db", "u"), ("db", "u")]
    first, reloaded = items[0], items[1]
    assert reloaded[0] == Sequence(first[0].file_number, first[0].position, first[0].sub + 1)
    assert reloaded[2].statement == first[2].statement and reloaded[2].columns == first[2].columns
