"""Debezium change events in Avro with a schema registry (binlake's ``kafka.format: debezium-avro``, or a real
Debezium connector with Confluent's AvroConverter) -> what the JSON converter's layout gives debezium_decode.py:
the key's and value's Connect schemas and the event's payload, bytes as base64 text. So the JSON path's column
types, converters, defaults and repeat filter (debezium_types.py, debezium_decode.py) serve both formats.

- **Wire format** (Confluent's): byte 0, the schema's registry id (4 bytes, big-endian), the Avro binary encoding.
  Another first byte, a message too short or an id the registry does not know is a ``DebeziumError``: an
  undecodable record naming its topic, partition and offset.
- **Schemas** are read by id from the registry (``GET /schemas/ids/{id}``) on the executors and kept per
  registry and id by the Python worker (an id always names the same schema), then turned back into the Connect
  schema they were made from, by the rules of Confluent's ``AvroData.toConnectSchema``: ``connect.name``,
  ``connect.version``, ``connect.parameters``, ``connect.default`` and ``connect.doc`` (or the Avro doc) say
  the Connect schema's metadata; a record is a struct named by ``connect.name`` or its full name; a union
  ``["null", T]`` or ``[T, "null"]`` an optional T (its default then from T's ``connect.default``); ``int``
  with ``connect.type`` int8/int16; the logical types ``decimal``, ``date``, ``time-millis`` and
  ``timestamp-millis`` are Connect's Decimal, Date, Time and Timestamp (what AvroData writes without its
  ``connect.*`` metadata too), ``time-micros`` and ``timestamp-micros`` Debezium's MicroTime and
  MicroTimestamp; an array of ``MapEntry`` records a map.
- **Values** are read by fastavro with the logical types left as their Avro base values (days, milliseconds,
  a decimal's unscaled bytes): the numbers JsonConverter writes; bytes become base64 text, a map of non-string
  keys JsonConverter's ``[key, value]`` pairs.

Column names are the Avro schema's: a name Avro does not allow has been adjusted by the producer (binlake's and
Debezium's ``field.name.adjustment.mode: avro`` put ``_`` for each character Avro does not allow), and the lake
gets the adjusted name.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Hashable
from typing import Any

import orjson
from fastavro import parse_schema, schemaless_reader

from ingester.registry_client import RegistryClient, UnknownSchema

from .debezium_decode import OPS, DebeziumError, event_digest

HEADER = 5  # the magic byte and the schema id
_CONNECT_DEFAULT = "io.confluent.connect.avro.ConnectDefault"  # AvroData's name of an unnamed struct
_MAP_ENTRY = "io.confluent.connect.avro.MapEntry"
_DECIMAL_PRECISION = 64  # AvroData's precision of a Decimal without connect.decimal.precision
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
# Avro logical type -> the Connect (or Debezium) schema name it stands for, by the Avro type under it
_LOGICAL = {("int", "date"): "org.apache.kafka.connect.data.Date",
            ("int", "time-millis"): "org.apache.kafka.connect.data.Time",
            ("long", "timestamp-millis"): "org.apache.kafka.connect.data.Timestamp",
            ("long", "time-micros"): "io.debezium.time.MicroTime",
            ("long", "timestamp-micros"): "io.debezium.time.MicroTimestamp"}
_PRIMITIVES = {"long": "int64", "float": "float", "double": "double", "boolean": "boolean", "string": "string",
               "bytes": "bytes", "fixed": "bytes", "enum": "string"}
_PRIMITIVE_NAMES = {"null", "int", "long", "float", "double", "boolean", "string", "bytes"}
_NAMED_TYPES = ("record", "enum", "fixed")


def connect_schema(avro: Any) -> dict[str, Any]:
    """The Connect schema (JsonConverter's layout) an Avro schema (parsed JSON) was made from by AvroData."""
    return _Reader().convert(avro, None)


class _Reader:
    """One conversion: the named types defined so far (a name met again refers to its definition)."""

    def __init__(self) -> None:
        self.named: dict[str, dict[str, Any]] = {}
        self.depth = 0

    def convert(self, node: Any, space: str | None, optional: bool = False,
                field_default: Any = None) -> dict[str, Any]:
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            if len(node) != 2 or len(branches) != 1:
                raise DebeziumError(f"the Avro union {orjson.dumps(node).decode()[:200]} is not an optional type "
                                    "(generalized sum types have no Connect schema here)")
            return self.convert(branches[0], space, True)  # AvroData: its default from connect.default
        if isinstance(node, str):
            node = {"type": node} if node in _PRIMITIVE_NAMES else self._definition(node, space)
        elif isinstance(node.get("type"), dict | list):
            return self.convert(node["type"], space, optional, field_default)
        self.depth += 1
        if self.depth > 64:
            raise DebeziumError("the Avro schema nests deeper than 64 levels (a recursive type?)")
        try:
            return self._schema(node, space, optional, field_default)
        finally:
            self.depth -= 1

    def _definition(self, name: str, space: str | None) -> dict[str, Any]:
        full = name if "." in name or not space else f"{space}.{name}"
        found = self.named.get(full) or self.named.get(name)
        if found is None:
            raise DebeziumError(f"the Avro schema refers to {name}, which it does not define")
        return found

    def _schema(self, node: dict[str, Any], space: str | None, optional: bool, field_default: Any) -> dict[str, Any]:
        kind = node["type"]
        name = None
        params: dict[str, str] = {}
        version = None
        if kind in _NAMED_TYPES:
            short = node["name"]
            if "." in short:
                space, _, short = short.rpartition(".")
            elif "namespace" in node:
                space = node["namespace"] or None
            name = f"{space}.{short}" if space else short
            self.named.setdefault(name, node)
        out: dict[str, Any]
        if kind == "record":
            out = {"type": "struct", "fields": [self._field(f, space) for f in node["fields"]]}
        elif kind == "array":
            out = self._array(node, space)
        elif kind == "map":
            out = {"type": "map", "keys": {"type": "string", "optional": False}, "values": self.convert(
                node["values"], space)}
        elif kind == "int":
            out = {"type": node.get("connect.type") if node.get("connect.type") in ("int8", "int16") else "int32"}
        elif kind in _PRIMITIVES:
            out = {"type": _PRIMITIVES[kind]}
        else:
            raise DebeziumError(f"the Avro type {kind!r} has no Connect schema here")
        logical = node.get("logicalType")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            name = _DECIMAL
            version = 1
            params["scale"] = str(node.get("scale", 0))
            if node.get("precision") is not None and int(node["precision"]) != _DECIMAL_PRECISION:
                params["connect.decimal.precision"] = str(node["precision"])
        elif isinstance(logical, str) and (kind, logical) in _LOGICAL:
            name, version = _LOGICAL[(kind, logical)], 1
        out["optional"] = optional
        if node.get("connect.name") is not None:
            name = str(node["connect.name"])
        if name is not None and not name.startswith(_CONNECT_DEFAULT):
            out["name"] = name
        if node.get("connect.version") is not None:
            version = int(node["connect.version"])
        if version is not None:
            out["version"] = version
        doc = node.get("connect.doc") or node.get("doc")
        if doc is not None:
            out["doc"] = doc
        params |= {str(k): str(v) for k, v in (node.get("connect.parameters") or {}).items()}
        if params:
            out["parameters"] = params
        default = field_default if field_default is not None else node.get("connect.default")
        if default is not None:
            out["default"] = _json_default(out["type"], default)
        return out

    def _field(self, field: dict[str, Any], space: str | None) -> dict[str, Any]:
        kind = field["type"]
        # a field's own default says the Connect default unless its type is a union (AvroData)
        default = field.get("default") if not isinstance(kind, list) else None
        out = {**self.convert(kind, space, False, default), "field": field["name"]}
        if field.get("doc") is not None and "doc" not in out:
            out["doc"] = field["doc"]
        return out

    def _array(self, node: dict[str, Any], space: str | None) -> dict[str, Any]:
        items = node["items"]
        entry = self._map_entry(items, space)
        if entry is not None:
            by_name = {f["field"]: f for f in entry["fields"]}
            return {"type": "map", "keys": _without_field(by_name["key"]), "values": _without_field(by_name["value"])}
        return {"type": "array", "items": self.convert(items, space)}

    def _map_entry(self, items: Any, space: str | None) -> dict[str, Any] | None:
        """The Connect struct of an array's items when they are AvroData's MapEntry records (a map whose keys
        are not strings)."""
        node = items
        if isinstance(node, str) and node not in _PRIMITIVE_NAMES:
            node = self._definition(node, space)
        if not isinstance(node, dict) or node.get("type") != "record":
            return None
        full = node["name"] if "." in node["name"] else f"{node.get('namespace') or space or ''}.{node['name']}"
        if node.get("connect.internal.type") != "MapEntry" and full.lstrip(".") != _MAP_ENTRY:
            return None
        if sorted(f["name"] for f in node["fields"]) != ["key", "value"]:
            return None
        return self.convert(node, space)


def _without_field(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "field"}


def _json_default(kind: str, value: Any) -> Any:
    """An Avro default (JSON: bytes as ISO-8859-1 text) as JsonConverter writes a Connect default (bytes as
    base64)."""
    if kind == "bytes" and isinstance(value, str):
        return base64.b64encode(value.encode("latin-1")).decode()
    return value


Fix = Callable[[Any], Any]


def payload_fix(schema: dict[str, Any]) -> Fix | None:
    """What turns fastavro's reading of a Connect schema's Avro form into JsonConverter's payload (bytes as
    base64 text, non-string-keyed maps as [key, value] pairs); None where it already is."""
    kind = schema["type"]
    fix: Fix | None = None
    if kind == "bytes":
        fix = _base64
    elif kind == "array":
        items = payload_fix(schema["items"])
        if items is not None:
            fix = _each(items)
    elif kind == "map":
        keys, values = payload_fix(schema["keys"]), payload_fix(schema["values"])
        if schema["keys"]["type"] != "string" or schema["keys"].get("optional"):
            fix = _pairs(keys, values)
        elif values is not None:
            fix = _values(values)
    elif kind == "struct":
        fields = [(f["field"], payload_fix(f)) for f in schema["fields"]]
        fixed = [(name, f) for name, f in fields if f is not None]
        if fixed:
            fix = _struct(fixed)
    if fix is None or not schema.get("optional"):
        return fix
    inner = fix
    return lambda value: None if value is None else inner(value)


def _base64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _each(items: Fix) -> Fix:
    return lambda values: [items(v) for v in values]


def _values(values: Fix) -> Fix:
    return lambda entries: {k: values(v) for k, v in entries.items()}


def _pairs(keys: Fix | None, values: Fix | None) -> Fix:
    def pairs(entries: list[dict[str, Any]]) -> list[list[Any]]:
        return [[e["key"] if keys is None else keys(e["key"]), e["value"] if values is None else values(e["value"])]
                for e in entries]
    return pairs


def _struct(fields: list[tuple[str, Fix]]) -> Fix:
    def fixed(struct: dict[str, Any]) -> dict[str, Any]:
        for name, fix in fields:
            value = struct.get(name)
            if value is not None:
                struct[name] = fix(value)
        return struct
    return fixed


def _without_logical_types(node: Any) -> Any:
    """An Avro schema whose values fastavro reads as their base types (days, milliseconds, unscaled bytes)."""
    if isinstance(node, list):
        return [_without_logical_types(n) for n in node]
    if isinstance(node, dict):
        return {k: _without_logical_types(v) for k, v in node.items() if k != "logicalType"}
    return node


class _Schema:
    """One registry schema: its Connect form, fastavro's parsed schema and the payload fix."""

    __slots__ = ("connect", "fix", "parsed")

    def __init__(self, text: str) -> None:
        try:
            avro = orjson.loads(text)
            self.parsed = parse_schema(_without_logical_types(avro))
        except Exception as exc:
            raise DebeziumError(f"the registry's schema is not an Avro schema fastavro reads: {exc}") from None
        self.connect = connect_schema(avro)
        self.fix = payload_fix(self.connect)


# (registry URL, schema id) -> the schema: ids are never reused, so a Python worker keeps them for its next tasks
_SCHEMAS: dict[tuple[str, int], _Schema] = {}


class AvroEvents:
    """debezium_decode's EventCodec of Confluent's wire format, its schemas from ``registry``."""

    def __init__(self, registry: RegistryClient) -> None:
        self.registry = registry
        self._unknown: dict[int, str] = {}  # ids the registry did not know, in this task: asked once

    def __getstate__(self) -> dict[str, Any]:
        return {"registry": self.registry, "_unknown": {}}

    def decode(self, key: bytes | None, value: bytes) -> tuple[Hashable, Any]:
        value_id, schema = self._wire(value, "value")
        key_id = self._wire(key, "key")[0] if key is not None else None
        return (value_id, key_id), self._read(value, value_id, schema)

    def schemas(self, shape_id: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        value_id, key_id = shape_id
        return self._schema(value_id).connect, None if key_id is None else self._schema(key_id).connect

    def digest(self, value: bytes) -> bytes:
        value_id, schema = self._wire(value, "value")
        event = self._read(value, value_id, schema)
        try:
            return event_digest(event, OPS.get(event.get("op"), "truncate"))
        except (KeyError, TypeError, ValueError) as exc:
            raise DebeziumError(f"not a change event: {exc}") from None

    def _wire(self, message: bytes, what: str) -> tuple[int, _Schema]:
        if len(message) < HEADER or message[0] != 0:
            first = f"first byte 0x{message[0]:02x}" if message else "empty"
            raise DebeziumError(f"the {what} is not in Confluent's Avro wire format ({first}, "
                                f"{len(message)} bytes; a magic byte 0 and a 4-byte schema id expected): "
                                "not a debezium-avro message")
        schema_id = int.from_bytes(message[1:HEADER], "big")
        return schema_id, self._schema(schema_id)

    def _schema(self, schema_id: int) -> _Schema:
        key = (self.registry.url, schema_id)
        found = _SCHEMAS.get(key)
        if found is not None:
            return found
        if schema_id in self._unknown:
            raise DebeziumError(self._unknown[schema_id])
        try:
            text = self.registry.schema(schema_id)
        except UnknownSchema as exc:
            self._unknown[schema_id] = str(exc)
            raise DebeziumError(str(exc)) from None
        found = _SCHEMAS[key] = _Schema(text)
        return found

    @staticmethod
    def _read(message: bytes, schema_id: int, schema: _Schema) -> Any:
        body = io.BytesIO(message)
        body.seek(HEADER)
        try:
            event = schemaless_reader(body, schema.parsed, None)
        except Exception as exc:
            raise DebeziumError(f"not the Avro binary encoding of schema id {schema_id}: "
                                f"{type(exc).__name__}: {exc}") from None
        if body.tell() != len(message):
            raise DebeziumError(f"{len(message) - body.tell()} bytes after the Avro value of schema id {schema_id}")
        if not isinstance(event, dict):
            raise DebeziumError(f"schema id {schema_id} is not a record: not a change event")
        return event if schema.fix is None else schema.fix(event)
