"""The change events of rows events C rendered (native.py: each row's Value and Key structs as JSON), put
together from byte pieces: the event's source block (table_shapes.py), the row's structs; the layout frames each
payload (JSON) or encodes it (Avro: transcoded in C, _avro.h). Without transaction metadata C puts whole messages
together (_envelope.h), in either layout; this is its reference, and composes the events C leaves to Python."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import orjson

from ..outbound import Message
from .layouts import Layout
from .native import RenderedEvent, RowsRenderer
from .options import DebeziumOptions
from .python_events import NEW_KEY, OLD_KEY
from .table_shapes import Table, TableShapes
from .transaction_topic import Transaction

_OP_FIELDS = {op: b',"op":"%s"' % op.encode() for op in ("c", "u", "d")}
_CODE_OPS = {23: "c", 30: "c", 24: "u", 31: "u", 25: "d", 32: "d"}  # rows event type codes C renders


class ComposedEvents:
    """The change events of C's rendered rows events in the tables' ``shapes``, serialized by ``layout``: by C
    (``native``'s composer) or by Python, to the same messages as the reference path (python_events.py)."""

    def __init__(self, options: DebeziumOptions, layout: Layout, shapes: TableShapes,
                 native: RowsRenderer | None) -> None:
        self.options = options
        self.layout = layout
        self._native = native
        self._table = shapes.table
        self._file_json = shapes.file_json
        self._shape = shapes.shape

    def composed(self, walked: list[RenderedEvent], now: int) -> Iterable[Message]:
        """The messages of rows events C walked: composed by C, or by Python where C leaves an event to it (Avro)."""
        composed = self._native.envelopes(walked, self._shape, now, self.options.tombstones)  # type: ignore[union-attr]
        if composed is not None:
            return composed
        return (m for item in walked for m in self.rendered(item, None, now))

    def rendered(self, event: RenderedEvent, tx: Transaction | None, now: int) -> Iterator[Message]:
        """``PythonEvents.rows`` of the structs C rendered: the same messages, put together from bytes (the
        reference of the native composer, _envelope.h)."""
        file_number, position, _, gtid, _, timestamp, server_id, code, tm, rows = event
        table = self._table(tm)
        ts_ms = timestamp * 1000
        source = table.source % (ts_ms, ts_ms * 1000, ts_ms * 1_000_000, server_id,
                                 orjson.dumps(gtid) if gtid else b"null", self._file_json(file_number), position)
        end = b',"ts_ms":%d,"ts_us":%d,"ts_ns":%d}' % (now // 1_000_000, now // 1000, now)
        kind = _CODE_OPS[code]
        for index, (before, after, key_before, key_after) in enumerate(rows):
            row = b"%d" % index
            if kind == "u" and key_before != key_after:  # a changed key: a delete, then a create (as rows)
                assert key_before is not None and key_after is not None
                yield from self.compose(table, before, None, source, row, "d", key_before, tx, end,
                                        ((NEW_KEY, key_after),))
                yield from self.compose(table, None, after, source, row, "c", key_after, tx, end,
                                        ((OLD_KEY, key_before),))
            else:
                yield from self.compose(table, before, after, source, row, kind,
                                        key_after if after is not None else key_before, tx, end)

    def compose(self, table: Table, before: bytes | None, after: bytes | None, source: bytes, row: bytes, op: str,
                key_struct: bytes | None, tx: Transaction | None, end: bytes,
                headers: tuple[tuple[str, bytes], ...] = ()) -> Iterator[Message]:
        block = b"null"
        if tx is not None:
            total, n = tx.count(table.name)
            block = b'{"id":%b,"total_order":%d,"data_collection_order":%d}' % (tx.id_json, total, n)
        codec = table.codec
        key = None
        if key_struct is not None:
            key = self.layout.encode_json(codec.topic, "key", codec.key_schema, key_struct)  # type: ignore[arg-type]
        value = b"".join((b'{"before":', before or b"null", b',"after":', after or b"null", b',"source":', source,
                          row, b',"thread":null,"query":null},"transaction":', block, _OP_FIELDS[op], end))
        yield Message(codec.topic, key, self.layout.encode_json(codec.topic, "value", codec.value_schema, value),
                      headers)
        if op == "d" and self.options.tombstones:
            yield Message(table.codec.topic, key, None, headers)
