"""The Debezium shape of each table map a Kafka transaction's change events meet, cached: its codec (envelope.py:
schemas and converters), the source block of its events, the native composer's byte pieces (_envelope.h); the
binlog file's name of the events; each table's schema as its latest change events had it (a truncate's)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ...codec.table_map import TableMap
from ...schema.ddl_operations import Name
from ..format import RecordEvent
from .envelope import TableCodec, table_codec
from .layouts import Layout, Role
from .native import RenderedEvent
from .options import DebeziumOptions
from .schema_events import VERSION


@dataclass(frozen=True)
class Table:
    """A table map's Debezium shape, and the source block of its events."""

    codec: TableCodec
    name: str  # db.table, as the transaction topic counts events
    source: bytes  # the source block of a binlog event, to fill in with its ts, server id, gtid, file and pos
    # the native composer's pieces (_envelope.h): (topic, value head, source a, b, c), then the key's head (None:
    # no key) and tail, the value's tail and Avro's transcoder programs and headers (None: JSON, framed as it
    # is); None when C does not compose them
    pieces: tuple[tuple[str, bytes, bytes, bytes, bytes], tuple[Any, ...]] | None


class TableShapes:
    """The tables' shapes in ``layout``, by table map (``composes``: whether C composes their events, the pieces
    it needs made); ``file_name`` maps a sequence's binlog file number to the file's name (source.file)."""

    def __init__(self, options: DebeziumOptions, layout: Layout, file_name: Callable[[int], str],
                 composes: bool) -> None:
        self.options = options
        self.layout = layout
        self.file_name = file_name
        self.composes = composes
        self.tables: dict[int, tuple[TableMap, Table]] = {}
        self.codecs: dict[int, tuple[TableMap, TableCodec]] = {}  # tables whose schemas new_schemas gave
        self._last_file: tuple[int, str] = (-1, "")
        self._last_file_json = b'""'
        # each table's schema as its latest change events had it, or a table statement's columns since: a truncate's
        self.schemas: dict[Name, TableMap] = {}

    def file(self, number: int) -> str:
        if self._last_file[0] != number:
            self._last_file = (number, self.file_name(number))
            self._last_file_json = orjson.dumps(self._last_file[1])
        return self._last_file[1]

    def file_json(self, number: int) -> bytes:
        self.file(number)
        return self._last_file_json

    def new_schemas(self, streams: list[tuple[str, Iterable[RenderedEvent | RecordEvent]]]) \
            -> Iterator[tuple[str, Role, bytes]]:
        """The key and value schemas of the tables first met in C's walks of a Kafka transaction's records (topic
        and stream), in the order their events need them. A topic's walks after a record Python reads (whose
        table maps are only known once read) are left out: its events ask in their order."""
        python: set[str] = set()
        seen: set[int] = set()
        for topic, stream in streams:
            if type(stream) is not list:
                python.add(topic)
                continue
            if topic in python:
                continue
            for event in stream:
                tm = event[8]
                if id(tm) in seen:
                    continue
                seen.add(id(tm))
                cached = self.tables.get(id(tm))
                if cached is not None and cached[0] is tm:
                    continue
                codec = table_codec(tm, self.options.prefix, self.options.modes)
                self.codecs[id(tm)] = (tm, codec)
                if codec.key_schema is not None:
                    yield codec.topic, "key", codec.key_schema
                yield codec.topic, "value", codec.value_schema

    def table(self, tm: TableMap) -> Table:
        cached = self.tables.get(id(tm))
        if cached is not None and cached[0] is tm:
            self.schemas[(tm.database, tm.table)] = tm
            return cached[1]
        self.schemas[(tm.database, tm.table)] = tm
        known = self.codecs.pop(id(tm), None)
        codec = known[1] if known is not None and known[0] is tm else table_codec(tm, self.options.prefix,
                                                                                  self.options.modes)
        text = [orjson.dumps(x) for x in (VERSION, self.options.prefix, tm.database, tm.table)]
        # as PythonEvents.rows' source dict: a, ts_ms, b, ts_us, "ts_ns", c, server_id, then gtid, file, pos and row
        a = b"".join((b'{"version":', text[0], b',"connector":', b'"mariadb"' if tm.is_mariadb else b'"mysql"',
                      b',"name":', text[1], b',"ts_ms":'))
        b = b"".join((b',"snapshot":"false","db":', text[2], b',"sequence":null,"ts_us":'))
        c = b"".join((b',"table":', text[3], b',"server_id":'))
        a_, b_, c_ = (x.replace(b"%", b"%%") for x in (a, b, c))  # for the bytes % (ts_ms, ts_us, ts_ns, server_id,
        source = a_ + b"%d" + b_ + b'%d,"ts_ns":%d' + c_ + b'%d,"gtid":%b,"file":%b,"pos":%d,"row":'  # gtid, file, pos)
        table = Table(codec, f"{tm.database}.{tm.table}", source, self._pieces(codec, a, b, c))
        if len(self.tables) >= 4096:
            self.tables.clear()
            self.codecs.clear()
        self.tables[id(tm)] = (tm, table)
        return table

    def _pieces(self, codec: TableCodec, a: bytes, b: bytes, c: bytes) -> tuple[Any, Any] | None:
        """The native composer's pieces of a table's events (Table.pieces); Avro's schemas registered (the key's
        first, as its first event would)."""
        if not self.composes:
            return None
        value_frame = self.layout.json_frame(codec.value_schema)
        if value_frame is not None:  # JSON
            key_frame = self.layout.json_frame(codec.key_schema) if codec.key_schema is not None else None
            return ((codec.topic, value_frame[0], a, b, c),
                    (None, b"", value_frame[1], None) if key_frame is None else (*key_frame, value_frame[1], None))
        key = None if codec.key_schema is None else self.layout.transcoder(codec.topic, "key", codec.key_schema)
        value = self.layout.transcoder(codec.topic, "value", codec.value_schema)
        if value is None or (key is None and codec.key_schema is not None):
            return None
        return ((codec.topic, b"", a, b, c),
                (None if key is None else b"", b"", b"", (*(key or (None, b"")), *value)))

    def shape(self, tm: TableMap, file_number: int) -> tuple[Any, ...] | None:
        """The pieces of a table's change events in one binlog file, for the native composer (_envelope.h); None
        when it does not compose them."""
        pieces = self.table(tm).pieces
        return None if pieces is None else (*pieces[0], self.file_json(file_number), *pieces[1])
