"""Landing Debezium's change events without servers: Connect field schemas -> lake types and values (the values
written as Debezium documents them), repeats of an at-least-once producer dropped by source position per topic
partition, the row changes' order, and every real corpus binlog through binlake's debezium-json encoder and back
(as many row changes as the binlog holds). The proof with a real Debezium connector killed -9 is
tests/integration/test_land_debezium.py."""

from __future__ import annotations

import base64
from decimal import Decimal

import orjson
import pyarrow as pa
import pytest

from ingester.codec import events as E
from ingester.records.debezium.encoder import DebeziumOptions
from ingester.sources.binlog_file import read_binlog_file
from streaming_job.decode.debezium_decode import (
    DIGEST,
    POSITION,
    DebeziumReader,
    decode_debezium_partition,
    merged,
    position,
)
from streaming_job.decode.debezium_types import UnknownField, lake_column
from streaming_job.decode.decode import _Out
from streaming_job.source.source_formats import topic_pattern
from tests.corpus import CORPUS
from tests.harness.records import CORPUS_FILES, debezium_messages, source_batch


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(("field", "payload", "dtype", "value"), [
    ({"type": "int16"}, -5, "smallint", -5),
    ({"type": "int64"}, 2**63 - 1, "bigint", 2**63 - 1),
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
      "parameters": {"scale": "2", "connect.decimal.precision": "10"}}, _b64(bytes([0xFF, 0x7F])), "decimal(10,2)",
     Decimal("-1.29")),
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
      "parameters": {"scale": "1", "connect.decimal.precision": "65"}}, _b64((10**60).to_bytes(26, "big")), "string",
     "1" + "0" * 59 + ".0"),
    ({"type": "int32", "name": "io.debezium.time.Date"}, 19782, "date", 19782),  # 2024-02-29
    ({"type": "int64", "name": "io.debezium.time.MicroTime"}, -3020399000000, "bigint", -3020399000000),
    ({"type": "int32", "name": "org.apache.kafka.connect.data.Time"}, 45296789, "bigint", 45296789000),
    ({"type": "int64", "name": "io.debezium.time.Timestamp"}, 1709201472123, "timestamp_ntz", 1709201472123000),
    ({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, 1709201472123456, "timestamp_ntz",
     1709201472123456),
    ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "2024-02-29T10:11:12.5Z", "timestamp",
     1709201472500000),
    ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "2024-02-29T12:11:12+02:00", "timestamp",
     1709201472000000),
    ({"type": "bytes", "name": "io.debezium.data.Bits"}, _b64(b"\xff\xff\x01"), "bigint", 0x1FFFF),
    ({"type": "bytes", "name": "io.debezium.data.Bits"}, _b64(b"\xff" * 8), "bigint", -1),
    ({"type": "bytes"}, _b64(b"\x00\xff"), "binary", b"\x00\xff"),
    ({"type": "string", "name": "io.debezium.data.Json"}, '{"a":1}', "string", '{"a":1}'),
    ({"type": "boolean"}, True, "boolean", True),
    ({"type": "struct", "name": "io.debezium.data.geometry.Point"},
     {"x": 1.0, "y": 2.0, "wkb": _b64(b"\x01\x01\x00\x00\x00" + bytes(16)), "srid": 4326}, "binary",
     (4326).to_bytes(4, "little") + b"\x01\x01\x00\x00\x00" + bytes(16)),
    ({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
     {"scale": 3, "value": _b64(bytes([0x04, 0xD2]))}, "string", "1.234"),
])
def test_connect_fields_land_as_lake_types(field, payload, dtype, value) -> None:
    got_type, convert = lake_column({**field, "field": "c"})
    assert got_type == dtype
    assert (payload if convert is None else convert(payload)) == value


def test_a_field_without_a_lake_type_is_named() -> None:
    with pytest.raises(UnknownField, match="field `m` of Connect type map"):
        lake_column({"type": "map", "field": "m"})


def test_topics_of_the_tables_only() -> None:
    import re

    pattern = re.compile(topic_pattern("srv", "debezium-json"))
    assert pattern.fullmatch("srv.shop.orders") and pattern.fullmatch("srv.shop.t.with.dots")
    assert not any(pattern.fullmatch(t) for t in ("srv", "srv.transaction", "srv._offsets", "other.shop.orders"))


_VALUE_SCHEMA = {"type": "struct", "name": "srv.shop.t.Envelope", "version": 2, "optional": False, "fields": [
    {"type": "struct", "field": "before", "optional": True, "name": "srv.shop.t.Value", "fields": [
        {"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "s"}]},
    {"type": "struct", "field": "after", "optional": True, "name": "srv.shop.t.Value", "fields": [
        {"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "s"}]},
    {"type": "struct", "field": "source", "optional": False, "fields": []},
    {"type": "string", "field": "op", "optional": False}]}
_KEY_SCHEMA = {"type": "struct", "name": "srv.shop.t.Key", "optional": False,
               "fields": [{"type": "int32", "optional": False, "field": "id"}]}


def _event(op: str, pos: int, row: int, before: dict | None, after: dict | None) -> tuple[bytes, bytes]:
    key = (after or before or {})["id"]
    source = {"version": "3.5.0.Final", "connector": "mariadb", "name": "srv", "ts_ms": 1_700_000_000_000,
              "snapshot": "false" if op != "r" else "true", "db": "shop", "table": "t", "server_id": 1,
              "gtid": "0-1-5", "file": "mysql-bin.000003", "pos": pos, "row": row}
    return (orjson.dumps({"schema": _KEY_SCHEMA, "payload": {"id": key}}),
            orjson.dumps({"schema": _VALUE_SCHEMA, "payload": {"before": before, "after": after, "source": source,
                                                               "op": op, "ts_ms": 1}}))


def _changes(rows: list[tuple]) -> list[tuple]:
    """(op, position, row_index, kafka_offset, before id, after id) of decoded record rows."""
    out = []
    for r in rows:
        assert r[0] == "row", r
        for part in pa.ipc.open_stream(r[12]):
            for c in part.to_pylist():
                out.append((c["op"], c["position"], c["row_index"], c["kafka_offset"],
                            (c["before"] or {}).get("id"), (c["after"] or {}).get("id")))
    return out


def test_repeats_are_dropped_by_source_position_per_partition() -> None:
    events = [_event("r", 100, 0, None, {"id": 9, "s": "snap"}), _event("r", 100, 0, None, {"id": 8, "s": "snap"}),
              _event("c", 200, 0, None, {"id": 1, "s": "a"}), _event("u", 300, 0, {"id": 1, "s": "a"},
                                                                     {"id": 1, "s": "b"}),
              _event("d", 400, 1, {"id": 1, "s": "b"}, None), _event("c", 400, 1, None, {"id": 2, "s": "b"})]
    # partition 0: everything, then the connector's restart publishes from the update again; partition 1: a
    # position below partition 0's newest is no repeat there
    feed = [(0, i, *e) for i, e in enumerate(events)] + [(0, 6, *events[3]), (0, 7, *events[4]), (0, 8, None, None),
                                                         (0, 9, *events[5]), (1, 0, *events[2])]
    reader = DebeziumReader({})
    out = _Out()
    for partition, offset, key, value in feed:
        reader.feed(out, "srv.shop.t", partition, offset, key, value)
    reader.finish(out)
    by_partition = {r.partition: r for r in out.rows}
    assert _changes([by_partition[0]]) == [
        ("read", "3:100:0", 0, 0, None, 9), ("read", "3:100:0", 0, 1, None, 8), ("insert", "3:200:0", 0, 2, None, 1),
        ("update", "3:300:0", 0, 3, 1, 1), ("delete", "3:400:0", 1, 4, 1, None), ("insert", "3:400:0", 1, 5, None, 2)]
    assert _changes([by_partition[1]]) == [("insert", "3:200:0", 0, 0, None, 1)]
    assert reader.repeats == 3
    meta = orjson.loads(by_partition[0].schema)
    assert meta == {"columns": [["id", "int"], ["s", "string"]], "pk": ["id"]}
    assert by_partition[0].mark[:POSITION] == position(_seq(3, 400), 1, "insert")
    assert len(by_partition[0].mark) == POSITION + 2 * DIGEST  # the two events landed at that binlog position
    # the next batch starts from the marks landed: the same events again are all repeats but the reads
    again = DebeziumReader({("srv.shop.t", 0): by_partition[0].mark})
    out = _Out()
    for partition, offset, key, value in feed[:6]:
        again.feed(out, "srv.shop.t", partition, offset, key, value)
    again.finish(out)
    assert [c[0] for c in _changes(out.rows)] == ["read", "read"]


def test_several_rows_events_at_one_binlog_position_are_no_repeats() -> None:
    """A compressed transaction's (or binlake's XA COMMIT's) rows events all carry one binlog position, each numbering
    its rows from 0: a row index lower than the newest one there is no repeat; a replay of them after a restart
    of the connector is, in this batch and in the next one (the marks it landed)."""
    events = [_event("c", 500, 0, None, {"id": 1, "s": "a"}), _event("c", 500, 1, None, {"id": 2, "s": "a"}),
              _event("c", 500, 2, None, {"id": 3, "s": "a"}), _event("u", 500, 0, {"id": 1, "s": "a"},
                                                                     {"id": 1, "s": "b"}),
              _event("d", 500, 0, {"id": 2, "s": "a"}, None)]
    feed = [(i, *e) for i, e in enumerate(events)] + [(5 + i, *e) for i, e in enumerate(events[2:])]  # a replay
    reader = DebeziumReader({})
    out = _Out()
    for offset, key, value in feed:
        reader.feed(out, "srv.shop.t", 0, offset, key, value)
    reader.finish(out)
    assert [(c[0], c[2], c[3]) for c in _changes(out.rows)] == [
        ("insert", 0, 0), ("insert", 1, 1), ("insert", 2, 2), ("update", 0, 3), ("delete", 0, 4)]
    assert reader.repeats == 3
    mark = out.rows[0].mark
    assert len(mark) == POSITION + 5 * DIGEST and mark[:POSITION] == position(_seq(3, 500), 2, "insert")
    again = DebeziumReader({("srv.shop.t", 0): mark})
    out = _Out()
    for offset, key, value in feed:
        again.feed(out, "srv.shop.t", 0, offset, key, value)
    again.finish(out)
    assert out.rows == [] and again.repeats == len(feed)


def test_events_sharing_a_position_are_told_apart_by_their_images() -> None:
    """The rows events of a MySQL compressed transaction all carry the payload's position: two different
    inserts at (500, row 0) both land, and their repeats do not, in the same task or in the next batch."""
    first, second = _event("c", 500, 0, None, {"id": 5, "s": "x"}), _event("c", 500, 0, None, {"id": 6, "s": "y"})
    reader = DebeziumReader({})
    out = _Out()
    for offset, (key, value) in enumerate([first, second, first, second]):
        reader.feed(out, "srv.shop.t", 0, offset, key, value)
    reader.finish(out)
    assert [c[5] for c in _changes(out.rows)] == [5, 6] and reader.repeats == 2
    landed = out.rows[0].mark
    assert len(landed) == POSITION + 2 * DIGEST
    # a batch boundary between the two: the next batch starts from the first one's mark
    reader = DebeziumReader({})
    out = _Out()
    reader.feed(out, "srv.shop.t", 0, 0, *first)
    reader.finish(out)
    after_first = out.rows[0].mark
    nxt = DebeziumReader({("srv.shop.t", 0): after_first})
    out = _Out()
    for offset, (key, value) in enumerate([first, second], start=1):
        nxt.feed(out, "srv.shop.t", 0, offset, key, value)
    nxt.finish(out)
    assert [c[5] for c in _changes(out.rows)] == [6] and nxt.repeats == 1
    assert merged(after_first, out.rows[0].mark) == landed
    assert merged(landed, after_first) == landed and merged(None, landed) == landed
    # a mark of a position alone (its events gone from Kafka): anything at that position is taken for landed
    blind = DebeziumReader({("srv.shop.t", 0): landed[:POSITION]})
    out = _Out()
    blind.feed(out, "srv.shop.t", 0, 9, *second)
    assert blind.repeats == 1


def _seq(file_number: int, pos: int) -> bytes:
    from ingester.records.format import Sequence

    return Sequence(file_number, pos).encode()


def test_a_message_without_schema_or_change_is_an_error_row_naming_why() -> None:
    reader = DebeziumReader({})
    out = _Out()
    reader.feed(out, "srv.shop.t", 0, 5, None, b'{"before":null,"after":{"id":1}}')
    key, value = _event("c", 1, 0, None, {"id": 1, "s": None})
    reader.feed(out, "srv.shop.t", 0, 6, key, value.replace(b'"op":"c"', b'"op":"m"'))
    reader.finish(out)
    errors = [(r.offset, r.error) for r in out.rows]
    assert errors[0][0] == 5 and "has no schema" in errors[0][1] and "schemas.enable=true" in errors[0][1]
    assert errors[1][0] == 6 and "op 'm' is not a row change (c, u, d, r) or a truncate (t)" in errors[1][1]


def test_a_truncate_event_is_a_truncate_statement_between_its_tables_rows() -> None:
    """Debezium's truncate (op t, no images): a table statement at its position; the partition's events before it
    a record row of their own (first sequence before it), those after another; Debezium's repeat of it dropped."""
    reader = DebeziumReader({})
    out = _Out()
    truncate = orjson.loads(_event("c", 300, 0, None, {"id": 1, "s": None})[1])
    truncate["payload"].update(op="t", before=None, after=None)
    events = [_event("c", 100, 0, None, {"id": 1, "s": "a"}), _event("c", 200, 0, None, {"id": 2, "s": "b"}),
              (None, orjson.dumps(truncate)), _event("c", 400, 0, None, {"id": 3, "s": "c"}),
              (None, orjson.dumps(truncate))]  # the last: a repeat (Debezium after a crash)
    for offset, (key, value) in enumerate(events):
        reader.feed(out, "srv.shop.t", 0, offset, key, value)
    reader.finish(out)
    kinds = [(r.kind, r.first_seq, r.offset) for r in out.rows]
    assert sorted(kinds) == sorted([("statement", _seq(3, 300), 2), ("row", _seq(3, 100), 0),
                                    ("row", _seq(3, 400), 3)])
    said = next(r for r in out.rows if r.kind == "statement")
    statement = orjson.loads(said.statement)
    assert (statement["op"], statement["database"], statement["table"]) == ("truncate", "shop", "t")
    assert statement["gtid"] == "0-1-5" and said.newest == 1_700_000_000_000 * 1000
    before, after = (r for r in sorted(out.rows, key=lambda r: r.first_seq) if r.kind == "row")
    assert [c[5] for c in _changes([before])] == [1, 2] and [c[5] for c in _changes([after])] == [3]
    assert reader.repeats == 1


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_binlakes_debezium_json_of_a_real_binlog_lands_every_row_change_once(name) -> None:
    path = CORPUS / name
    messages = debezium_messages(path, DebeziumOptions("p"))
    tables = [m for m in messages if not m.topic.startswith("p._") and m.topic != "p"]  # p: the schema changes
    rows = sum(len(ev.rows) for ev in read_binlog_file(path) if isinstance(ev, E.RowsEvent))
    # everything published twice: the second time is all repeats
    decoded = [r for b in decode_debezium_partition([source_batch(tables * 2)], {}) for r in b.to_pylist()]
    assert [r["error"] for r in decoded if r["kind"] != "row"] == []
    events = [orjson.loads(m.value)["payload"] for m in tables if m.value is not None]
    inserted = sum(len(ev.rows) for ev in read_binlog_file(path) if isinstance(ev, E.RowsEvent) and ev.kind == "write")
    moved = sum(1 for e in events if e["op"] == "c") - inserted  # a changed key: a delete and a create
    assert sum(r["rows"] for r in decoded) == len(events) == rows + moved
    newest = {}
    for m in tables:
        if m.value is not None:
            newest[m.topic] = max(newest.get(m.topic, 0), orjson.loads(m.value)["payload"]["source"]["ts_ms"] * 1000)
    assert {r["topic"]: r["newest"] for r in decoded} == newest


@pytest.mark.parametrize(("field", "default", "sql"), [
    ({"type": "int32"}, 7, "CAST(7 AS int)"),
    ({"type": "string"}, "n'o\\", "'n\\'o\\\\'"),
    ({"type": "int32", "name": "io.debezium.time.Date"}, 19782, "DATE_FROM_UNIX_DATE(19782)"),
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
      "parameters": {"scale": "2", "connect.decimal.precision": "10"}}, _b64(bytes([0xFF, 0x7F])),
     "CAST('-1.29' AS decimal(10,2))"),
    ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "1970-01-01T00:00:01Z",
     "TIMESTAMP_MICROS(1000000)"),
    ({"type": "bytes"}, _b64(b"\x01\xff"), "X'01ff'"),
    ({"type": "double"}, 0.1, "CAST('0.1' AS double)"),
])
def test_a_columns_default_in_the_schema_is_the_mirrors_default_for_older_rows(field, default, sql) -> None:
    value_schema = {**_VALUE_SCHEMA, "fields": [
        {**_VALUE_SCHEMA["fields"][1], "fields": [*_VALUE_SCHEMA["fields"][1]["fields"],
                                                  {**field, "optional": True, "field": "x", "default": default}]},
        *_VALUE_SCHEMA["fields"][2:]]}
    value = orjson.dumps({"schema": value_schema, "payload": {
        "before": None, "after": {"id": 1, "s": None, "x": None}, "op": "c",
        "source": {"db": "shop", "table": "t", "file": "b.000001", "pos": 4, "row": 0, "ts_ms": 0}}})
    reader = DebeziumReader({})
    out = _Out()
    reader.feed(out, "srv.shop.t", 0, 0, None, value)
    reader.finish(out)
    assert orjson.loads(out.rows[0].schema)["defaults"] == {"x": sql}
