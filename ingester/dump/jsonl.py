"""The JSONL event format (docs/JSONL.md): one JSON object per event, stable field names."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from ..codec import BinlogDecoder
from ..codec.events import Event, TableMapEvent, TransactionPayloadEvent
from ..codec.json_default import json_default
from ..codec.rows import JsonDiff

_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


def event_json(event: Event) -> bytes:
    """One event as a JSON line (newline included)."""
    try:
        return _event_json(event)
    except orjson.JSONEncodeError:  # text with undecodable bytes (surrogate escapes): JSON cannot hold them
        return orjson.dumps(replace_surrogates(event.to_dict()), default=json_default, option=_OPTIONS)


def replace_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate of its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [replace_surrogates(v) for v in value]
    if isinstance(value, JsonDiff):
        return replace_surrogates(value.to_json())
    return value


def _event_json(event: Event) -> bytes:
    if type(event) is TableMapEvent:
        # Servers repeat the same map in every transaction: serialize its columns once per map.
        tm = event.table_map
        if tm.json_cache is None:
            tm.json_cache = orjson.dumps(tm.to_dict(), default=json_default)
        head = orjson.dumps(Event.to_dict(event), default=json_default)
        return b"".join((head[:-1], b",", tm.json_cache[1:], b"\n"))
    return orjson.dumps(event.to_dict(), default=json_default, option=_OPTIONS)


def frame_lines(dec: BinlogDecoder, frames: Iterable[tuple[int, bytes]]) -> Iterator[bytes]:
    """The JSON lines of each event of ``frames`` (compressed payloads followed by their events)."""
    decode = dec.decode
    for pos, raw in frames:
        ev = decode(raw, pos)
        if type(ev) is TransactionPayloadEvent:
            yield from map(event_json, dec.expand(ev))
        else:
            yield event_json(ev)
