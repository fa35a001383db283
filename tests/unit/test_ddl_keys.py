"""A table's key where it has no PRIMARY KEY: the UNIQUE index of NOT NULL columns the server uses in its
place, as the DDL parser and the schema history follow it (the server cross-check: after every statement of
tests/integration/test_table_keys.py, the history's indexes equal information_schema's and its key equals the
one the server's FULL TABLE_MAP names)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingester.codec.constants import ColumnType as T
from ingester.codec.table_map import Column, TableMap
from ingester.schema.capture import capture
from ingester.schema.ddl import parse_ddl
from ingester.schema.ddl_operations import AddIndex, AlterTable, CreateTable, DropIndex, DropPrimaryKey
from ingester.schema.history import SchemaError, SchemaHistory, enrich
from ingester.schema.table_schema import Index


def _history(*statements: str) -> SchemaHistory:
    h = SchemaHistory(lambda db, t: db == "d")
    for sql in statements:
        h.apply("d", sql, "f:1")
    return h


def _indexes(h: SchemaHistory, table: str = "t") -> list[tuple[str, list[str], bool]]:
    return [(i.name, [c for c, _ in i.columns], i.unique) for i in h.tables[("d", table)].indexes]


def _key(h: SchemaHistory, table: str = "t", mariadb: bool = True) -> list[str]:
    return h.tables[("d", table)].key(mariadb=mariadb)


def test_create_table_declares_unique_indexes_every_way_and_names_them_as_the_server_does() -> None:
    [op] = parse_ddl("CREATE TABLE t (x INT NOT NULL UNIQUE, y INT NOT NULL UNIQUE KEY, z INT, s SERIAL,"
                     " UNIQUE (x), UNIQUE KEY uy USING BTREE (y, z) COMMENT 'c', CONSTRAINT cs UNIQUE (y),"
                     " CONSTRAINT c2 UNIQUE INDEX kk (z(3) DESC), KEY (z), INDEX iz (z), FULLTEXT f (z),"
                     " UNIQUE uh (z) USING HASH, CONSTRAINT ck CHECK (x > 0))", "d")
    assert isinstance(op, CreateTable)
    assert [(i.name, i.columns, i.unique, i.hash, i.fulltext) for i in op.schema.indexes] == [
        ("", [("x", 0)], True, False, False), ("", [("y", 0)], True, False, False),
        ("", [("s", 0)], True, False, False), ("", [("x", 0)], True, False, False),
        ("uy", [("y", 0), ("z", 0)], True, False, False),
        ("cs", [("y", 0)], True, False, False), ("kk", [("z", 3)], True, False, False),
        ("", [("z", 0)], False, False, False), ("iz", [("z", 0)], False, False, False),
        ("f", [("z", 0)], False, False, True), ("uh", [("z", 0)], True, True, False)]
    assert [c.not_null for c in op.schema.columns] == [True, True, False, True]  # SERIAL: NOT NULL UNIQUE
    h = _history(
        "CREATE TABLE t (x INT NOT NULL UNIQUE, y INT NOT NULL UNIQUE KEY, z INT, s SERIAL, UNIQUE (x),"
        " UNIQUE KEY uy USING BTREE (y, z) COMMENT 'c', CONSTRAINT cs UNIQUE (y), CONSTRAINT c2 UNIQUE INDEX kk"
        " (z(3) DESC), KEY (z), INDEX iz (z), FULLTEXT f (z), UNIQUE uh (z) USING HASH)")
    # named after their first column (x, x_2), a CONSTRAINT's symbol unless the index has a name; in the
    # server's order: UNIQUE of NOT NULL columns, UNIQUE with a nullable column, long UNIQUE (a hash) last
    # of the UNIQUE ones; then the others, FULLTEXT last
    assert _indexes(h) == [("x", ["x"], True), ("y", ["y"], True), ("s", ["s"], True), ("x_2", ["x"], True),
                           ("cs", ["y"], True), ("uy", ["y", "z"], True), ("kk", ["z"], True),
                           ("uh", ["z"], True), ("z", ["z"], False), ("iz", ["z"], False), ("f", ["z"], False)]
    assert _key(h) == ["x"]
    # a PRIMARY KEY beats every UNIQUE index, and makes its columns NOT NULL
    h = _history("CREATE TABLE t (a INT, b INT NOT NULL UNIQUE, PRIMARY KEY (a))")
    assert _key(h) == ["a"] and h.tables[("d", "t")].columns[0].not_null


@pytest.mark.parametrize(("ddl", "key"), [
    ("CREATE TABLE t (a INT, b INT NOT NULL, UNIQUE (a), UNIQUE (b))", ["b"]),  # a nullable: sorted after b
    ("CREATE TABLE t (a INT, UNIQUE (a))", []),  # NULLs are not unique
    ("CREATE TABLE t (a VARCHAR(10) NOT NULL, UNIQUE (a(5)))", []),  # a prefix
    ("CREATE TABLE t (a VARCHAR(10) NOT NULL, UNIQUE (a(10)))", ["a"]),  # a prefix as long as the column: none
    ("CREATE TABLE t (a TEXT NOT NULL, b INT NOT NULL, UNIQUE (a), UNIQUE (b))", ["b"]),  # a long UNIQUE: last
    ("CREATE TABLE t (a INT NOT NULL, UNIQUE (a) USING HASH)", []),
    ("CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, UNIQUE ((a + b)))", []),  # MySQL's functional key part
    ("CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, UNIQUE KEY (b, a), KEY (a))", ["b", "a"]),
    ("CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, c INT NOT NULL, KEY (c), UNIQUE u (b, a))", ["b", "a"]),
])
def test_the_key_is_the_first_unique_index_of_not_null_whole_columns(ddl: str, key: list[str]) -> None:
    assert _key(_history(ddl)) == key


def test_alter_table_adds_drops_and_renames_unique_indexes() -> None:
    h = _history("CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, c INT)")
    assert _key(h) == []
    h.apply("d", "ALTER TABLE t ADD UNIQUE INDEX IF NOT EXISTS ub (b)", "f:2")
    assert _key(h) == ["b"]
    h.apply("d", "ALTER TABLE t ADD CONSTRAINT ca UNIQUE KEY (a), ADD UNIQUE ub (c)", "f:3")  # ub exists: replaced
    assert _indexes(h) == [("ca", ["a"], True), ("ub", ["c"], True)] and _key(h) == ["a"]
    h.apply("d", "ALTER TABLE t RENAME INDEX ca TO ka, RENAME KEY ub TO uc", "f:4")
    assert _indexes(h) == [("ka", ["a"], True), ("uc", ["c"], True)]
    h.apply("d", "ALTER TABLE t DROP INDEX ka", "f:5")
    assert _key(h) == []  # uc's column is nullable
    h.apply("d", "ALTER TABLE t MODIFY c INT NOT NULL", "f:6")
    assert _key(h) == ["c"]
    h.apply("d", "ALTER TABLE t CHANGE c c2 BIGINT NOT NULL, RENAME COLUMN a TO a2", "f:7")  # renamed in indexes
    assert _indexes(h) == [("uc", ["c2"], True)] and _key(h) == ["c2"]
    h.apply("d", "ALTER TABLE t MODIFY c2 BIGINT NULL", "f:8")  # nullable again: no key
    assert _key(h) == []
    h.apply("d", "ALTER TABLE t ADD COLUMN u INT NOT NULL UNIQUE FIRST, ADD (v INT UNIQUE)", "f:9")
    assert _indexes(h) == [("u", ["u"], True), ("uc", ["c2"], True), ("v", ["v"], True)] and _key(h) == ["u"]
    h.apply("d", "ALTER TABLE t DROP CONSTRAINT u, DROP KEY IF EXISTS nothere", "f:10")
    assert _indexes(h) == [("uc", ["c2"], True), ("v", ["v"], True)]
    h.apply("d", "ALTER TABLE t MODIFY b INT NOT NULL UNIQUE", "f:11")  # a column's UNIQUE in MODIFY
    assert _indexes(h)[0] == ("b", ["b"], True) and _key(h) == ["b"]
    h.apply("d", "ALTER TABLE t DROP COLUMN b", "f:12")  # its index goes with it
    assert ("b", ["b"], True) not in _indexes(h) and _key(h) == []
    h.apply("d", "ALTER TABLE t ADD PRIMARY KEY (v)", "f:13")  # v becomes NOT NULL
    assert _key(h) == ["v"]
    h.apply("d", "ALTER TABLE t DROP INDEX `PRIMARY`", "f:14")
    assert _key(h) == ["v"]  # its own UNIQUE index, NOT NULL now


def test_create_and_drop_index_statements() -> None:
    assert parse_ddl("CREATE UNIQUE INDEX IF NOT EXISTS u USING BTREE ON d.t (a(4), b DESC) ALGORITHM=INPLACE",
                     "x") == [AlterTable(("d", "t"), [AddIndex(Index("u", [("a", 4), ("b", 0)], True), True)])]
    assert parse_ddl("CREATE OR REPLACE INDEX u ON t (a) USING HASH WAIT 3", "d") == [
        AlterTable(("d", "t"), [DropIndex("u"), AddIndex(Index("u", [("a", 0)]))])]
    assert parse_ddl("DROP INDEX IF EXISTS `u` ON `t` ALGORITHM = INPLACE LOCK = NONE", "d") == [
        AlterTable(("d", "t"), [DropIndex("u")])]
    assert parse_ddl("DROP INDEX `PRIMARY` ON t", "d") == [AlterTable(("d", "t"), [DropPrimaryKey()])]
    h = _history("CREATE TABLE t (a INT NOT NULL, b INT NOT NULL)")
    assert h.apply("d", "CREATE UNIQUE INDEX ub ON t (b)", "f:2") == [("d", "t")] and _key(h) == ["b"]
    assert h.apply("d", "CREATE OR REPLACE INDEX ub ON t (b)", "f:3") == [("d", "t")] and _key(h) == []
    assert h.apply("d", "DROP INDEX ub ON t", "f:4") == [("d", "t")] and _indexes(h) == []
    assert h.apply("d", "CREATE INDEX i ON other.x (a)", "f:5") == []  # a table nobody captures
    with pytest.raises(SchemaError, match="column zz of index u does not exist"):
        h.apply("d", "CREATE UNIQUE INDEX u ON t (zz)", "f:6")


def test_the_server_sorts_indexes_again_only_when_a_statement_adds_one() -> None:
    """MariaDB keeps its indexes' order through ALTERs that add none, even when a column's nullability
    changes; its key is its first index, where MySQL's is the first that qualifies."""
    h = _history("CREATE TABLE t (a INT, b INT, UNIQUE ua (a), UNIQUE ub (b), KEY k (a))")
    h.apply("d", "ALTER TABLE t MODIFY b INT NOT NULL", "f:2")
    assert _indexes(h)[:2] == [("ua", ["a"], True), ("ub", ["b"], True)]
    assert _key(h) == [] and _key(h, mariadb=False) == ["b"]
    h.apply("d", "ALTER TABLE t DROP INDEX k, RENAME COLUMN a TO a2", "f:3")
    assert _indexes(h) == [("ua", ["a2"], True), ("ub", ["b"], True)]
    h.apply("d", "ALTER TABLE t ADD UNIQUE IF NOT EXISTS ua (a2)", "f:4")  # adds nothing: no new order
    assert _key(h) == []
    h.apply("d", "ALTER TABLE t ADD KEY k (a2)", "f:5")
    assert _indexes(h) == [("ub", ["b"], True), ("ua", ["a2"], True), ("k", ["a2"], False)] and _key(h) == ["b"]
    # CREATE TABLE LIKE creates the table anew: sorted
    h = _history("CREATE TABLE t (a INT, b INT, UNIQUE ua (a), UNIQUE ub (b))", "ALTER TABLE t MODIFY b INT NOT NULL",
                 "CREATE TABLE t2 LIKE t")
    assert _key(h) == [] and _key(h, "t2") == ["b"]


def test_a_foreign_keys_own_index_and_the_one_that_serves_it() -> None:
    h = _history("CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, c INT, CONSTRAINT fa FOREIGN KEY (a) REFERENCES p"
                 " (id) ON DELETE CASCADE, FOREIGN KEY fb (b) REFERENCES p (id), FOREIGN KEY (c) REFERENCES p (id),"
                 " KEY kc (c, a))")
    # named by the symbol, else the index name, else the column; none where another index begins with its columns
    assert _indexes(h) == [("fa", ["a"], False), ("fb", ["b"], False), ("kc", ["c", "a"], False)]
    h.apply("d", "ALTER TABLE t ADD UNIQUE ua (a, b)", "f:2")  # serves fa: fa goes
    assert _indexes(h) == [("ua", ["a", "b"], True), ("fb", ["b"], False), ("kc", ["c", "a"], False)]
    h.apply("d", "ALTER TABLE t DROP FOREIGN KEY fb, DROP CONSTRAINT fb", "f:3")  # a constraint's name: the index stays
    assert ("fb", ["b"], False) in _indexes(h)


def test_index_names_the_history_does_not_know_are_let_be(caplog) -> None:
    h = _history("CREATE TABLE t (a INT NOT NULL, UNIQUE ua (a))")
    with caplog.at_level(logging.WARNING):
        h.apply("d", "ALTER TABLE t DROP INDEX nothere, RENAME INDEX gone TO g", "f:2")
    assert "no index nothere to drop" in caplog.text and "no index gone to rename" in caplog.text
    assert _key(h) == ["a"]


def _map(types: list[int], nullable: list[bool], mariadb: bool = True) -> TableMap:
    return TableMap(5, 1, "d", "t", [Column(i, f"@{i + 1}", t, t, 0, n) for i, (t, n) in
                                     enumerate(zip(types, nullable, strict=True))], is_mariadb=mariadb)


def test_records_carry_the_key_and_the_table_map_says_which_columns_are_nullable() -> None:
    h = _history("CREATE TABLE t (id INT, a INT NOT NULL, b VARCHAR(4) NOT NULL, UNIQUE u (b, a))")
    tm = _map([T.LONG, T.LONG, T.VARCHAR], [True, False, False])
    entry = h.attachment(tm, "f:2")
    assert entry is not None
    assert orjson.loads(entry)["primary_key"] == [] and orjson.loads(entry)["key"] == [2, 1]
    assert enrich(tm, entry).primary_key == [(2, 0), (1, 0)]  # as a FULL server's TABLE_MAP names it
    # the server's word on nullability beats the history's
    h.apply("d", "ALTER TABLE t COMMENT 'x'", "f:3")
    assert orjson.loads(h.attachment(_map([T.LONG, T.LONG, T.VARCHAR], [True, True, False]), "f:4") or b"")[
        "key"] == []
    # entries of an older binlake have the primary key only
    old = orjson.loads(h.attachment(tm, "f:5") or b"")
    del old["key"]
    old["primary_key"] = [0]
    assert enrich(tm, orjson.dumps(old)).primary_key == [(0, 0)]


def test_history_entries_keep_indexes_and_nullability(caplog) -> None:
    h = _history("CREATE TABLE t (a INT NOT NULL, b INT, UNIQUE ua (a), KEY kb (b(3)))")
    entry = orjson.loads(h.entry(("d", "t"), "1", "x"))
    assert entry["indexes"] == [{"name": "ua", "columns": [["a", 0]], "unique": True, "hash": False,
                                 "fulltext": False}, {"name": "kb", "columns": [["b", 3]], "unique": False,
                                                      "hash": False, "fulltext": False}]
    assert [c["not_null"] for c in entry["columns"]] == [True, False]
    back = SchemaHistory(lambda db, t: True)
    back.load([h.entry(("d", "t"), "1", "x")])
    assert back.tables == h.tables and back.tables[("d", "t")].key() == ["a"]
    # entries of an older binlake: no indexes known, said once
    old = b'{"database":"d","table":"o","columns":[{"name":"v","type":"int","unsigned":false,' \
          b'"enum_values":null,"set_values":null,"charset":null}],"primary_key":[]}'
    with caplog.at_level(logging.WARNING):
        back.load([old])
    assert back.tables[("d", "o")].indexes == [] and "without their indexes (d.o)" in caplog.text


class _Cursor:
    """information_schema's answers to ``capture``'s two queries."""

    def __init__(self, columns: list[tuple], statistics: list[tuple]) -> None:
        self.answers = [columns, statistics]

    def execute(self, sql: str) -> None:
        self.rows = self.answers.pop(0)

    def fetchall(self) -> list[tuple]:
        return self.rows


def test_capture_reads_indexes_in_the_servers_order_the_key_first() -> None:
    version = "11.8.3-MariaDB"
    columns = [("d", "t", "a", "int(11)", None, "utf8mb4_general_ci", "NO", "PRI", None, "auto_increment", "", "tc",
                version, None),
               ("d", "t", "b", "int(11)", None, "utf8mb4_general_ci", "NO", "PRI", None, "", "", "tc", version, None),
               ("d", "t", "c", "varchar(9)", "utf8mb4", "utf8mb4_general_ci", "YES", "", "NULL", "", "cc", "tc",
                version, "utf8mb4_bin")]
    statistics = [("d", "t", "kc", 1, 1, "c", 3, "BTREE"), ("d", "t", "uc", 0, 1, "c", None, "BTREE"),
                  ("d", "t", "uab", 0, 2, "a", None, "BTREE"), ("d", "t", "uab", 0, 1, "b", None, "BTREE"),
                  ("d", "t", "h", 0, 1, "c", None, "HASH"), ("d", "t", "f", 1, 1, "c", None, "FULLTEXT"),
                  ("d", "x", "PRIMARY", 0, 1, "id", None, "BTREE")]
    [(name, schema)] = capture(_Cursor(columns, statistics), lambda db, t: t == "t").items()
    assert name == ("d", "t") and [c.not_null for c in schema.columns] == [True, True, False]
    # what Debezium's schema change events describe too (records/debezium/schema_change.py)
    assert [(c.args, c.auto_increment, c.comment) for c in schema.columns] == [
        ("11", True, None), ("11", False, None), ("9", False, "cc")] and schema.comment == "tc"
    # the index whose columns information_schema marks PRI (the server's key) first, parts by SEQ_IN_INDEX
    assert [(i.name, i.columns, i.unique, i.hash, i.fulltext) for i in schema.indexes] == [
        ("uab", [("b", 0), ("a", 0)], True, False, False), ("kc", [("c", 3)], False, False, False),
        ("uc", [("c", 0)], True, False, False), ("h", [("c", 0)], True, True, False),
        ("f", [("c", 0)], False, False, True)]
    assert schema.key() == ["b", "a"]
    assert [c.collation for c in schema.columns] == [None, None, "utf8mb4_bin"]  # COLLATION_NAME
    assert schema.collation == "utf8mb4_general_ci"


_WORDS = ["UNIQUE", "KEY", "INDEX", "PRIMARY", "CONSTRAINT", "FOREIGN", "REFERENCES", "USING", "HASH", "BTREE",
          "IF", "NOT", "EXISTS", "NULL", "DROP", "ADD", "RENAME", "TO", "ON", "MODIFY", "CHANGE", "COLUMN", "INT",
          "VARCHAR", "TEXT", "SERIAL", "DEFAULT", "VALUE", "FULLTEXT", "a", "b", "`c`", "(", ")", ",", "3", "'s'",
          "DESC", "CHECK", "FIRST", "AFTER"]


@given(st.sampled_from(["ALTER TABLE t ", "CREATE TABLE u (", "CREATE UNIQUE INDEX ", "CREATE OR REPLACE INDEX ",
                        "DROP INDEX ", "CREATE TABLE u (a INT, "]),
       st.lists(st.sampled_from(_WORDS), max_size=14))
@settings(max_examples=600, deadline=None)
def test_index_ddl_is_followed_or_refused_never_half_understood(head: str, words: list[str]) -> None:
    """Whatever the words, a statement is followed, or refused with the history's error (which names it and
    stops or skips the table): nothing else escapes, and a refused statement changes nothing."""
    h = _history("CREATE TABLE t (a INT NOT NULL, b INT, UNIQUE ua (a), KEY kb (b))")
    before = h.tables[("d", "t")].copy()
    try:
        h.apply("d", head + " ".join(words), "f:2")
    except SchemaError:
        assert h.tables[("d", "t")] == before


def test_not_null_literal_defaults_go_into_entries_and_records() -> None:
    """For the Debezium formats' schemas: a NOT NULL column's literal DEFAULT (not an expression, not bytes, not
    a nullable column's), in the history's entries (read back by a restart), kept by later ALTERs."""
    h = _history("CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL DEFAULT -7, s VARCHAR(4) NOT NULL DEFAULT 'a''b',"
                 " x VARCHAR(4) NULL DEFAULT 'x', ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,"
                 " b BIT(3) NOT NULL DEFAULT b'101', bin VARBINARY(2) NOT NULL DEFAULT x'00ff')")
    tm = _map([T.LONG, T.LONG, T.VARCHAR, T.VARCHAR, T.TIMESTAMP2, T.BIT, T.VARCHAR], [False] * 7)
    defaults = [c.get("default") for c in orjson.loads(h.attachment(tm, "f:2") or b"")["columns"]]
    assert defaults == [None, "-7", "a'b", None, None, 5, None]
    assert h.has_defaults(("d", "t")) and [c.default for c in enrich(tm, h.attachment(tm, "f:2") or b"").columns] == \
        defaults
    back = SchemaHistory(lambda db, t: True)
    back.load([h.entry(("d", "t"), "1", "x")])
    h.apply("d", "ALTER TABLE t ADD COLUMN m INT NOT NULL DEFAULT 1 FIRST", "f:3")
    back.apply("d", "ALTER TABLE t ADD COLUMN m INT NOT NULL DEFAULT 1 FIRST", "f:3")
    wider = _map([T.LONG] * 2 + [T.LONG, T.VARCHAR, T.VARCHAR, T.TIMESTAMP2, T.BIT, T.VARCHAR], [False] * 8)
    for history in (h, back):
        assert [c.get("default") for c in orjson.loads(history.attachment(wider, "f:4") or b"")["columns"]] == \
            ["1", None, "-7", "a'b", None, None, 5, None]
    assert not _history("CREATE TABLE t (id INT, x INT DEFAULT 3)").has_defaults(("d", "t"))
    h.apply("d", "ALTER TABLE t ALTER COLUMN n SET DEFAULT 9, ALTER s DROP DEFAULT, ALTER INDEX i INVISIBLE", "f:5")
    assert [c.get("default") for c in orjson.loads(h.attachment(wider, "f:6") or b"")["columns"]] == \
        ["1", None, "9", None, None, None, 5, None]


def test_capture_reads_defaults_as_each_server_writes_them() -> None:
    def captured(version: str, *columns: tuple[str, str, str | None, str]) -> list[Any]:
        rows = [("d", "t", name, kind, None, "utf8mb4_general_ci", "NO", "", default, extra, "", "", version, None)
                for name, kind, default, extra in columns]
        [(_, schema)] = capture(_Cursor(rows, []), lambda db, t: True).items()
        return [c.default for c in schema.columns]

    assert captured("11.8.3-MariaDB", ("a", "int(11)", "7", ""), ("b", "varchar(4)", "'n''o'", ""),
                    ("c", "timestamp", "current_timestamp()", ""), ("d", "int(11)", None, ""),
                    ("e", "int(11)", "NULL", "")) == [
        [("word", "7")], [("str", "n'o")], [("word", "current_timestamp"), ("op", "("), ("op", ")")], None,
        [("word", "NULL")]]
    assert captured("8.4.3", ("a", "int", "7", ""), ("b", "varchar(4)", "n'o", ""),
                    ("c", "timestamp", "CURRENT_TIMESTAMP", "DEFAULT_GENERATED"), ("d", "bit(3)", "b'101'", ""),
                    ("e", "int", None, "")) == [
        [("str", "7")], [("str", "n'o")], [("word", "CURRENT_TIMESTAMP")], [("word", "b"), ("str", "101")], None]
