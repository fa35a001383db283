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
