"""``kafka.format: debezium-avro`` without servers: Connect schemas as Avro (expected schemas written by hand from
the rules of Confluent's AvroData.fromConnectSchema, each parsed by fastavro), Confluent's wire format, and
every message decoded by fastavro's reader (not ours) to the same values as the debezium-json payload of the
same row. The registry over HTTP and the daemon: tests/integration/test_avro_registry.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import pytest
from fastavro import parse_schema

from ingester.codec.constants import ColumnType as T
from ingester.codec.errors import BinlogError
from ingester.codec.table_map import Column, TableMap
from ingester.config import ConfigError, load_config
from ingester.devstack import free_tcp_port
from ingester.records.debezium import native
from ingester.records.debezium.avro_schema import avro_schema
from ingester.records.debezium.columns import Modes
from ingester.records.debezium.encoder import DebeziumOptions
from ingester.records.debezium.envelope import TRANSACTION_VALUE_SCHEMA, table_codec
from ingester.records.debezium.layouts import AvroLayout
from tests.corpus import CORPUS
from tests.harness import avro
from tests.harness.avro import Registry
from tests.harness.records import CORPUS_FILES, debezium_messages


def _col(index: int, name: str, code: int, meta: int = 0, nullable: bool = True, **kw: Any) -> Column:
    return Column(index=index, name=name, type=code, binlog_type=code, meta=meta, nullable=nullable, **kw)


def _value_fields(tm: TableMap, modes: Modes) -> dict[str, Any]:
    envelope = avro_schema(orjson.loads(table_codec(tm, "p", modes).value_schema))
    parse_schema(envelope)  # a valid Avro schema
    return {f["name"]: f for f in envelope["fields"][0]["type"][1]["fields"]}


def _table(*columns: Column, db: str = "db", name: str = "t") -> TableMap:
    return TableMap(0, 0, db, name, list(columns), [(0, 0)], has_names=True, is_mariadb=True)


DECIMAL = "org.apache.kafka.connect.data.Decimal"


def _named(kind: str, name: str, **props: Any) -> dict[str, Any]:
    return {"type": kind, **({"connect.version": 1} if "connect.version" not in props else {}), **props,
            "connect.name": name}


# each column type (nullable: an optional field) -> its Avro type within ["null", T], written from the rules
COLUMN_TYPES = [
    (_col(1, "c", T.TINY), Modes(), {"type": "int", "connect.type": "int16"}),
    (_col(1, "c", T.SHORT, unsigned=True), Modes(), "int"),
    (_col(1, "c", T.LONG, unsigned=True), Modes(), "long"),
    (_col(1, "c", T.LONGLONG, unsigned=True), Modes(), "long"),
    (_col(1, "c", T.LONGLONG, unsigned=True), Modes(bigint_unsigned="precise"),
     {"type": "bytes", "scale": 0, "precision": 20, "connect.version": 1,
      "connect.parameters": {"scale": "0", "connect.decimal.precision": "20"}, "connect.name": DECIMAL,
      "logicalType": "decimal"}),
    (_col(1, "c", T.FLOAT), Modes(), "float"),
    (_col(1, "c", T.DOUBLE), Modes(), "double"),
    (_col(1, "c", T.BIT, 1), Modes(), "boolean"),
    (_col(1, "c", T.BIT, (2 << 8) | 1), Modes(),
     {"type": "bytes", "connect.version": 1, "connect.parameters": {"length": "17"},
      "connect.name": "io.debezium.data.Bits"}),
    (_col(1, "c", T.YEAR), Modes(), _named("int", "io.debezium.time.Year")),
    (_col(1, "c", T.NEWDECIMAL, (5 << 8) | 2), Modes(),
     {"type": "bytes", "scale": 2, "precision": 5, "connect.version": 1,
      "connect.parameters": {"scale": "2", "connect.decimal.precision": "5"}, "connect.name": DECIMAL,
      "logicalType": "decimal"}),
    (_col(1, "c", T.NEWDECIMAL, (5 << 8) | 2), Modes(decimal="string"), "string"),
    (_col(1, "c", T.NEWDECIMAL, (5 << 8) | 2), Modes(decimal="double"), "double"),
    (_col(1, "c", T.DATE), Modes(), _named("int", "io.debezium.time.Date")),
    (_col(1, "c", T.DATE), Modes(time="connect"),
     {"type": "int", "connect.version": 1, "connect.name": "org.apache.kafka.connect.data.Date",
      "logicalType": "date"}),
    (_col(1, "c", T.TIME2, 3), Modes(), _named("long", "io.debezium.time.MicroTime")),
    (_col(1, "c", T.TIME2, 3), Modes(time="connect"),
     {"type": "int", "connect.version": 1, "connect.name": "org.apache.kafka.connect.data.Time",
      "logicalType": "time-millis"}),
    (_col(1, "c", T.DATETIME2, 2), Modes(), _named("long", "io.debezium.time.Timestamp")),
    (_col(1, "c", T.DATETIME2, 6), Modes(), _named("long", "io.debezium.time.MicroTimestamp")),
    (_col(1, "c", T.DATETIME2, 0), Modes(time="connect"),
     {"type": "long", "connect.version": 1, "connect.name": "org.apache.kafka.connect.data.Timestamp",
      "logicalType": "timestamp-millis"}),
    (_col(1, "c", T.TIMESTAMP2, 3), Modes(), _named("string", "io.debezium.time.ZonedTimestamp")),
    (_col(1, "c", T.VARCHAR, 40, collation=45), Modes(), "string"),
    (_col(1, "c", T.BLOB, 2, collation=63), Modes(), "bytes"),
    (_col(1, "c", T.BLOB, 2, collation=63), Modes(binary="hex"), "string"),
    (_col(1, "c", T.ENUM, enum_values=["a", "b"]), Modes(),
     _named("string", "io.debezium.data.Enum", **{"connect.version": 1, "connect.parameters": {"allowed": "a,b"}})),
    (_col(1, "c", T.SET, set_values=["x", "y"]), Modes(),
     _named("string", "io.debezium.data.EnumSet", **{"connect.version": 1,
                                                       "connect.parameters": {"allowed": "x,y"}})),
    (_col(1, "c", T.JSON, 4), Modes(), _named("string", "io.debezium.data.Json")),
    (_col(1, "c", T.VECTOR, 16), Modes(),
     {"type": "array", "items": "float", "connect.version": 1, "connect.name": "io.debezium.data.FloatVector"}),
    (_col(1, "c", T.GEOMETRY, 4, geometry_type=1), Modes(),
     {"type": "record", "name": "Point", "namespace": "io.debezium.data.geometry", "fields": [
         {"name": "x", "type": "double"}, {"name": "y", "type": "double"},
         {"name": "wkb", "type": ["null", "bytes"], "default": None},
         {"name": "srid", "type": ["null", "int"], "default": None}],
      "connect.doc": "Geometry (POINT)", "connect.version": 1, "connect.name": "io.debezium.data.geometry.Point"}),
]


@pytest.mark.parametrize(("column", "modes", "expected"), COLUMN_TYPES)
def test_each_column_type_becomes_the_avro_type_avrodata_gives_it(column, modes, expected) -> None:
    fields = _value_fields(_table(_col(0, "id", T.LONG, nullable=False), column), modes)
    assert fields["id"] == {"name": "id", "type": "int"}  # NOT NULL: no union, no default
    assert fields["c"] == {"name": "c", "type": ["null", expected], "default": None}


def test_the_envelope_key_and_transaction_schemas() -> None:
    tm = _table(_col(0, "id", T.LONG, nullable=False), _col(1, "n", T.VARCHAR, 40, collation=45))
    codec = table_codec(tm, "p", Modes())
    envelope = avro_schema(orjson.loads(codec.value_schema))
    assert [envelope[k] for k in ("type", "name", "namespace", "connect.version", "connect.name")] == \
        ["record", "Envelope", "p.db.t", 2, "p.db.t.Envelope"]
    before, after, source, transaction, op, *stamps = envelope["fields"]
    assert before == {"name": "before", "type": ["null", {
        "type": "record", "name": "Value", "fields": [  # the envelope's namespace: not written again
            {"name": "id", "type": "int"}, {"name": "n", "type": ["null", "string"], "default": None}],
        "connect.name": "p.db.t.Value"}], "default": None}
    assert after == {"name": "after", "type": ["null", "Value"], "default": None}  # defined once, then named
    assert source["type"]["namespace"] == "io.debezium.connector.mariadb" and source["type"]["name"] == "Source"
    # an optional field with a default: the type first in its union, the field defaulting to it
    snapshot = next(f for f in source["type"]["fields"] if f["name"] == "snapshot")
    assert snapshot["type"][1] == "null" and snapshot["default"] == "false"
    assert snapshot["type"][0]["connect.default"] == "false"
    assert list(snapshot["type"][0]) == ["type", "connect.version", "connect.parameters", "connect.default",
                                         "connect.name"]
    assert transaction["type"][1]["name"] == "block" and transaction["type"][1]["namespace"] == "event"
    assert op == {"name": "op", "type": "string"}
    assert stamps[0] == {"name": "ts_ms", "type": ["null", "long"], "default": None}
    assert avro_schema(orjson.loads(codec.key_schema)) == {  # type: ignore[arg-type]
        "type": "record", "name": "Key", "namespace": "p.db.t", "fields": [{"name": "id", "type": "int"}],
        "connect.name": "p.db.t.Key"}
    tx_value = avro_schema(TRANSACTION_VALUE_SCHEMA)
    collections = tx_value["fields"][3]
    assert collections == {"name": "data_collections", "type": ["null", {"type": "array", "items": ["null", {
        "type": "record", "name": "collection", "namespace": "event", "fields": [
            {"name": "data_collection", "type": "string"}, {"name": "event_count", "type": "long"}],
        "connect.version": 1, "connect.name": "event.collection"}]}], "default": None}  # optional items: a union
    parse_schema(tx_value)


def test_names_avro_does_not_allow_are_adjusted_as_debeziums_avro_mode() -> None:
    tm = _table(_col(0, "id", T.LONG, nullable=False), _col(1, "a b", T.BLOB, 2, collation=63), db="my-db",
                name="1t")
    codec = table_codec(tm, "p", Modes())
    envelope = avro_schema(orjson.loads(codec.value_schema))
    assert envelope["namespace"] == "p.my_db._t" and envelope["connect.name"] == "p.my_db._t.Envelope"
    assert [f["name"] for f in envelope["fields"][0]["type"][1]["fields"]] == ["id", "a_b"]
    registry = Registry()
    layout = AvroLayout(registry)
    payload = {"before": None, "after": codec.row({"id": 1, "a b": b"\x00\x01"}), "source": _SOURCE,
               "transaction": None, "op": "c", "ts_ms": 1, "ts_us": None, "ts_ns": None}
    decoded = registry.decode(layout.encode(codec.topic, "value", codec.value_schema, payload))
    assert decoded["after"] == {"id": 1, "a_b": b"\x00\x01"}


def test_maps_and_arrays() -> None:
    string_keys = {"type": "map", "keys": {"type": "string", "optional": False},
                   "values": {"type": "bytes", "optional": True}, "optional": False}
    assert avro_schema(string_keys) == {"type": "map", "values": ["null", "bytes"]}
    int_keys = {"type": "map", "keys": {"type": "int8", "optional": False},
                "values": {"type": "string", "optional": False}, "optional": True}
    assert avro_schema(int_keys) == ["null", {"type": "array", "items": {
        "type": "record", "name": "MapEntry", "namespace": "io.confluent.connect.avro", "fields": [
            {"name": "key", "type": {"type": "int", "connect.type": "int8"}}, {"name": "value", "type": "string"}]}}]
    registry, layout = Registry(), AvroLayout(Registry())
    layout.ids = registry
    for schema, payload, expected in ((string_keys, {"k": "AAE=", "n": None}, {"k": b"\x00\x01", "n": None}),
                                      (int_keys, [[1, "one"], [2, "two"]],  # JsonConverter: [key, value] pairs
                                       [{"key": 1, "value": "one"}, {"key": 2, "value": "two"}])):
        assert registry.decode(layout.encode("t", "value", orjson.dumps(schema), payload)) == expected


_SOURCE = {"version": "3.5.0.Final", "connector": "mariadb", "name": "p", "ts_ms": 0, "snapshot": "false",
           "db": "db", "sequence": None, "ts_us": 0, "ts_ns": 0, "table": "t", "server_id": 1, "gtid": None,
           "file": "f", "pos": 4, "row": 0, "thread": None, "query": None}


def test_confluent_wire_format_and_a_schema_registered_once_per_subject() -> None:
    registry = Registry()
    registry.ids["earlier"] = 1  # the registry's ids are its own: not 1 for ours
    layout = AvroLayout(registry)
    tm = _table(_col(0, "id", T.LONG, nullable=False))
    codec = table_codec(tm, "p", Modes())
    key = layout.encode(codec.topic, "key", codec.key_schema, {"id": 7})  # type: ignore[arg-type]
    assert key == b"\x00\x00\x00\x00\x02" + b"\x0e"  # magic, id 2 big-endian, zigzag varint 7
    assert layout.encode(codec.topic, "key", codec.key_schema, {"id": -1}) == b"\x00\x00\x00\x00\x02\x01"
    assert list(registry.subjects) == ["p.db.t-key"] and len(registry.subjects["p.db.t-key"]) == 1


@pytest.mark.parametrize("name", CORPUS_FILES)
@pytest.mark.parametrize("modes", [Modes(), Modes("string", "connect", "precise", "hex")])
def test_every_message_of_a_real_binlog_reads_back_as_the_json_formats_payload(name, modes) -> None:
    options = DebeziumOptions("p", modes, schemas=False, transactions=True)
    registry = Registry()
    if "json.binlog" in name:  # MySQL's partial JSON updates, in MINIMAL row images: Avro has no null there
        with pytest.raises(BinlogError, match=r"^change event of p.mysql.t \(value\): after.@1 is null but required "
                                              r"\(NOT NULL\): a partial row image\? .* binlog_row_image=FULL$"):
            debezium_messages(CORPUS / name, options, registry)
        return
    binary = debezium_messages(CORPUS / name, options, registry)
    plain = debezium_messages(CORPUS / name, options)
    assert len(binary) == len(plain)
    for ours, reference in zip(binary, plain, strict=True):
        assert ours.topic == reference.topic
        if ours.topic.startswith("p._"):  # binlake's own topics keep binlake's format
            assert ours == reference
            continue
        for got, want in ((ours.key, reference.key), (ours.value, reference.value)):
            if want is None:  # a tombstone; a table without a key
                assert got is None
            else:
                assert avro.same(registry.decode(got), orjson.loads(want)), (got, want)  # type: ignore[arg-type]
    for subject, versions in registry.subjects.items():
        assert subject.endswith(("-key", "-value")) and len(versions) == 1


def test_registry_settings(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"debezium.schema_registry_url: kafka.format debezium-avro needs"):
        load_config(None, {"kafka": {"format": "debezium-avro"}}, environ={})
    with pytest.raises(ConfigError, match=r"'ftp://r' is not an http\(s\) URL"):
        load_config(None, {"debezium": {"schema_registry_url": "ftp://r"}}, environ={})
    with pytest.raises(ConfigError, match=r"schema_registry_password needs debezium.schema_registry_username"):
        load_config(None, {"kafka": {"format": "debezium-avro"}, "debezium": {"schema_registry_url": "http://r"}},
                    environ={"BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_PASSWORD": "pw"})
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    cfg = load_config(None, {"kafka": {"format": "Debezium-Avro"}, "debezium": {
        "schema_registry_url": "https://u:inline@r:8081", "schema_registry_username": "u",
        "schema_registry_password_file": str(secret)}}, environ={})
    assert cfg.kafka.format == "debezium-avro" and cfg.debezium.registry_credentials() == ("u", "from-file")
    cfg = load_config(None, {"kafka": {"format": "debezium-avro"}, "debezium": {
        "schema_registry_url": "https://u:inline@r:8081", "schema_registry_username": "u"}},
        environ={"BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_PASSWORD": "env-secret"})
    assert cfg.debezium.registry_credentials() == ("u", "env-secret")
    shown = json.dumps(cfg.redacted())
    assert "env-secret" not in shown and "inline" not in shown and "env-secret" not in repr(cfg)
    assert cfg.redacted()["debezium"]["schema_registry_password"] == "***"


def test_registry_client_refusals_are_one_line_and_outages_are_retried(monkeypatch) -> None:
    from ingester.daemon.failures import kafka_failure
    from ingester.registry_client import RegistryClient, RegistryUnavailable, SchemaRefused

    closed = free_tcp_port()  # a port nothing listens on
    down = RegistryClient(f"http://u:secret@127.0.0.1:{closed}")
    with pytest.raises(RegistryUnavailable, match=rf"^schema registry http://u:\*\*\*@127.0.0.1:{closed}: ") as exc:
        down.schema_id("t-value", "{}")
    assert kafka_failure(exc.value)  # retried from the last checkpoint, like Kafka
    answers = iter([(409, {"error_code": 409, "message": "Schema being registered is incompatible"}),
                    (200, {"compatibilityLevel": "FULL"}), (200, {"id": 7}), (401, {"message": "no"})])
    client = RegistryClient("https://registry:8081/", "user", "pw")
    calls: list[tuple[str, str]] = []

    def answer(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        calls.append((method, path))
        return next(answers)

    monkeypatch.setattr(client, "_call", answer)
    with pytest.raises(SchemaRefused, match=r"^schema of subject p.db.t-value refused by the registry at "
                                            r"https://registry:8081: incompatible with its earlier versions "
                                            r"\(compatibility FULL\)$"):
        client.schema_id("p.db.t-value", "{}")
    assert calls == [("POST", "/subjects/p.db.t-value/versions"), ("GET", "/config/p.db.t-value?defaultToGlobal=true")]
    # no later schema of a subject that failed is registered (it would come before the failed one after a restart)
    with pytest.raises(SchemaRefused, match=r"\(compatibility FULL\)$"):
        client.schema_id("p.db.t-value", '{"type": "int"}')
    assert len(calls) == 2
    assert client.schema_id("p.db.u-value", "{}") == 7 == client.schema_id("p.db.u-value", "{}")  # cached
    assert len(calls) == 3
    with pytest.raises(SchemaRefused, match=r"HTTP 401: the credentials .* were refused$"):
        client.schema_id("p.db.t-key", "{}")
    assert client._headers["Authorization"] == "Basic " + base64.b64encode(b"user:pw").decode()


class _Asked(Registry):
    """The pairs ``prepare`` was given, and the order ``schema_id`` was asked for them."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[tuple[str, str]] = []
        self.asked: list[tuple[str, str]] = []

    def prepare(self, schemas: Any) -> None:
        self.prepared += schemas

    def schema_id(self, subject: str, schema: str) -> int:
        if (subject, schema) not in self.asked:
            self.asked.append((subject, schema))
        return super().schema_id(subject, schema)


def test_new_tables_schemas_are_prepared_once_in_the_order_their_events_need_them() -> None:
    """The schemas of the tables a Kafka transaction meets first are given to ``prepare`` (registered side by
    side) once, each subject's in the order its events ask for them (the order of its versions)."""
    prepared = 0
    for name in CORPUS_FILES:
        if "json.binlog" in name:  # partial row images: no Avro (above)
            continue
        for transactions in (False, True):
            registry = _Asked()
            debezium_messages(CORPUS / name, DebeziumOptions("p", transactions=transactions), registry)
            assert len(set(registry.prepared)) == len(registry.prepared), name
            assert set(registry.prepared) <= set(registry.asked), name
            for subject in {s for s, _ in registry.prepared}:
                asked = [pair for pair in registry.asked if pair[0] == subject and pair in registry.prepared]
                assert [pair for pair in registry.prepared if pair[0] == subject] == asked, (name, subject)
            prepared += len(registry.prepared)
    assert prepared or native.native is None


def test_a_registry_found_down_fails_the_registrations_queued_behind_without_asking(monkeypatch) -> None:
    """prepare's registrations: once one finds the registry down (a retried failure), those still queued fail with
    it at once (600 new subjects would otherwise each wait for the registry's timeout); the next prepare asks
    again, but for the subjects that failed (their versions wait for the daemon's retry, in order)."""
    import threading
    import time

    from ingester.registry_client import _WORKERS, RegistryClient, RegistryUnavailable

    client = RegistryClient("http://127.0.0.1:9")
    calls: list[str] = []
    lock = threading.Lock()

    def down(subject: str, schema: str) -> int:
        with lock:
            calls.append(subject)
        time.sleep(0.02)
        raise RegistryUnavailable("schema registry http://127.0.0.1:9: down")

    monkeypatch.setattr(client, "_register", down)
    pairs = [(f"t{i}-value", "{}") for i in range(100)]
    client.prepare(pairs)
    with pytest.raises(RegistryUnavailable, match="down"):
        client.schema_id(*pairs[0])  # the daemon stops here, and retries from its checkpoint
    assert client._pool is not None
    client._pool.shutdown(wait=True)
    assert len(calls) <= _WORKERS  # those under way when the first failed, not all 100
    monkeypatch.setattr(client, "_register", lambda subject, schema: 7)
    client._pool = None
    others = [(f"u{i}-value", "{}") for i in range(3)]
    client.prepare([*others, ("t0-value", '{"type": "int"}')])
    assert [client.schema_id(*pair) for pair in others] == [7, 7, 7]
    # a subject whose version failed registers no later one (it would come first once the daemon retries)
    with pytest.raises(RegistryUnavailable, match="down"):
        client.schema_id("t0-value", '{"type": "int"}')


@pytest.mark.parametrize("avro", [False, True])
def test_an_event_named_in_an_error_is_read_back_from_its_message(avro) -> None:
    """describe() names the table and binlog position of a change event, in either layout; a message it cannot
    read is named by its topic."""
    from ingester.records.builder import Record
    from ingester.records.debezium.encoder import DebeziumAvro, DebeziumJson
    from ingester.records.outbound import Message
    from tests.harness.records import build_records

    options = DebeziumOptions("p", tombstones=False)
    registry = Registry()
    encoder = DebeziumAvro(options, registry, lambda n: "mariadb-bin.000001", 900_000) if avro else \
        DebeziumJson(options, lambda n: "mariadb-bin.000001", 900_000)
    _, out, _ = build_records(CORPUS / CORPUS_FILES[3])  # MariaDB
    messages = [m for r in out if isinstance(r, Record) for m in encoder.messages(r)]
    event = next(m for m in [*messages, *encoder.before_commit()] if m.value is not None and m.topic.count(".") == 2)
    source = (registry.decode(event.value) if avro else orjson.loads(event.value)["payload"])["source"]
    assert encoder.describe(event) == (f"the change event of `{source['db']}`.`{source['table']}` at binlog "
                                       f"mariadb-bin.000001:{source['pos']} row {source['row']}")
    assert encoder.describe(Message(event.topic, None, b"\x00\x00\x00\x00\x63garbage", ())) == \
        f"a message of {event.topic}"


# NOT NULL columns with a literal DEFAULT (the schema history's): the field's default as Debezium 3.5.0 registers
# it through an Avro converter (seen in test_debezium_avro_format.py); none where binlake gives none
DEFAULTS = [
    (_col(1, "c", T.LONG, default="7"), {"type": "int", "connect.default": 7}, 7),
    (_col(1, "c", T.TINY, default=1), {"type": "int", "connect.default": 1, "connect.type": "int16"}, 1),
    (_col(1, "c", T.NEWDECIMAL, (6 << 8) | 2, default="1.5"),
     {"type": "bytes", "scale": 2, "precision": 6, "connect.version": 1,
      "connect.parameters": {"scale": "2", "connect.decimal.precision": "6"}, "connect.default": "\x00\x96",
      "connect.name": DECIMAL, "logicalType": "decimal"}, "\x00\x96"),
    (_col(1, "c", T.DATE, default="2024-02-29"), _named("int", "io.debezium.time.Date", **{
        "connect.version": 1, "connect.default": 19782}), 19782),
    (_col(1, "c", T.DATETIME2, 3, default="2001-02-03 04:05:06.789"), _named("long", "io.debezium.time.Timestamp", **{
        "connect.version": 1, "connect.default": 981173106789}), 981173106789),
    (_col(1, "c", T.TIME2, 0, default="01:02:03"), _named("long", "io.debezium.time.MicroTime", **{
        "connect.version": 1, "connect.default": 3723000000}), 3723000000),
    (_col(1, "c", T.BIT, 3, default=5), {"type": "bytes", "connect.version": 1, "connect.parameters": {"length": "3"},
                                          "connect.default": "\x05", "connect.name": "io.debezium.data.Bits"}, "\x05"),
    (_col(1, "c", T.FLOAT, default="1.25"), {"type": "float", "connect.default": 1.25}, 1.25),
    (_col(1, "c", T.ENUM, enum_values=["a", "b"], default="b"), _named("string", "io.debezium.data.Enum", **{
        "connect.version": 1, "connect.parameters": {"allowed": "a,b"}, "connect.default": "b"}), "b"),
    (_col(1, "c", T.SET, set_values=["x", "y", "z"], default="z,x"), _named("string", "io.debezium.data.EnumSet", **{
        "connect.version": 1, "connect.parameters": {"allowed": "x,y,z"}, "connect.default": "x,z"}), "x,z"),
    (_col(1, "c", T.VARCHAR, 40, collation=45, default="n'o"), {"type": "string", "connect.default": "n'o"}, "n'o"),
    # none: a TIMESTAMP literal (of the DDL session's time zone), bytes, what is not the type's
    (_col(1, "c", T.TIMESTAMP2, 0, default="2020-01-01 00:00:00"), _named("string", "io.debezium.time.ZonedTimestamp"),
     None),
    (_col(1, "c", T.BLOB, 2, collation=63, default="ab"), "bytes", None),
    (_col(1, "c", T.ENUM, enum_values=["a"], default="z"), _named("string", "io.debezium.data.Enum", **{
        "connect.version": 1, "connect.parameters": {"allowed": "a"}}), None),
    (_col(1, "c", T.DATE, default="2024-2-9"), _named("int", "io.debezium.time.Date"), None),
    (_col(1, "c", T.LONG, default="x"), "int", None),
]


@pytest.mark.parametrize(("column", "expected", "default"), DEFAULTS)
def test_a_not_null_columns_default_is_its_fields_default(column, expected, default) -> None:
    column.nullable = False
    fields = _value_fields(_table(_col(0, "id", T.LONG, nullable=False), column), Modes())
    assert fields["c"] == {"name": "c", "type": expected, **({"default": default} if default is not None else {})}
    column.nullable = True  # a nullable column's field has none (Connect gives a null field its default)
    assert _value_fields(_table(_col(0, "id", T.LONG, nullable=False), column), Modes())["c"]["default"] is None


def test_a_default_is_written_after_optional_as_jsonconverter_does() -> None:
    tm = _table(_col(0, "id", T.LONG, nullable=False), _col(1, "d", T.DATE, nullable=False, default="1970-01-02"))
    value = orjson.loads(table_codec(tm, "p", Modes()).value_schema)
    assert list(value["fields"][0]["fields"][1].items()) == [
        ("type", "int32"), ("optional", False), ("default", 1), ("name", "io.debezium.time.Date"), ("version", 1),
        ("field", "d")]
