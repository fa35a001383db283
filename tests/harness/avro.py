"""Reading binlake's debezium-avro messages as a consumer does (fastavro's reader, not our writer), and comparing
them with the debezium-json payload of the same change event."""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Callable
from typing import Any

from fastavro import parse_schema, schemaless_reader

_F32 = struct.Struct("<f")


def read(message: bytes, schema_text: Callable[[int], str]) -> Any:
    """Confluent's wire format: magic byte 0, the schema id (``schema_text`` gives the registry's schema of an
    id), fastavro's reading of the rest; logical types read as their underlying values, as JsonConverter
    writes them."""
    assert message[0] == 0, "not Confluent's wire format"
    (schema_id,) = struct.unpack(">I", message[1:5])
    plain = json.loads(schema_text(schema_id).replace('"logicalType":', '"_logicalType":'))
    return schemaless_reader(io.BytesIO(message[5:]), parse_schema(plain))


def avro_name(name: str) -> str:
    """Avro's names: a letter or _, then letters, digits or _; Debezium's avro adjustment puts _ for the others."""
    return "".join(c if c.isascii() and (c.isalpha() or c == "_" or (i and c.isdigit())) else "_"
                   for i, c in enumerate(name))


def same(avro: Any, connect_json: Any) -> bool:
    """fastavro's reading equals JsonConverter's payload: bytes are base64 there, FLOAT a float32 either way,
    field names adjusted for Avro."""
    if isinstance(avro, bytes):
        return isinstance(connect_json, str) and base64.b64decode(connect_json) == avro
    if isinstance(avro, dict):
        renamed = {avro_name(k): v for k, v in connect_json.items()} if isinstance(connect_json, dict) else None
        return renamed is not None and avro.keys() == renamed.keys() and \
            all(same(v, renamed[k]) for k, v in avro.items())
    if isinstance(avro, list):
        return isinstance(connect_json, list) and len(avro) == len(connect_json) and \
            all(same(a, b) for a, b in zip(avro, connect_json, strict=True))
    if isinstance(avro, float) and isinstance(connect_json, float | int) and avro != connect_json:
        return _F32.pack(avro) == _F32.pack(connect_json)
    return avro == connect_json and type(avro) is type(connect_json)


class Registry:
    """SchemaIds in memory: an id per distinct schema text, the versions of each subject."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.subjects: dict[str, list[str]] = {}

    def schema_id(self, subject: str, schema: str) -> int:
        versions = self.subjects.setdefault(subject, [])
        if schema not in versions:
            versions.append(schema)
        return self.ids.setdefault(schema, len(self.ids) + 1)

    def prepare(self, schemas: Any) -> None:
        """Nothing ahead: each schema is registered when ``schema_id`` asks for it (as the order of first use)."""

    def decode(self, message: bytes) -> Any:
        return read(message, lambda schema_id: next(t for t, i in self.ids.items() if i == schema_id))


def avro_of(connect: dict[str, Any], json_prefix: str, prefix: str) -> str:
    """The Avro schema (text) of a debezium-json event's Connect schema, under the Avro topics' prefix."""
    from ingester.records.debezium.avro_schema import avro_schema

    return json.dumps(avro_schema(connect), separators=(",", ":")).replace(f'"{json_prefix}.', f'"{prefix}.')


def check_subject(registry: Any, subject: str, json_messages: list[Any], avro_messages: list[Any], index: int,
                  json_prefix: str, prefix: str) -> int:
    """A subject (``index`` 0: the messages' keys, 1: values) holds the Avro schemas of the debezium-json messages'
    Connect schemas, in the order of the messages (the binlog's), each once, and each debezium-avro message of the
    same change events names the id of its own: how many versions it has."""
    wanted = list(dict.fromkeys(avro_of(json.loads(m[index])["schema"], json_prefix, prefix) for m in json_messages))
    versions = registry.request("GET", f"/subjects/{subject}/versions")
    assert versions == list(range(1, len(wanted) + 1)), subject
    ids = {}
    for version, schema in zip(versions, wanted, strict=True):
        got = registry.request("GET", f"/subjects/{subject}/versions/{version}")
        assert json.loads(got["schema"]) == json.loads(schema), f"{subject} version {version}"
        ids[schema] = got["id"]
    for message, reference in zip(avro_messages, json_messages, strict=True):
        schema = avro_of(json.loads(reference[index])["schema"], json_prefix, prefix)
        assert int.from_bytes(message[index][1:5], "big") == ids[schema], subject
    return len(versions)


def publish_json_and_avro(server: Any, kafka: Any, registry: Any, monkeypatch: Any, include: str, start: Any,
                          prefixes: tuple[str, str]) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The server's binlog from ``start`` published by the daemon in debezium-json (``prefixes[0]``) and in
    debezium-avro (``prefixes[1]``), each in one Kafka transaction (kafka.batch_ms): their messages by topic."""
    from .daemon import run_daemon
    from .debezium import messages

    for name, value in {"BINLAKE_FILTERS_INCLUDE": include, "BINLAKE_SOURCE_START_FILE": start.file,
                        "BINLAKE_SOURCE_START_POSITION": str(start.position), "BINLAKE_KAFKA_BATCH_MS": "600000",
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": registry.url}.items():
        monkeypatch.setenv(name, value)  # batch_ms: everything in the Kafka transaction of the end's commit
    for prefix, kind in zip(prefixes, ("debezium-json", "debezium-avro"), strict=True):
        monkeypatch.setenv("BINLAKE_KAFKA_FORMAT", kind)
        run_daemon(server, kafka, prefix)
    return messages(kafka, prefixes[0]), messages(kafka, prefixes[1])
