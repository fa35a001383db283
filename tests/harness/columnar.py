"""The decoders against their references: the columnar rows decoder (codec.rows.RowImages, used by the land
job) against the row-dict decoder, value for value and type for type; and the land job's Arrow images
(decode_record, the C walker) against the ones built from row dicts the way decode.py built them before the
columnar decoder (``_reference_image``)."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pyarrow as pa

from ingester.codec import BinlogDecoder, BinlogError
from ingester.codec import events as E
from ingester.codec.rows import JsonDiff, RowImages
from ingester.records.builder import Record
from ingester.records.format import record_events
from ingester.sources.binlog_file import binlog_frames
from streaming_job.decode import arrow_rows
from streaming_job.decode.decode import _OPS, _Out, _shape, decode_record
from tests.harness.records import build_records


def typed(value: Any) -> Any:
    """A value with its type made part of what == compares (1 == 1.0 == True otherwise)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [type(value).__name__, *(typed(v) for v in value)]
    if isinstance(value, JsonDiff):
        return ["JsonDiff", value.to_json()]
    return [type(value).__name__, value]


def _events(dec: BinlogDecoder, path: Path) -> list[Any]:
    """Every event of the file (payloads expanded), or the error that stopped decoding, as the last item."""
    out: list[Any] = []
    try:
        for pos, raw in binlog_frames(path, dec):
            out.extend(dec.events(raw, pos))
    except BinlogError as exc:
        out.append(("error", str(exc)))
    return out


def assert_columnar_equals_dicts(path: Path) -> collections.Counter:
    """Decode the file with both decoders; returns the row images compared per event type code."""
    dicts, columns = _events(BinlogDecoder(str(path)), path), _events(BinlogDecoder(str(path), columnar=True), path)
    assert len(dicts) == len(columns)
    compared: collections.Counter = collections.Counter()
    for a, b in zip(dicts, columns, strict=True):
        if not isinstance(a, E.RowsEvent):
            assert type(a) is type(b) and (not isinstance(a, tuple) or a == b)
            continue
        assert isinstance(b.rows, RowImages) and isinstance(a.rows, list)
        assert (b.columns_before, b.columns_after) == (a.columns_before, a.columns_after)
        assert len(b.rows) == len(a.rows)
        assert typed(list(b.rows)) == typed(a.rows), f"{path.name} at {a.position}"
        compared[a.type_code] += len(a.rows)
    return compared


def _reference_image(shape, images: list[dict[str, Any] | None]) -> pa.StructArray:
    """decode.py's images as built before the columnar decoder: from row dicts, one .get per value."""
    arrays = [lake.array([None if d is None else d.get(name) for d in images])
              for name, lake in zip(shape.names, shape.columns, strict=True)]
    mask = pa.array([d is None for d in images], pa.bool_())
    return pa.StructArray.from_arrays(arrays, fields=list(shape.image_type), mask=mask)


def _reference(headers: dict[str, bytes], value: bytes) -> list[tuple[str, list[str], pa.StructArray, pa.StructArray]]:
    groups: dict[tuple[str, str, int], tuple[Any, list[str], list[Any], list[Any]]] = {}
    for item in record_events(headers, value, "record"):
        ev = item.event
        if not isinstance(ev, E.RowsEvent):
            continue
        shape = _shape(ev)
        _, ops, before, after = groups.setdefault((ev.database, ev.table, id(shape)), (shape, [], [], []))
        ops += [_OPS[ev.kind]] * len(ev.rows)
        before += [row.get("before") for row in ev.rows]
        after += [row.get("after") for row in ev.rows]
    return [(shape.schema, ops, _reference_image(shape, b), _reference_image(shape, a))
            for shape, ops, b, a in groups.values()]


def assert_record_images(topic: str, headers: dict[str, bytes], value: bytes) -> int:
    """decode_record's IPC streams hold exactly the reference images; returns the row changes compared."""
    out = _Out()
    decode_record(out, topic, 0, 0, headers, value)
    rows = [r for r in out.rows if r.kind != "statement"]  # table statement entries: records of their own
    expected = _reference(headers, value)
    assert [r.kind for r in rows] == ["row"] * len(expected), rows[0].error
    compared = 0
    for row, (schema, ops, before, after) in zip(rows, expected, strict=True):
        got = pa.ipc.open_stream(row.data).read_all().combine_chunks()
        assert row.schema == schema and got["op"].to_pylist() == ops
        for name, want in (("before", before), ("after", after)):
            have = got[name].chunk(0)
            assert have.type == want.type
            assert have.is_null().equals(want.is_null()), name
            assert have.equals(want), f"{topic}: {name} images differ"
        compared += len(ops)
    return compared


_PYTHON_ONLY = {20, 21, 22, 39, 250}  # pre-GA and partial JSON rows events, snapshot rows: no C walk


class _CountingWalker:
    """arrow_rows' C walker, counting the events it decoded and the ones it left to Python."""

    def __init__(self, walker: Any) -> None:
        self.walker, self.decoded, self.left = walker, 0, 0

    def plan(self, images: Any) -> Any:
        return self.walker.plan(images)

    def concat(self, *args: Any) -> Any:
        return self.walker.concat(*args)

    def decode(self, *args: Any) -> Any:
        got = self.walker.decode(*args)
        self.decoded += got is not None
        self.left += got is None
        return got


def assert_land_images_equal_reference(path: Path) -> int:
    """The file's records through decode_record, whose rows events all go through the C walker (a
    table map it does not plan for, or an event it leaves to Python, would make this test vacuous);
    returns the row changes compared."""
    assert arrow_rows.native is not None, "the C walker (ingester/codec/_columns.c) is not built"
    _, out, _ = build_records(path)
    walker = arrow_rows.native
    counting = arrow_rows.native = _CountingWalker(walker)
    try:
        compared = sum(assert_record_images(r.topic, dict(r.headers), r.value) for r in out if isinstance(r, Record))
    finally:
        arrow_rows.native = walker
    events = sum(isinstance(ev, E.RowsEvent) and ev.type_code not in _PYTHON_ONLY for r in out if isinstance(r, Record)
                 for ev in (item.event for item in record_events(dict(r.headers), r.value)))
    assert counting.left == 0 and counting.decoded == events, (path.name, counting.decoded, counting.left, events)
    return compared
