"""Table statement entries (records/statement.py, docs/FORMAT.md "Table statements"): encoded by the daemon's
side, decoded by ``record_events`` into TableStatementEvents, damaged ones refused with the offset named."""

from __future__ import annotations

import orjson
import pytest

from ingester.codec import BinlogError
from ingester.records.format import Sequence, record_events
from ingester.records.statement import (
    TABLE_STATEMENT,
    TableStatement,
    TableStatementEvent,
    index_entry,
    statement_value,
)


def _events(statements: list[TableStatement], seqs: list[Sequence]) -> list:
    value = statement_value(statements)
    index = b"".join(index_entry(s.encode(), 1_700_000_000_000_000 + i, b"0-1-%d" % i) for i, s in enumerate(seqs))
    return list(record_events({"binlake.index": index}, value, "t[0]@7"))


def test_entries_round_trip_in_order_with_their_sequences() -> None:
    rename = TableStatement("rename", "d", "k", "RENAME TABLE k TO k2", default_database="d", micros=5,
                            time_zone="+00:00", to=("d", "k2"))
    truncate = TableStatement("truncate", "d", "tr", "TRUNCATE TABLE tr", default_database="d")
    alter = TableStatement("alter", "d", "u", "ALTER TABLE u RENAME COLUMN a TO b",
                           columns=[{"name": "id", "type": 3}], primary_key=[[0, 0]], renamed={"b": "a"})
    seqs = [Sequence(3, 100), Sequence(3, 200), Sequence(3, 300)]
    got = _events([rename, truncate, alter], seqs)
    assert [e.seq for e in got] == seqs
    assert [e.gtid for e in got] == ["0-1-0", "0-1-1", "0-1-2"]
    assert all(isinstance(e.event, TableStatementEvent) and e.event.type_code == TABLE_STATEMENT for e in got)
    assert [e.event.statement for e in got] == [rename, truncate, alter]
    assert got[0].event.position == 100
    assert got[1].event.to_dict()["type"] == "table_statement"
    assert orjson.loads(rename.encode())["to"] == ["d", "k2"]
    assert TableStatement.from_json(orjson.loads(
        TableStatement("rename", "d", "k2", "x", source=("d", "k")).encode())).source == ("d", "k")
    created = TableStatement("create", "d", "c", "CREATE TABLE c (...)", server_id=7, mariadb=True, columns=[
        {"name": "id", "type": 3, "binlog_type": 3, "meta": 0, "nullable": False, "unsigned": True, "collation": None,
         "enum_values": None, "set_values": None, "geometry_type": None, "default": "5"},
        {"name": "e", "type": 247, "binlog_type": 254, "meta": 63233, "nullable": True, "unsigned": None,
         "collation": 45, "enum_values": ["a"], "set_values": None, "geometry_type": None}], primary_key=[[0, 0]])
    assert TableStatement.from_json(orjson.loads(created.encode())) == created
    tm = created.table_map(defaults=True)  # the columns as the codec's TableMap, as a FULL TABLE_MAP has them
    assert tm is not None and tm.column_names == ["id", "e"] and tm.primary_key == [(0, 0)] and tm.is_mariadb
    assert tm.columns[0].unsigned and tm.columns[0].default == "5" and tm.columns[1].enum_values == ["a"]
    assert created.table_map().columns[0].default is None and truncate.table_map() is None  # type: ignore[union-attr]


def test_an_unknown_op_or_a_damaged_descriptor_is_refused_with_its_offset() -> None:
    with pytest.raises(ValueError, match="not one of"):
        TableStatement("vacuum", "d", "t", "x")  # type: ignore[arg-type]
    good = statement_value([TableStatement("drop", "d", "t", "DROP TABLE t")])
    index = index_entry(Sequence(1, 4).encode(), 0)
    damaged = good[:-3]
    with pytest.raises(BinlogError, match="runs past its end"):
        list(record_events({"binlake.index": index}, damaged, "t[0]@9"))
    garbled = good.replace(b'"op":"drop"', b'"op":"dorp"')
    with pytest.raises(BinlogError, match="bad table statement descriptor"):
        list(record_events({"binlake.index": index}, garbled, "t[0]@9"))
