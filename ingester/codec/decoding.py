"""What every event decoder stands on: the decoding context (format description, table maps), the decoder's
signature and the registry of decoders by event type code (``register``); decoders.py gathers the families."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from . import events as E
from .cursor import Cursor
from .rows import RowsCompiler
from .table_map import TableMap


class DecodeContext(Protocol):
    """The stream's state an event's decoder reads and keeps (decoder.BinlogDecoder holds it)."""

    binlog_version: int
    is_mariadb: bool
    columnar: bool | RowsCompiler
    post_header_lengths: dict[int, int]
    table_maps: dict[int, TableMap]
    table_map_cache: dict[bytes, TableMap]

    def post_header_len(self, type_code: int) -> int: ...


Decoder = Callable[[DecodeContext, dict[str, Any], Cursor], E.Event]


REGISTRY: dict[int, Decoder] = {}


def register(*codes: int) -> Callable[[Decoder], Decoder]:
    def add(fn: Decoder) -> Decoder:
        for code in codes:
            REGISTRY[code] = fn
        return fn

    return add


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
