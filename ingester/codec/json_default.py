"""How the codec's values that JSON lacks are written as JSON (docs/JSONL.md): bytes as base64, DECIMAL as a
number with exactly the stored digits, JSON documents and partial JSON updates as themselves. A leaf: the
JSONL dump, the land job's text of such values, and anyone else encoding codec values use it."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import orjson

from .jsonb import JsonNull
from .rows import JsonDiff


def json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))  # a JSON number with exactly the stored digits
    if isinstance(value, JsonDiff | JsonNull):
        return value.to_json()
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")
