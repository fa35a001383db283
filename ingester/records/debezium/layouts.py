"""How a Debezium change event's key and value become bytes: the converter Kafka Connect would be configured
with, as strategies of one interface.

- ``JsonLayout``: Kafka Connect's JsonConverter, ``{"schema":...,"payload":...}`` or, without schemas, the
  payload alone.
- ``AvroLayout``: Confluent's AvroConverter: the Connect schema as Avro (avro_schema.py) registered in a schema
  registry under ``<topic>-key`` / ``<topic>-value`` (TopicNameStrategy), each message in Confluent's wire
  format: a zero byte, the schema's registry id (4 bytes, big-endian), the Avro binary encoding.

A payload comes either as Python structures in JsonConverter's form (bytes as base64 text) or as its JSON
text (what the native renderer writes); Avro transcodes the JSON text in C (``_avro.h``, its schema's program
compiled by avro_program.py) where the extension is built, the Python path (orjson, payload_fixer, fastavro)
writing the same bytes for what C leaves to it. Pure: the registry is behind ``SchemaIds``, which the daemon
implements with HTTP (ingester/registry_client.py).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from ...codec.errors import BinlogError
from ...extensions import load as load_extension
from .avro_program import avro_program
from .avro_schema import Fixer, avro_schema, missing_value, payload_fixer

_native = load_extension("ingester.records.debezium._native")

Role = Literal["key", "value"]


class Layout(Protocol):
    ahead: bool  # prepare makes something ready (Avro: registrations): worth calling as soon as a table is mapped

    def encode(self, topic: str, role: Role, schema: bytes, payload: Any) -> bytes:
        """A message's key or value: ``payload`` (Python structures) of the Connect ``schema`` (JSON)."""

    def encode_json(self, topic: str, role: Role, schema: bytes, payload: bytes) -> bytes:
        """The same of a payload given as its JSON text."""

    def json_frame(self, schema: bytes) -> tuple[bytes, bytes] | None:
        """What goes before and after a payload's JSON text to make ``encode_json``'s bytes, when that is all it
        does (the native composer puts messages together with it); None when the layout re-encodes the JSON."""

    def transcoder(self, topic: str, role: Role, schema: bytes) -> tuple[bytes, bytes] | None:
        """The native transcoder's program and header of ``encode_json`` (the Avro of a payload's JSON text), for
        the native composer (a schema is registered here); None when there is none."""

    def payload(self, data: bytes) -> Any:
        """The payload of one of its messages (Python structures), read back for an error that names the event;
        raises ValueError for bytes it did not write."""

    def prepare(self, schemas: Iterable[tuple[str, Role, bytes]]) -> None:
        """Start making ready what messages of these (topic, role, Connect schema) need, in the order given (the
        order messages will need them; Avro: their registrations, side by side); the layout may ignore them.
        Thread-safe: tables are prepared as the daemon maps them, while the publisher's thread encodes."""


class JsonLayout:
    """Kafka Connect's JsonConverter (``schemas`` is its schemas.enable)."""

    ahead = False

    def __init__(self, schemas: bool) -> None:
        self.schemas = schemas

    def encode(self, topic: str, role: Role, schema: bytes, payload: Any) -> bytes:
        return self.encode_json(topic, role, schema, orjson.dumps(payload))

    def encode_json(self, topic: str, role: Role, schema: bytes, payload: bytes) -> bytes:
        if not self.schemas:
            return payload
        return b'{"schema":' + schema + b',"payload":' + payload + b"}"

    def json_frame(self, schema: bytes) -> tuple[bytes, bytes]:
        return (b'{"schema":' + schema + b',"payload":', b"}") if self.schemas else (b"", b"")

    def transcoder(self, topic: str, role: Role, schema: bytes) -> None:
        return None

    def payload(self, data: bytes) -> Any:
        value = orjson.loads(data)
        return value["payload"] if self.schemas and isinstance(value, dict) else value

    def prepare(self, schemas: Iterable[tuple[str, Role, bytes]]) -> None:
        return None  # nothing to make ready (the schemas are not even read)


class SchemaIds(Protocol):
    def schema_id(self, subject: str, schema: str) -> int:
        """The registry's id of an Avro schema (its JSON text) under ``subject``, registered as the subject's
        next version when new; raises what the registry refuses (e.g. incompatible with earlier versions)."""

    def prepare(self, schemas: Iterable[tuple[str, str]]) -> None:
        """Start registering these (subject, schema) pairs ahead of ``schema_id``, each subject's in the order
        given; ``schema_id`` of one gives its id once registered (or raises what its registration raised)."""


Strategy = Literal["TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"]


def subject(topic: str, role: Role, avro: Any = None, strategy: Strategy = "TopicNameStrategy") -> str:
    """The subject of a message's schema (``avro``: the Avro schema, a record) by Confluent's subject name strategy:
    TopicNameStrategy ``<topic>-key``/``-value``; RecordNameStrategy the record's full name;
    TopicRecordNameStrategy ``<topic>-<full name>``."""
    if strategy == "TopicNameStrategy":
        return f"{topic}-{role}"
    name = avro["name"]
    if "." not in name and avro.get("namespace"):
        name = f"{avro['namespace']}.{name}"
    return name if strategy == "RecordNameStrategy" else f"{topic}-{name}"  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Writer:
    header: bytes  # magic byte 0 and the schema id
    schema: Any  # fastavro's parsed schema
    fix: Fixer | None  # JsonConverter's payload -> the Avro schema's values
    program: bytes | None  # the native transcoder's (avro_program.py); None: Python's


class AvroLayout:
    """Confluent's AvroConverter with a schema registry (``ids``): a schema is registered the first time a
    message of its (topic, role) needs it, or when ``prepare`` is told of it, whichever comes first."""

    ahead = True

    def __init__(self, ids: SchemaIds, key_strategy: Strategy = "TopicNameStrategy",
                 value_strategy: Strategy = "TopicNameStrategy") -> None:
        self.ids = ids
        self._strategies: dict[Role, Strategy] = {"key": key_strategy, "value": value_strategy}
        self._lock = threading.Lock()  # prepare (the daemon's thread, as tables are mapped) beside the encoder's
        self._writers: dict[tuple[str, Role, bytes], _Writer] = {}
        self._prepared: dict[tuple[str, Role, bytes], tuple[Any, Any, str]] = {}  # prepare's Connect and Avro schemas
        self._by_id: dict[int, _Writer] = {}  # the writers by schema id, to read a message back (payload)

    def encode(self, topic: str, role: Role, schema: bytes, payload: Any) -> bytes:
        writer = self._writers.get((topic, role, schema))
        if writer is None:
            writer = self._writer(topic, role, schema)
        out = io.BytesIO()
        out.write(writer.header)
        try:
            schemaless_writer(out, writer.schema, payload if writer.fix is None else writer.fix(payload))
        except (ValueError, TypeError) as exc:
            raise self._misfit(topic, role, schema, payload, exc) from None
        return out.getvalue()

    @staticmethod
    def _misfit(topic: str, role: Role, schema: bytes, payload: Any, exc: Exception) -> BinlogError:
        """Why a payload does not fit its Avro schema, in one line."""
        field = missing_value(orjson.loads(schema), payload)
        if field is not None:
            reason = (f"{field} is null but required (NOT NULL): a partial row image? debezium-avro, like "
                      "Debezium, needs binlog_row_image=FULL")
        else:
            reason = f"does not fit its Avro schema: {exc}"
        return BinlogError(reason, source=f"change event of {topic} ({role})")

    def encode_json(self, topic: str, role: Role, schema: bytes, payload: bytes) -> bytes:
        if _native is not None:
            writer = self._writers.get((topic, role, schema)) or self._writer(topic, role, schema)
            if writer.program is not None:
                data = _native.avro(writer.program, payload, writer.header)
                if data is not None:
                    return data  # type: ignore[no-any-return]
        return self.encode(topic, role, schema, orjson.loads(payload))

    def json_frame(self, schema: bytes) -> None:
        return None

    def transcoder(self, topic: str, role: Role, schema: bytes) -> tuple[bytes, bytes] | None:
        if _native is None:
            return None
        writer = self._writers.get((topic, role, schema)) or self._writer(topic, role, schema)
        return None if writer.program is None else (writer.program, writer.header)

    def payload(self, data: bytes) -> Any:
        writer = self._by_id.get(int.from_bytes(data[1:5], "big")) if data[:1] == b"\0" else None
        if writer is None:
            raise ValueError("not a message of this layout")
        return schemaless_reader(io.BytesIO(data[5:]), writer.schema, None)

    def prepare(self, schemas: Iterable[tuple[str, Role, bytes]]) -> None:
        """The schemas' registrations started side by side (``SchemaIds.prepare``)."""
        with self._lock:  # held while the registrations are queued: prepare's callers' order is theirs
            wanted = []
            for key in schemas:
                if key not in self._writers and key not in self._prepared:
                    self._prepared[key] = self._avro(key[2])
                    avro, text = self._prepared[key][1:]
                    wanted.append((subject(key[0], key[1], avro, self._strategies[key[1]]), text))
            if wanted:
                self.ids.prepare(wanted)

    @staticmethod
    def _avro(schema: bytes) -> tuple[Any, Any, str]:
        """A Connect schema (JSON), its Avro schema and the Avro schema's text."""
        connect = orjson.loads(schema)
        avro = avro_schema(connect)
        return connect, avro, orjson.dumps(avro).decode()

    def _writer(self, topic: str, role: Role, schema: bytes) -> _Writer:
        with self._lock:
            prepared = self._prepared.pop((topic, role, schema), None)
        connect, avro, text = prepared if prepared is not None else self._avro(schema)
        schema_id = self.ids.schema_id(subject(topic, role, avro, self._strategies[role]), text)
        writer = _Writer(b"\0" + schema_id.to_bytes(4, "big"), parse_schema(avro), payload_fixer(connect),
                         avro_program(connect))
        with self._lock:
            if len(self._writers) >= 4096:
                self._writers.clear()
                self._by_id.clear()
                self._prepared.clear()
            self._writers[(topic, role, schema)] = writer
            self._by_id[schema_id] = writer
        return writer
