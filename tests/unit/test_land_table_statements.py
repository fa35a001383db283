"""Table statements on the land side without Spark or a lake: a batch's part plan (statements.plan), a statement's
actions (a RENAME's pairs in the statement's order, each once), the markers that make each action happen once per
lake table, the change-log generations, the writer identities of the parts, and what each statement does to a
table's lake tables (table_statements.TableStatements over an in-memory StatementTables)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ingester.records.format import Sequence
from ingester.records.statement import TableStatement
from streaming_job.format.lake_format import LakeFormat
from streaming_job.lake.generations import (
    CURRENT_PROPERTY,
    STARTED_BY,
    ChangeLogGenerations,
    change_log_name,
    conflicts,
    parse_change_log,
)
from streaming_job.statements.statements import (
    ENDED_PROPERTY,
    STATEMENT_PROPERTY,
    ApplyPart,
    RowsPart,
    StatementAt,
    actions,
    applied,
    ended_of,
    marker_text,
    plan,
    rename_order,
)
from streaming_job.statements.table_statements import TableStatements
from tests.harness.memory_lake import MemoryTables


def _at(op: str, db: str, table: str, pos: int, text: str = "", offset: int = 0, **more: Any) -> StatementAt:
    statement = TableStatement(op, db, table, text or f"{op.upper()} TABLE {table}", default_database=db, **more)
    return StatementAt(statement, Sequence(1, pos).encode(), f"1:{pos}:0", "0-1-1", 1_700_000_000_000_000,
                       f"p.{db}.{table}", 0, offset, 7, 0)


def _columns(*pairs: tuple[str, str, bool]) -> list[dict[str, Any]]:
    """Snapshot-descriptor columns: (name, MySQL type, in the key)."""
    types = {"int": (3, 3, 0), "varchar": (15, 15, 40), "varbinary": (15, 15, 40), "decimal": (246, 246, 1281)}
    out = []
    for i, (name, kind, _) in enumerate(pairs):
        code, binlog, meta = types[kind]
        out.append({"name": name, "type": code, "binlog_type": binlog, "meta": meta, "nullable": i > 0,
                    "unsigned": False, "collation": 63 if kind in ("varbinary", "int", "decimal") else 45,
                    "enum_values": None, "set_values": None, "geometry_type": None})
    return out


def test_a_batch_with_statements_lands_in_parts_around_each_statement() -> None:
    later = _at("truncate", "d", "a", 300)
    first = _at("truncate", "d", "b", 200)
    steps = list(plan([later, first]))
    assert [type(s).__name__ for s in steps] == ["RowsPart", "ApplyPart", "RowsPart", "ApplyPart", "RowsPart"]
    assert [s.part for s in steps] == ["", "s1", "r1", "s2", "r2"]
    rows = [s for s in steps if isinstance(s, RowsPart)]
    assert [r.between for r in rows] == [(None, first.seq), (first.seq, later.seq), (later.seq, None)]
    assert all(r.tables == frozenset({("d", "a"), ("d", "b")}) for r in rows)
    applies = [s for s in steps if isinstance(s, ApplyPart)]
    assert [[a.name for a in s.actions] for s in applies] == [[("d", "b")], [("d", "a")]]


def test_the_entries_of_one_statement_are_its_actions_once_each() -> None:
    # DROP TABLE a, b: an entry in each table's topic; the same entry read twice (a replayed record) acts once
    drop = [_at("drop", "d", "a", 100, "DROP TABLE a, b"), _at("drop", "d", "b", 100, "DROP TABLE a, b", 1),
            _at("drop", "d", "a", 100, "DROP TABLE a, b")]
    steps = [s for s in plan(drop) if isinstance(s, ApplyPart)]
    assert len(steps) == 1
    assert [(a.op, a.name, a.index) for a in steps[0].actions] == [("drop", ("d", "a"), 0), ("drop", ("d", "b"), 1)]


def test_a_renames_pairs_apply_in_the_statements_order_each_once() -> None:
    text = "RENAME TABLE a TO tmp, b TO a, tmp TO b"
    entries = [  # each pair's entry in its old name's topic (to) and in its new name's (from), in topic order
        _at("rename", "d", "a", 100, text, to=("d", "tmp")), _at("rename", "d", "a", 100, text, source=("d", "b")),
        _at("rename", "d", "b", 100, text, to=("d", "a")), _at("rename", "d", "b", 100, text, source=("d", "tmp")),
        _at("rename", "d", "tmp", 100, text, source=("d", "a")), _at("rename", "d", "tmp", 100, text, to=("d", "b"))]
    found = actions(entries)
    assert [(a.name, a.to, a.index) for a in found] == [(("d", "a"), ("d", "tmp"), 0), (("d", "b"), ("d", "a"), 1),
                                                        (("d", "tmp"), ("d", "b"), 2)]
    assert all(a.pair_seen == frozenset({"to", "from"}) for a in found)
    # gh-ost's swap, across databases and quoted
    swap = "RENAME /* gh-ost */ TABLE `d`.`t` TO `d`.`_t_del`, `d`.`_t_gho` TO `d`.`t`"
    assert rename_order(swap, "x") == [(("d", "t"), ("d", "_t_del")), (("d", "_t_gho"), ("d", "t"))]
    assert rename_order("rename table a to other.`we``ird`", "d") == [(("d", "a"), ("other", "we`ird"))]
    assert rename_order("ALTER TABLE d.k ADD COLUMN z INT, RENAME TO e.k2", "x") == [(("d", "k"), ("e", "k2"))]
    assert rename_order("ALTER TABLE k RENAME COLUMN a TO b", "d") == []
    assert rename_order("TRUNCATE TABLE a", "d") == []


def test_the_daemons_steps_of_a_rename_are_statements_of_their_own_in_step_order() -> None:
    """The daemon gives step k of a statement the sequence (F, P, s + k) (docs/FORMAT.md, "Sequences"): the cycle's
    pairs come as three statements, each pair's two entries (old name's "to", new name's "from") together."""
    text = "RENAME TABLE a TO tmp, b TO a, tmp TO b"
    entries = []
    for k, (old, new) in enumerate((("a", "tmp"), ("b", "a"), ("tmp", "b"))):
        seq = Sequence(1, 100, k).encode()
        for at in (_at("rename", "d", old, 100, text, to=("d", new)), _at("rename", "d", new, 100, text,
                                                                           source=("d", old))):
            entries.append(replace(at, seq=seq, position=f"1:100:{k}"))
    steps = [s for s in plan(entries[::-1]) if isinstance(s, ApplyPart)]
    assert [[(a.name, a.to, a.pair_seen) for a in s.actions] for s in steps] == [
        [(("d", old), ("d", new), frozenset({"to", "from"}))] for old, new in (("a", "tmp"), ("b", "a"), ("tmp", "b"))]


def test_markers_order_actions_by_statement_then_index() -> None:
    seq = Sequence(1, 100).encode()
    props = {STATEMENT_PROPERTY: marker_text((seq, 1))}
    assert applied(props, (seq, 0)) and applied(props, (seq, 1)) and not applied(props, (seq, 2))
    assert applied(props, (Sequence(1, 99, 5).encode(), 3))
    assert not applied(props, (Sequence(2, 4).encode(), 0)) and not applied({}, (seq, 0))


def test_generations_are_named_resolved_and_started_once() -> None:
    assert [change_log_name("t", n) for n in (1, 2, 12)] == ["t__changes", "t__changes__v2", "t__changes__v12"]
    assert parse_change_log("t__changes__v3") == ("t", 3) and parse_change_log("t__changes") == ("t", 1)
    assert parse_change_log("t") is None and parse_change_log("__changes") is None
    assert conflicts([("id", "int"), ("v", "string")], [("id", "bigint"), ("v", "binary"), ("w", "int")]) == [
        ("v", "string", "binary")]
    assert conflicts([("n", "bigint")], [("n", "int")]) == []  # a narrowing into the lake's type: kept wide
    lake = {"t__changes": {}, "t__changes__v2": {STARTED_BY: Sequence(1, 50).encode().hex()}}
    asked: list[str] = []

    def probe(db: str, name: str) -> dict[str, str] | None:
        asked.append(name)
        return lake.get(name)

    gens = ChangeLogGenerations(probe)
    now = gens.current("d", "t")
    assert (now.number, now.name, asked) == (2, "t__changes__v2", ["t__changes__v2", "t__changes__v3"])
    assert gens.current("d", "t") is now and len(asked) == 2  # cached
    seq = Sequence(1, 90).encode()
    assert gens.for_statement("d", "t", seq, False) == now
    nxt = gens.for_statement("d", "t", seq, True)
    assert (nxt.number, nxt.started_by) == (3, seq)
    gens.started("d", "t", nxt)
    assert gens.for_statement("d", "t", seq, True) == nxt  # the same statement again (a replay): no fourth


def test_each_part_writes_under_its_own_identity() -> None:
    class Format(LakeFormat):
        name = "test"
        _identity = "app"

        @property
        def identity(self) -> str:
            return self._identity

        @identity.setter
        def identity(self, value: str) -> None:
            self._identity = value

        def __getattr__(self, item: str) -> Any:
            raise AttributeError(item)

    Format.__abstractmethods__ = frozenset()
    fmt = Format()
    seen = []
    with fmt.part(""):
        seen.append(fmt.identity)
    with fmt.part("s1.0"):
        seen.append(fmt.identity)
        with fmt.part("create"):
            seen.append(fmt.identity)
    seen.append(fmt.identity)
    assert seen == ["app", "app~s1.0", "app~s1.0~create", "app"]


def _lake() -> tuple[MemoryTables, TableStatements]:
    tables = MemoryTables()
    forgotten: list[tuple[str, str]] = []
    return tables, TableStatements(tables, ChangeLogGenerations(tables.properties), lambda *n: forgotten.append(n))


def _table(tables: MemoryTables, name: str, columns: list[tuple[str, str]], rows: list[Any]) -> None:
    tables.tables[("d", name)] = {"properties": {}, "columns": columns, "rows": rows}
    tables.tables[("d", f"{name}__changes")] = {"properties": {}, "columns": columns, "rows": [("insert", None, None)]}


def _apply(lake: TableStatements, entries: list[StatementAt]) -> None:
    for step in plan(entries):
        if isinstance(step, ApplyPart):
            for action in step.actions:
                lake.apply(action)


def test_truncate_drop_and_create_end_and_start_a_tables_mirror() -> None:
    tables, lake = _lake()
    _table(tables, "t", [("id", "int"), ("v", "string")], [1, 2, 3])
    _apply(lake, [_at("truncate", "d", "t", 100)])
    assert tables.tables[("d", "t")]["rows"] == [] and not lake.ended("d", "t")
    _apply(lake, [_at("drop", "d", "t", 200)])
    assert lake.ended("d", "t")
    assert ended_of(tables.properties("d", "t"))["op"] == "drop"
    # created again with v of another type (binary: no safe widening of string) -> generation 2
    create = _at("create", "d", "t", 300, "CREATE TABLE t (id INT PRIMARY KEY, v VARBINARY(40))",
                 columns=_columns(("id", "int", True), ("v", "varbinary", False)), primary_key=[[0, 0]])
    _apply(lake, [create])
    assert lake.change_log("d", "t") == "t__changes__v2" and not lake.ended("d", "t")
    assert tables.tables[("d", "t__changes")]["rows"][-1][0] == "drop"  # the first generation ends with the drop
    assert tables.tables[("d", "t__changes__v2")]["rows"] == [("create", None, None)]
    assert tables.properties("d", "t__changes__v2")[STARTED_BY] == create.seq.hex()
    mirror = tables.tables[("d", "t")]
    assert (mirror["columns"], mirror["rows"], mirror["properties"]["key"]) == ([("id", "int"), ("v", "binary")],
                                                                                [], "id")
    assert mirror["properties"][CURRENT_PROPERTY] == "t__changes__v2" and ENDED_PROPERTY not in mirror["properties"]
    # the same statements again (a replayed batch, or their entries read again): nothing is written twice
    writes = tables.writes
    _apply(lake, [_at("truncate", "d", "t", 100), _at("drop", "d", "t", 200), create])
    assert tables.writes == writes


def test_renames_swap_and_cycle_the_mirrors_and_their_change_logs() -> None:
    tables, lake = _lake()
    cols = [("id", "int"), ("v", "string")]
    _table(tables, "a", cols, ["a1"])
    _table(tables, "b", cols, ["b1", "b2"])
    text = "RENAME TABLE a TO tmp, b TO a, tmp TO b"
    entries = [_at("rename", "d", "a", 100, text, to=("d", "tmp")), _at("rename", "d", "b", 100, text, to=("d", "a")),
               _at("rename", "d", "tmp", 100, text, to=("d", "b"))]
    _apply(lake, entries)
    assert tables.tables[("d", "a")]["rows"] == ["b1", "b2"] and tables.tables[("d", "b")]["rows"] == ["a1"]
    assert tables.tables[("d", "tmp")]["rows"] == [] and lake.ended("d", "tmp")
    assert not lake.ended("d", "a") and not lake.ended("d", "b")
    assert tables.tables[("d", "a__changes")]["rows"] == [("insert", None, None), ("rename", "d.a", "d.tmp"),
                                                          ("rename", "d.b", "d.a")]
    assert tables.tables[("d", "tmp__changes")]["rows"] == [("rename", "d.a", "d.tmp"), ("rename", "d.tmp", "d.b")]
    writes = tables.writes
    _apply(lake, entries)  # the new names' entries in a later batch, or a replay: nothing again
    assert tables.writes == writes


def test_a_rename_from_a_table_binlake_never_landed_says_what_to_do(caplog) -> None:
    tables, lake = _lake()
    _apply(lake, [_at("rename", "d", "t", 100, "RENAME TABLE hidden TO t", source=("d", "hidden"),
                      columns=_columns(("id", "int", True)), primary_key=[[0, 0]])])
    assert "binlake snapshot --tables d.t" in caplog.text and "never landed" in caplog.text
    assert tables.tables[("d", "t__changes")]["rows"] == [("rename", "d.hidden", "d.t")]


@pytest.mark.parametrize("history", [False, True])
def test_a_rename_from_a_table_binlake_never_landed_replayed_after_its_rows_keeps_them(history) -> None:
    """The run that applied the rename landed the table's rows after it, then died before its batch committed: the
    replay applies the rename again, and the rows (in the lake tables they made) stay, with nothing written again."""
    tables, lake = _lake()
    known = {"columns": _columns(("id", "int", True), ("v", "int", False)), "primary_key": [[0, 0]]} if history else {}
    entries = [_at("rename", "d", "t", 100, "RENAME TABLE hidden TO t", source=("d", "hidden"), **known)]
    _apply(lake, entries)
    assert tables.tables.get(("d", "t__changes"), {}).get("rows", []) == ([("rename", "d.hidden", "d.t")]
                                                                          if history else [])
    cols = [("id", "int"), ("v", "int")]
    tables.tables[("d", "t")] = {"properties": {"key": "id"}, "columns": cols, "rows": [2]}  # made by its rows
    changes = tables.tables.setdefault(("d", "t__changes"), {"properties": {}, "columns": cols, "rows": []})
    changes["rows"].append(("update", None, None))
    writes, rows = tables.writes, list(changes["rows"])
    _apply(lake, entries)
    assert tables.tables[("d", "t")]["rows"] == [2] and tables.tables[("d", "t__changes")]["rows"] == rows
    assert tables.writes == writes and not lake.ended("d", "t")


@pytest.mark.parametrize("reload", [False, True])
def test_a_partition_statement_warns_or_is_followed_by_the_daemons_reload(caplog, reload) -> None:
    """Partition maintenance leaves the mirror as it is (the binlog names no rows): a reload entry after it empties
    the mirror for the re-snapshot's rows; without one (no signal table on the daemon) a warning says what to do."""
    tables, lake = _lake()
    _table(tables, "p", [("id", "int")], [1, 2])
    partition = {"action": "truncate", "names": ["p0"], **({"reload": True} if reload else {})}
    sql = "ALTER TABLE p TRUNCATE PARTITION p0"
    _apply(lake, [_at("partition", "d", "p", 100, sql, partition=partition)])
    assert tables.tables[("d", "p")]["rows"] == [1, 2]
    assert ("may hold rows the server no longer has" in caplog.text) is not reload
    if reload:
        _apply(lake, [_at("reload", "d", "p", 101, sql)])
        assert tables.tables[("d", "p")]["rows"] == []
    assert [r[0] for r in tables.tables[("d", "p__changes")]["rows"]][-1] == ("reload" if reload else "partition")
