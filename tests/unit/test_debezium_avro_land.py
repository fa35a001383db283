"""Landing debezium-avro topics without servers: the registry's Avro schemas (as binlake's avro_schema.py writes
them from AvroData's rules) turned back into the Connect schemas binlake's debezium-json layout embeds, for every
column type in every value-handling mode; Confluent's wire format and its errors as undecodable records; every
real corpus binlog through binlake's debezium-avro encoder and the land job's decoder: the same record rows as
its debezium-json, repeats dropped. The registry over HTTP, the daemon and the land job:
tests/integration/test_land_debezium_avro.py."""

from __future__ import annotations

import base64
import itertools
import pickle
import re
from typing import Any

import orjson
import pyarrow as pa
import pytest

from ingester.codec.constants import ColumnType as T
from ingester.codec.table_map import Column, TableMap
from ingester.records.debezium.avro_schema import adjusted_field, avro_schema
from ingester.records.debezium.columns import Modes
from ingester.records.debezium.encoder import DebeziumOptions
from ingester.records.debezium.envelope import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA, table_codec
from ingester.registry_client import RegistryClient, UnknownSchema
from streaming_job.decode.debezium_avro import AvroEvents, connect_schema
from streaming_job.decode.debezium_decode import DebeziumReader, decode_debezium_partition
from streaming_job.decode.decode import _Out
from streaming_job.source.source_formats import topic_pattern
from tests.corpus import CORPUS
from tests.harness.records import CORPUS_FILES, debezium_messages, source_batch


class Registry:
    """A schema registry in memory: the SchemaIds the encoder registers with, and the look-up by id the land
    job's decoder makes (RegistryClient.schema's answers)."""

    _registries = itertools.count()

    def __init__(self) -> None:
        self.url = f"memory:{next(self._registries)}"  # the decoder keeps schemas per registry and id
        self.ids: dict[str, int] = {}
        self.asked: list[int] = []

    def schema_id(self, subject: str, schema: str) -> int:
        return self.ids.setdefault(schema, len(self.ids) + 100)

    def prepare(self, schemas: Any) -> None:
        """Each schema registered when asked for."""

    def schema(self, schema_id: int) -> str:
        self.asked.append(schema_id)
        for text, found in self.ids.items():
            if found == schema_id:
                return text
        raise UnknownSchema(f"schema id {schema_id} is not in the registry at {self.url}")


def _codec(registry: Registry) -> AvroEvents:
    return AvroEvents(registry)  # type: ignore[arg-type]


def _col(index: int, name: str, code: int, meta: int = 0, nullable: bool = True, **kw: Any) -> Column:
    return Column(index=index, name=name, type=code, binlog_type=code, meta=meta, nullable=nullable, **kw)


# every column type binlake's Debezium formats know (docs/DEBEZIUM.md, "Column types"), nullable or not
_TYPES = [
    (T.TINY, 0, {}), (T.SHORT, 0, {"unsigned": True}), (T.INT24, 0, {}), (T.LONG, 0, {"unsigned": True}),
    (T.LONGLONG, 0, {}), (T.LONGLONG, 0, {"unsigned": True}), (T.FLOAT, 4, {}), (T.DOUBLE, 8, {}),
    (T.BIT, 1, {}), (T.BIT, (2 << 8) | 1, {}), (T.BIT, 8 << 8, {}), (T.YEAR, 0, {}),
    (T.NEWDECIMAL, (5 << 8) | 2, {}), (T.NEWDECIMAL, (65 << 8) | 30, {}), (T.NEWDECIMAL, (10 << 8), {}),
    (T.DATE, 0, {}), (T.TIME2, 0, {}), (T.TIME2, 3, {}), (T.TIME2, 6, {}), (T.DATETIME2, 0, {}),
    (T.DATETIME2, 2, {}), (T.DATETIME2, 6, {}), (T.TIMESTAMP2, 0, {}), (T.TIMESTAMP2, 6, {}),
    (T.VARCHAR, 40, {"collation": 45}), (T.VARCHAR, 40, {"collation": 63}), (T.BLOB, 2, {"collation": 63}),
    (T.BLOB, 4, {"collation": 45}), (T.ENUM, 1, {"enum_values": ["a", "b"]}),
    (T.SET, 1, {"set_values": ["x", "y"]}), (T.JSON, 4, {}), (T.VECTOR, 16, {"vector_dimensions": 4}),
    (T.GEOMETRY, 4, {"geometry_type": 1}), (T.GEOMETRY, 4, {}),
]
_MODES = [Modes(), Modes(bigint_unsigned="precise"), Modes(decimal="string"), Modes(decimal="double"),
          Modes(time="connect"), Modes(time="adaptive"), Modes(binary="hex"), Modes(binary="base64")]


def _zoo(is_mariadb: bool = True) -> TableMap:
    columns = [_col(0, "id", T.LONG, nullable=False), _col(1, "k2", T.VARCHAR, 40, nullable=False, collation=45)]
    for code, meta, kw in _TYPES:
        for nullable in (True, False):
            columns.append(_col(len(columns), f"c{len(columns)}", code, meta, nullable, **kw))
    return TableMap(0, 0, "db", "zoo", columns, [(0, 0), (1, 0)], has_names=True, is_mariadb=is_mariadb)


@pytest.mark.parametrize("modes", _MODES, ids=lambda m: f"{m.decimal}-{m.time}-{m.bigint_unsigned}-{m.binary}")
def test_connect_schemas_come_back_from_their_avro_form(modes) -> None:
    """The Avro schemas a registry holds for a table of every column type: their Connect schema read back is the
    one binlake's debezium-json embeds (key and value), names, versions, parameters and defaults included."""
    for is_mariadb in (True, False):
        codec = table_codec(_zoo(is_mariadb), "p", modes)
        for schema in (codec.value_schema, codec.key_schema):
            connect = orjson.loads(schema)  # type: ignore[arg-type]
            assert connect_schema(avro_schema(connect)) == connect
    for connect in (TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA):
        assert connect_schema(avro_schema(connect)) == connect


def test_connect_schemas_from_avro_without_connect_metadata_and_maps() -> None:
    """AvroData's logical types alone (a producer with connect.meta.data=false, or not Kafka Connect at all) say
    Connect's Decimal/Date/Time/Timestamp; Avro's micros types Debezium's; maps of non-string keys are arrays of
    MapEntry records; a bytes default is ISO-8859-1 text in Avro, base64 in Connect's JSON."""
    avro = {"type": "record", "name": "Value", "namespace": "p.db.t", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 0}},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "clock_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "raw", "type": "bytes", "default": "\u00ff\u0001"},
        {"name": "tags", "type": {"type": "map", "values": "long"}},
        {"name": "by_int", "type": {"type": "array", "items": {"type": "record", "name": "MapEntry",
                                                               "namespace": "io.confluent.connect.avro", "fields": [
                                                                   {"name": "key", "type": "int"},
                                                                   {"name": "value", "type": "string"}]}}},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}}]}
    fields = {f["field"]: {k: v for k, v in f.items() if k != "field"} for f in connect_schema(avro)["fields"]}
    date = "org.apache.kafka.connect.data."
    assert fields == {
        "d": {"type": "bytes", "optional": False, "name": f"{date}Decimal", "version": 1,
              "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
        "wide": {"type": "bytes", "optional": False, "name": f"{date}Decimal", "version": 1,
                 "parameters": {"scale": "0"}},
        "day": {"type": "int32", "optional": True, "name": f"{date}Date", "version": 1},
        "clock": {"type": "int32", "optional": False, "name": f"{date}Time", "version": 1},
        "at": {"type": "int64", "optional": False, "name": f"{date}Timestamp", "version": 1},
        "clock_us": {"type": "int64", "optional": False, "name": "io.debezium.time.MicroTime", "version": 1},
        "at_us": {"type": "int64", "optional": False, "name": "io.debezium.time.MicroTimestamp", "version": 1},
        "raw": {"type": "bytes", "optional": False, "default": "/wE="},
        "tags": {"type": "map", "keys": {"type": "string", "optional": False},
                 "values": {"type": "int64", "optional": False}, "optional": False},
        "by_int": {"type": "map", "keys": {"type": "int32", "optional": False},
                   "values": {"type": "string", "optional": False}, "optional": False},
        "fx": {"type": "bytes", "optional": False, "name": "p.db.t.Four"}}


_SOURCE = {"version": "3.5.0.Final", "connector": "mariadb", "name": "p", "ts_ms": 1_700_000_000_000,
           "snapshot": "false", "db": "db", "sequence": None, "ts_us": None, "ts_ns": None, "table": "t",
           "server_id": 1, "gtid": "0-1-5", "file": "mysql-bin.000003", "pos": 400, "row": 0, "thread": None,
           "query": None}


def _table_messages(registry: Registry) -> tuple[bytes, bytes, bytes]:
    """A key and two change events (the second a repeat of the first) in Confluent's wire format."""
    from ingester.records.debezium.layouts import AvroLayout

    tm = TableMap(0, 0, "db", "t", [_col(0, "id", T.LONG, nullable=False),
                                    _col(1, "b", T.BLOB, 2, collation=63)], [(0, 0)], has_names=True,
                  is_mariadb=True)
    codec = table_codec(tm, "p", Modes())
    layout = AvroLayout(registry)
    payload = {"before": None, "after": codec.row({"id": 7, "b": b"\x00\xff"}), "source": _SOURCE,
               "transaction": None, "op": "c", "ts_ms": 1, "ts_us": None, "ts_ns": None}
    key = layout.encode(codec.topic, "key", codec.key_schema, {"id": 7})  # type: ignore[arg-type]
    value = layout.encode(codec.topic, "value", codec.value_schema, payload)
    return key, value, value


def test_wire_format_errors_are_undecodable_records_naming_why() -> None:
    registry = Registry()
    key, value, _ = _table_messages(registry)
    codec = _codec(registry)
    reader = DebeziumReader({}, codec)
    out = _Out()
    unknown = value[:1] + (999).to_bytes(4, "big") + value[5:]
    for offset, (k, v) in enumerate([(key, b"{\"schema\":{}}"), (key, b"\x00\x00"), (key, unknown), (key, unknown),
                                     (key, value[:-3]), (key, value + b"\x00"), (b"7", value), (key, value)]):
        reader.feed(out, "p.db.t", 0, offset, k, v)
    reader.finish(out)
    errors = {r.offset: r.error for r in out.rows if r.kind == "error"}
    assert errors[0] == ("DebeziumError: the value is not in Confluent's Avro wire format (first byte 0x7b, 13 "
                         "bytes; a magic byte 0 and a 4-byte schema id expected): not a debezium-avro message")
    assert "(first byte 0x00, 2 bytes;" in errors[1]
    assert errors[2] == errors[3] == f"DebeziumError: schema id 999 is not in the registry at {registry.url}"
    assert registry.asked.count(999) == 1  # asked once per task
    assert errors[4].startswith("DebeziumError: not the Avro binary encoding of schema id 101: ")
    assert errors[5] == "DebeziumError: 1 bytes after the Avro value of schema id 101"
    assert errors[6].startswith("DebeziumError: the key is not in Confluent's Avro wire format (first byte 0x37")
    rows = [r for r in out.rows if r.kind == "row"]
    assert len(errors) == 7 and len(rows) == 1 and rows[0].rows == 1
    assert orjson.loads(rows[0].schema) == {"columns": [["id", "int"], ["b", "binary"]], "pk": ["id"]}
    images = pa.ipc.open_stream(rows[0].data).read_all()
    assert images.column("after").to_pylist() == [{"id": 7, "b": b"\x00\xff"}]


def test_the_codec_pickles_without_its_caches_and_digests_like_the_reader() -> None:
    registry = Registry()
    key, value, repeat = _table_messages(registry)
    codec = _codec(registry)
    client = RegistryClient("https://u:secret@registry:8081", "u", "pw", None)
    client._context = object()  # type: ignore[assignment]  # an SSL context does not pickle
    shipped = pickle.loads(pickle.dumps(AvroEvents(client)))
    assert shipped.registry.url == client.url and shipped.registry._context is None
    reader = DebeziumReader({}, codec)
    out = _Out()
    for offset, v in enumerate([value, repeat]):
        reader.feed(out, "p.db.t", 0, offset, key, v)
    reader.finish(out)
    assert reader.repeats == 1
    mark = out.rows[0].mark
    assert mark.endswith(codec.digest(value))  # what the driver reads again from Kafka at the newest position


def _images(rows: list[dict[str, Any]], rename: Any = str) -> list[Any]:
    """The record rows' tables, schemas and changes (``rename``: of the column names)."""
    out = []
    for r in rows:
        schema = orjson.loads(r["schema"])
        schema = {**schema, "columns": [[rename(n), t] for n, t in schema["columns"]],
                  "pk": [rename(n) for n in schema["pk"]]}
        changes = pa.ipc.open_stream(r["data"]).read_all().drop_columns(["kafka_offset"]).to_pylist()
        for change in changes:
            for image in ("before", "after"):
                if change[image] is not None:
                    change[image] = {rename(k): v for k, v in change[image].items()}
        out.append((r["topic"], r["db"], r["tbl"], r["rows"], r["newest"], schema, changes))
    return out


@pytest.mark.parametrize("name", [n for n in CORPUS_FILES if "json.binlog" not in n])
def test_binlakes_debezium_avro_of_a_real_binlog_lands_as_its_debezium_json(name) -> None:
    """Every row change of the binlog, published twice (the second time all repeats), lands as the same record
    rows (schema, images, positions) as the debezium-json of the same binlog. (json.binlog's partial row images
    have no Avro form: tests/unit/test_debezium_avro.py.)"""
    registry = Registry()
    tables = re.compile(topic_pattern("p", "debezium-avro"))
    binary = [m for m in debezium_messages(CORPUS / name, DebeziumOptions("p"), registry) if tables.fullmatch(m.topic)]
    plain = [m for m in debezium_messages(CORPUS / name, DebeziumOptions("p")) if tables.fullmatch(m.topic)]
    decoded = [r for b in decode_debezium_partition([source_batch(binary * 2)], {}, codec=_codec(registry))
               for r in b.to_pylist()]
    reference = [r for b in decode_debezium_partition([source_batch(plain * 2)], {}) for r in b.to_pylist()]
    assert [r["error"] for r in decoded if r["kind"] != "row"] == []
    assert sum(r["rows"] for r in decoded) == sum(1 for m in plain if m.value is not None)
    assert _images(decoded) == _images(reference, adjusted_field)  # Avro's names: @1 is _1
    assert len(registry.asked) == len(set(registry.asked))  # each schema asked once


def test_the_registry_setting_and_failures_are_one_line(monkeypatch, tmp_path) -> None:
    from ingester.cli.land import settings
    from ingester.config import ConfigError, load_config
    from ingester.registry_client import SchemaRefused
    from streaming_job.runtime.errors import registry_error

    with pytest.raises(ConfigError, match=r"^debezium.schema_registry_url: land.source_format debezium-avro needs a "
                                          r"schema registry \(its Confluent-compatible API"):
        load_config(None, {"land": {"source_format": "debezium-avro"}}, environ={})
    secret = tmp_path / "pw"
    secret.write_text("from-file\n")
    cfg = load_config(None, {"land": {"source_format": "Debezium-Avro", "lake": "/l", "checkpoint": "/c"},
                             "debezium": {"schema_registry_url": "https://u:inline@r:8081",
                                          "schema_registry_username": "u",
                                          "schema_registry_password_file": str(secret)}}, environ={})
    job = settings(cfg, None)
    assert job.registry.url == "https://r:8081" and job.registry.shown == "https://u:***@r:8081"
    assert job.registry._headers["Authorization"] == "Basic " + base64.b64encode(b"u:from-file").decode()
    by_url = RegistryClient("http://me:p%40ss@r:8081/apis/ccompat/v7/")  # user:password@ of the URL
    assert by_url.url == "http://r:8081/apis/ccompat/v7" and by_url.shown == "http://me:***@r:8081/apis/ccompat/v7"
    assert by_url._headers["Authorization"] == "Basic " + base64.b64encode(b"me:p@ss").decode()
    assert "from-file" not in repr(job) and "inline" not in str(cfg.redacted())
    answers = iter([(404, {"error_code": 40403, "message": "Schema not found"}), (401, {"message": "no"}),
                    (200, {"schema": '"string"'})])
    monkeypatch.setattr(job.registry, "_call", lambda method, path, body=None: next(answers))
    with pytest.raises(UnknownSchema, match=r"^schema id 5 is not in the registry at https://u:\*\*\*@r:8081$"):
        job.registry.schema(5)
    with pytest.raises(SchemaRefused, match=r"^schema id 5 refused by the registry at https://u:\*\*\*@r:8081: "
                                            r"HTTP 401: the credentials .* were refused$"):
        job.registry.schema(5)
    assert job.registry.schema(5) == '"string"'
    # what a decode task raised, in the text of Spark's failure: the registry's own line
    spark_text = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function.\n"
                  "Traceback (most recent call last):\n  ...\ningester.registry_client.RegistryUnavailable: schema "
                  "registry http://u:***@r:8081: [Errno 111] Connection refused\n\tat org.apache.spark...")
    error = registry_error(spark_text)
    assert error is not None and str(error) == (
        "schema registry http://u:***@r:8081: [Errno 111] Connection refused; the micro-batch is not committed: "
        "run again once the registry answers")
    assert registry_error("[CANNOT_PARSE] something else") is None
