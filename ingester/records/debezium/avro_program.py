"""A Connect schema compiled for the native Avro transcoder (``_avro.h``): the program that walks the payload's
JSON text (as binlake's JSON path writes it) and writes the Avro binary of the schema's Avro form
(avro_schema.py's rules: optional -> a union with null, ``[T, "null"]`` when a non-struct has a default), the
bytes fastavro writes of payload_fixer's values.

The ops, pre-order, integers little-endian: ``R`` u16 n, then per field u16 key length, the key's JSON text and
the field's program; ``U`` u8 null's branch, u8 the value's branch, u32 length, the value's program; ``A`` u32
length, the items' program; ``i`` int, ``l`` long, ``f`` float, ``d`` double, ``b`` boolean, ``s`` string,
``y`` bytes from base64 text. Maps have no op: their payloads take the Python path.
"""

from __future__ import annotations

from typing import Any

import orjson

_OPS = {"int8": b"i", "int16": b"i", "int32": b"i", "int64": b"l", "float": b"f", "double": b"d",
        "boolean": b"b", "string": b"s", "bytes": b"y"}


class _Unsupported(Exception):
    pass


def avro_program(schema: dict[str, Any]) -> bytes | None:
    """The transcoder's program of a Connect schema (JSONConverter's layout), or None where it has no op."""
    try:
        return _program(schema)
    except (_Unsupported, OverflowError, KeyError, TypeError):
        return None


def _program(schema: dict[str, Any]) -> bytes:
    kind = schema["type"]
    if kind in _OPS:
        body = _OPS[kind]
    elif kind == "struct":
        parts = [b"R", len(schema["fields"]).to_bytes(2, "little")]
        for field in schema["fields"]:
            key = orjson.dumps(field["field"])
            parts += [len(key).to_bytes(2, "little"), key, _program(field)]
        body = b"".join(parts)
    elif kind == "array":
        items = _program(schema["items"])
        body = b"A" + len(items).to_bytes(4, "little") + items
    else:
        raise _Unsupported(kind)
    if not schema.get("optional"):
        return body
    null, value = (1, 0) if kind != "struct" and schema.get("default") is not None else (0, 1)
    return b"U" + bytes((null, value)) + len(body).to_bytes(4, "little") + body
