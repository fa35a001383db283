"""The Debezium encoder without servers: Kafka Connect's encodings of values (as Java's BigInteger, Float and
the JSON converter write them), and every real corpus binlog through the encoder: one change event per row,
in binlog order, each transaction's events counted. The proof against a real Debezium connector is
tests/integration/test_debezium_format.py."""

from __future__ import annotations

import base64
import collections

import orjson
import pytest

from ingester.codec import events as E
from ingester.codec.table_map import Column
from ingester.records.builder import Record
from ingester.records.debezium.columns import Modes, column_codec, shortest_float32
from ingester.records.debezium.encoder import NEW_KEY, OLD_KEY, DebeziumOptions
from ingester.records.debezium.envelope import topic_name
from ingester.records.debezium.layouts import JsonLayout
from ingester.records.outbound import BinlakeOut, BinlogNames
from ingester.sources.binlog_file import read_binlog_file
from tests.corpus import CORPUS
from tests.harness.records import CORPUS_FILES, debezium_messages


def _column(code: int, meta: int = 0, **kw) -> Column:
    return Column(index=0, name="c", type=code, binlog_type=code, meta=meta, nullable=kw.pop("nullable", True), **kw)


@pytest.mark.parametrize(("text", "scale", "java_bytes"), [
    ("12.50", 2, bytes([0x04, 0xE2])),  # 1250
    ("-0.01", 2, bytes([0xFF])),  # -1
    ("0", 0, bytes([0x00])),
    ("1.28", 2, bytes([0x00, 0x80])),  # 128 needs a sign byte
    ("-1.28", 2, bytes([0x80])),  # -128 does not
    ("-1.29", 2, bytes([0xFF, 0x7F])),  # -129
    ("-99999999999999999999999999999999999.999999999999999999999999999999", 30,
     (-10**65 + 1).to_bytes(28, "big", signed=True)),
])
def test_a_decimal_is_its_unscaled_value_as_javas_biginteger_bytes(text, scale, java_bytes) -> None:
    codec = column_codec(_column(246, (65 << 8) | scale), Modes(), "t")
    assert codec.schema["parameters"] == {"scale": str(scale), "connect.decimal.precision": "65"}
    assert codec.convert is not None
    assert base64.b64decode(codec.convert(text)) == java_bytes


def test_a_float_column_is_written_as_its_shortest_float32_text() -> None:
    assert shortest_float32(3.140000104904175) == 3.14
    assert shortest_float32(6.28000020980835) == 6.28
    assert shortest_float32(-3.4028234663852886e38) == -3.4028235e38
    assert shortest_float32(1.1754943508222875e-38) == 1.1754944e-38  # Java 19+; Java 17 writes 1.17549435E-38
    assert shortest_float32(0.0) == 0.0


def test_bits_are_little_endian_bytes_and_bit_1_a_boolean() -> None:
    bit17 = column_codec(_column(16, (2 << 8) | 1), Modes(binary="hex"), "t")
    assert bit17.schema["name"] == "io.debezium.data.Bits" and bit17.schema["parameters"] == {"length": "17"}
    assert bit17.convert is not None and base64.b64decode(bit17.convert(0x1FFFF)) == b"\xff\xff\x01"
    assert column_codec(_column(16, 1), Modes(), "t").schema["type"] == "boolean"


def test_temporal_values() -> None:
    date = column_codec(_column(10), Modes(), "t").convert
    assert date is not None and date("2018-06-20") == 17702 and date("2024-00-00") is None
    not_null = column_codec(_column(10, nullable=False), Modes(), "t").convert
    assert not_null is not None and not_null("0000-00-00") == 0  # Debezium's fallback: the epoch
    time6 = column_codec(_column(19, 6), Modes(), "t").convert
    assert time6 is not None and time6("-838:59:58.999999") == -3020398999999
    connect_time = column_codec(_column(19, 3), Modes(time="connect"), "t").convert
    assert connect_time is not None and connect_time("23:59:59.999") == 86399999 and connect_time("-00:00:01") is None
    dt2 = column_codec(_column(18, 2), Modes(), "t")
    assert dt2.schema["name"] == "io.debezium.time.Timestamp"
    assert dt2.convert is not None and dt2.convert("2018-06-20 06:37:03.50") == 1529476623500
    dt6 = column_codec(_column(18, 6), Modes(), "t")
    assert dt6.schema["name"] == "io.debezium.time.MicroTimestamp"
    ts3 = column_codec(_column(17, 3), Modes(), "t").convert
    assert ts3 is not None and ts3("2038-01-19 03:14:07.990") == "2038-01-19T03:14:07.990Z"
    assert ts3("0000-00-00 00:00:00") == "1970-01-01T00:00:00.000Z"


def test_unsigned_bigint_and_binary_modes() -> None:
    biu = column_codec(_column(8, unsigned=True), Modes(), "t").convert
    assert biu is not None and biu(2**64 - 1) == -1
    precise = column_codec(_column(8, unsigned=True), Modes(bigint_unsigned="precise"), "t")
    assert precise.convert is not None and base64.b64decode(precise.convert(2**64 - 1)) == b"\x00" + b"\xff" * 8
    for mode, text in (("bytes", "AP8="), ("base64", "AP8="), ("base64-url-safe", "AP8="), ("hex", "00ff")):
        blob = column_codec(_column(252, 2, collation=63), Modes(binary=mode), "t")
        assert blob.convert is not None and blob.convert(b"\x00\xff") == text
        assert blob.schema["type"] == ("bytes" if mode == "bytes" else "string")


def test_layout_topics_and_binlog_names() -> None:
    assert JsonLayout(True).encode("t", "value", b'{"type":"string","optional":false}', "x") == \
        b'{"schema":{"type":"string","optional":false},"payload":"x"}'
    assert JsonLayout(False).encode("t", "key", b"{}", {"a": None}) == b'{"a":null}'
    assert topic_name("p", "my db", "t\u00e9") == "p.my_db.t_"
    names = BinlogNames()
    assert names(3) == "binlog.000003"
    names.saw(12, "mysql-bin.000002")  # a failover offset of 10
    assert names(12) == "mysql-bin.000002" and names(13) == "mysql-bin.000003"


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_every_row_of_a_real_binlog_becomes_one_change_event_in_binlog_order(name) -> None:
    path = CORPUS / name
    messages = debezium_messages(path, DebeziumOptions("p", transactions=True))
    assert all(m.topic == "p._schema" for m in messages if m.topic.startswith("p._"))
    expected = []  # (topic, op, pos, row) of every row, read from the file alone
    for ev in read_binlog_file(path):
        if isinstance(ev, E.RowsEvent):
            op = {"write": "c", "update": "u", "delete": "d"}[ev.kind]
            for row, _ in enumerate(ev.rows):
                expected.append((topic_name("p", ev.database, ev.table), op, ev.position, row))
    changes, counted, tombstones, statements, keys = [], collections.Counter(), 0, [], []
    for m in messages:
        if m.topic.startswith("p._"):
            continue
        if m.topic == "p":  # the schema change topic: an event per DDL statement (test_schema_change.py)
            key, value = orjson.loads(m.key)["payload"], orjson.loads(m.value)["payload"]
            assert key == {"databaseName": value["databaseName"]} and value["ddl"]
            statements.append(value["source"]["pos"])
            continue
        if m.value is None:
            tombstones += 1
            continue
        payload = orjson.loads(m.value)["payload"]
        if m.topic == "p.transaction":
            counted[payload["status"]] += payload["event_count"] or 0
            continue
        source = payload["source"]
        assert payload["transaction"]["id"]
        changes.append((m.topic, payload["op"], source["pos"], source["row"]))
        keys.append((m.key and orjson.dumps(orjson.loads(m.key)["payload"]), dict(m.headers)))
    merged: list[tuple] = []  # an update that changes the key is a delete, then a create at the same place
    for i, change in enumerate(changes):
        if change[1] == "c" and merged and merged[-1][1] == "d" and merged[-1][::2] == change[::2] \
                and merged[-1][3] == change[3]:
            merged[-1] = (change[0], "u", change[2], change[3])
            # each names the other's key, as Debezium's headers do
            assert keys[i - 1][1] == {NEW_KEY: keys[i][0]} and keys[i][1] == {OLD_KEY: keys[i - 1][0]}
        else:
            merged.append(change)
            if change[1] != "d" or i + 1 == len(changes) or changes[i + 1][1:] != ("c", *change[2:]):
                assert keys[i][1] == {}, change
    assert merged == expected
    assert statements == sorted(statements)
    assert counted["END"] == len(changes)
    assert tombstones == (sum(1 for c in changes if c[1] == "d") if changes else 0)


def test_binlake_format_chunks_a_large_record() -> None:
    record = Record("db.t", b"db.t", b"x" * 25, [("h", b"1")], None)  # type: ignore[arg-type]
    chunks = list(BinlakeOut("p", 10).messages(record))
    assert [m.value for m in chunks] == [b"x" * 10, b"x" * 10, b"x" * 5]
    assert [dict(m.headers)["binlake.chunk"] for m in chunks] == [b"0/3", b"1/3", b"2/3"]
