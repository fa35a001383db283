"""Kafka Connect schemas (in JsonConverter's layout, as envelope.py builds them) as the Avro schemas that
Confluent's AvroConverter derives from them (``AvroData.fromConnectSchema``, with the converter's defaults:
Connect metadata kept; enhanced schema support, generalized sum types and name scrubbing off), written in
the order of the Avro library's ``Schema.toString()``: what such a converter registers.

The rules, from AvroData:

- int8/int16 -> ``int`` with ``"connect.type"``; int32, int64, float32, float64, boolean, string, bytes -> int,
  long, float, double, boolean, string, bytes (JsonConverter names float32 and float64 ``float``, ``double``).
- struct -> record, the Connect name split at its last dot into namespace and name; optional -> the union
  ``["null", T]``, the field defaulting to null; an optional schema with a default -> ``[T, "null"]``, the
  field defaulting to it. A record met again (``before`` and ``after`` share the Value record) is referred to
  by name.
- a non-record schema's own metadata become properties, in this order: ``connect.doc``, ``connect.version``,
  ``connect.parameters``, ``connect.default``, ``connect.name``, ``connect.type``; records carry them too
  (their namespace and name already say the Connect name, ``connect.name`` repeats it).
- Decimal -> bytes with ``scale`` and ``precision`` (``connect.decimal.precision``, else 64) and
  ``"logicalType": "decimal"``; Connect's Date, Time and Timestamp -> logical types date, time-millis and
  timestamp-millis.
- array -> ``array``; a map with non-optional string keys -> ``map``, other maps an array of MapEntry records.

Avro names must be ``[A-Za-z_][A-Za-z0-9_]*`` (dot-separated in full names), which AvroData does not ensure: a
Connect name made of a database or table name may not be one. Those names are adjusted as Debezium's
``schema.name.adjustment.mode: avro`` and ``field.name.adjustment.mode: avro`` do (each character Avro does not
allow becomes ``_``; here in each part of a full name, where Debezium only checks the first character of the
whole), in the record names, ``connect.name`` and field names alike; ``payload_fixer`` renames the payload's
fields to match.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

# JsonConverter's names of Connect's types (float: FLOAT32, double: FLOAT64) -> Avro's
_PRIMITIVES = {"int8": "int", "int16": "int", "int32": "int", "int64": "long", "float": "float", "double": "double",
               "boolean": "boolean", "string": "string", "bytes": "bytes"}
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_LOGICAL = {"org.apache.kafka.connect.data.Date": "date", "org.apache.kafka.connect.data.Time": "time-millis",
            "org.apache.kafka.connect.data.Timestamp": "timestamp-millis"}
_DEFAULT_PRECISION = 64  # AvroData's precision of a Decimal without connect.decimal.precision
_CONNECT_NAMESPACE = "io.confluent.connect.avro"  # unnamed structs' and map entries' records
_BAD_FIRST = re.compile(r"^[^A-Za-z_]")
_BAD = re.compile(r"[^A-Za-z0-9_]")


def adjusted_name(name: str) -> str:
    """A Connect schema name as a valid Avro full name (the characters Avro does not allow -> _)."""
    return ".".join(adjusted_field(part) for part in name.split("."))


def adjusted_field(name: str) -> str:
    """A field name (or a part of a full name) as a valid Avro name."""
    return _BAD.sub("_", _BAD_FIRST.sub("_", name))


def avro_schema(connect: dict[str, Any]) -> Any:
    """The Avro schema (JSON-able: str, list or dict) of a Connect schema."""
    return _Writer().convert(connect)


class _Writer:
    """One conversion: the records defined so far (referred to by name when met again) and the namespace Avro's
    writer is in (a record's fields are written in its namespace: names in it are written short)."""

    def __init__(self) -> None:
        self.defined: set[str] = set()
        self.space: str | None = None
        self.unnamed = 0

    def convert(self, schema: dict[str, Any]) -> Any:
        kind = schema["type"]
        optional = bool(schema.get("optional"))
        if kind == "struct":
            if optional:  # a union whose record carries the metadata
                return ["null", self._record({**schema, "optional": False})]
            return self._record(schema)
        name = schema.get("name")
        node: dict[str, Any]
        if kind in _PRIMITIVES:
            node = {"type": _PRIMITIVES[kind]}
            if name == _DECIMAL:
                params = schema.get("parameters") or {}
                node["scale"] = int(params["scale"])
                node["precision"] = int(params.get("connect.decimal.precision", _DEFAULT_PRECISION))
        elif kind == "array":
            node = {"type": "array", "items": self.convert(schema["items"])}
        elif kind == "map":
            node = self._map(schema)
        else:
            raise ValueError(f"Connect schema type {kind!r} has no Avro form")
        node |= _metadata(schema)
        if kind in ("int8", "int16"):
            node["connect.type"] = kind
        if name == _DECIMAL:
            node["logicalType"] = "decimal"
        elif name in _LOGICAL:
            node["logicalType"] = _LOGICAL[name]
        base: Any = node["type"] if len(node) == 1 else node  # Avro writes a bare primitive as its name
        if not optional:
            return base
        return [base, "null"] if schema.get("default") is not None else ["null", base]

    def _map(self, schema: dict[str, Any]) -> dict[str, Any]:
        keys, values = schema["keys"], schema["values"]
        if keys["type"] == "string" and not keys.get("optional"):
            return {"type": "map", "values": self.convert(values)}
        entry = {"type": "struct", "name": f"{_CONNECT_NAMESPACE}.MapEntry", "optional": False,
                 "fields": [{**keys, "field": "key"}, {**values, "field": "value"}]}
        if schema.get("name") is not None:
            entry["name"] = schema["name"]
        record = self._record(entry, metadata=False)
        if isinstance(record, dict) and schema.get("name") is not None:
            record["connect.internal.type"] = "MapEntry"
        return {"type": "array", "items": record}

    def _record(self, schema: dict[str, Any], metadata: bool = True) -> Any:
        name = schema.get("name")
        if name is None:
            self.unnamed += 1
            full = f"{_CONNECT_NAMESPACE}.ConnectDefault{self.unnamed if self.unnamed > 1 else ''}"
        else:
            full = adjusted_name(name)
        space, _, short = full.rpartition(".")
        namespace = space or None
        if full in self.defined:
            return short if namespace is None or namespace == self.space else full  # Avro's getQualified
        self.defined.add(full)
        node: dict[str, Any] = {"type": "record", "name": short}
        if namespace != self.space:
            node["namespace"] = namespace or ""
        outer, self.space = self.space, namespace
        try:
            node["fields"] = [self._field(f) for f in schema["fields"]]
        finally:
            self.space = outer
        if metadata:
            node |= _metadata(schema)
            if name is not None:
                node["connect.name"] = full
        return node

    def _field(self, schema: dict[str, Any]) -> dict[str, Any]:
        field: dict[str, Any] = {"name": adjusted_field(schema["field"]),
                                 "type": self.convert(schema)}
        if schema.get("default") is not None:
            field["default"] = _default(schema, schema["default"])
        elif schema.get("optional"):
            field["default"] = None
        return field


def _metadata(schema: dict[str, Any]) -> dict[str, Any]:
    """AvroData's connect.* properties of a schema, in its order (connect.name is set by the caller: a record
    writes it adjusted)."""
    props: dict[str, Any] = {}
    if schema.get("doc") is not None:
        props["connect.doc"] = schema["doc"]
    if schema.get("version") is not None:
        props["connect.version"] = schema["version"]
    if schema.get("parameters"):
        props["connect.parameters"] = dict(schema["parameters"])
    if schema.get("default") is not None:
        props["connect.default"] = _default(schema, schema["default"])
    if schema.get("name") is not None and schema["type"] != "struct":
        props["connect.name"] = schema["name"]
    return props


def _default(schema: dict[str, Any], value: Any) -> Any:
    """A Connect default (as JsonConverter writes it) as Avro's JSON default: bytes as ISO-8859-1 text."""
    if schema["type"] == "bytes":
        return base64.b64decode(value).decode("latin-1")
    if schema["type"] in ("struct", "array", "map"):
        raise ValueError(f"a default of a Connect {schema['type']} has no Avro form here")
    return value


Fixer = Callable[[Any], Any]


def payload_fixer(schema: dict[str, Any]) -> Fixer | None:
    """What turns a payload in JsonConverter's form (bytes as base64 text) into the values of the schema's Avro
    form (bytes as bytes, adjusted field names; an optional struct as fastavro's ``(record name, value)``, which
    names its branch of the union instead of fastavro finding it by trying the record on the value, a third
    of the time of writing a change event); None where the payload is already that."""
    kind = schema["type"]
    fix: Fixer | None = None
    if kind == "bytes":
        fix = base64.b64decode
    elif kind == "array":
        items = payload_fixer(schema["items"])
        if items is not None:
            fix = _each(items)
    elif kind == "map":
        as_map = schema["keys"]["type"] == "string" and not schema["keys"].get("optional")
        values = payload_fixer(schema["values"])
        if not as_map or values is not None:
            fix = _entries(payload_fixer(schema["keys"]), values, as_map)
    elif kind == "struct":
        fields = [(f["field"], adjusted_field(f["field"]), payload_fixer(f)) for f in schema["fields"]]
        if any(fixer is not None or name != avro for name, avro, fixer in fields):
            fix = _struct(fields)
        if schema.get("optional") and schema.get("name") is not None:
            return _branch(adjusted_name(schema["name"]), fix)
    if fix is None or not schema.get("optional"):
        return fix
    inner = fix
    return lambda value: None if value is None else inner(value)


def _branch(name: str, fix: Fixer | None) -> Fixer:
    if fix is None:
        return lambda value: None if value is None else (name, value)
    return lambda value: None if value is None else (name, fix(value))


def _each(items: Fixer) -> Fixer:
    return lambda values: [items(v) for v in values]


def _entries(keys: Fixer | None, values: Fixer | None, as_map: bool) -> Fixer:
    def key(k: Any) -> Any:
        return k if keys is None else keys(k)

    def value(v: Any) -> Any:
        return v if values is None else values(v)

    if as_map:
        return lambda entries: {k: value(v) for k, v in entries.items()}
    # JsonConverter writes such a map as an array of [key, value] pairs
    return lambda entries: [{"key": key(k), "value": value(v)} for k, v in entries]


def _struct(fields: list[tuple[str, str, Fixer | None]]) -> Fixer:
    def fixed(struct: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, avro, fix in fields:
            value = struct.get(name)
            out[avro] = value if fix is None or value is None else fix(value)
        return out
    return fixed


def missing_value(schema: dict[str, Any], payload: Any, path: str = "") -> str | None:
    """Where a payload has null for a field its schema requires (Avro has no null there, JSON writes one), e.g.
    a NOT NULL column a partial row image lacks: the field's dotted path, or None."""
    if payload is None:
        return None if schema.get("optional") else path or "(the whole payload)"
    if schema["type"] == "struct" and isinstance(payload, dict):
        for field in schema["fields"]:
            found = missing_value(field, payload.get(field["field"]), f"{path}.{field['field']}".lstrip("."))
            if found is not None:
                return found
    return None
