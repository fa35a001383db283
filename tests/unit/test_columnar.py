"""The columnar rows decoder (codec.rows.RowImages, used by the land job) against the row-dict decoder.

Differential: every rows event of every real binlog in the corpus decodes to the same values, value for
value and type for type, and malformed data fails with the same message and position; the land job's
Arrow images equal the ones built from the row dicts the way decode.py built them before the columnar
decoder (``_reference_image`` below). The type zoo on a real MariaDB runs the same checks
(tests/integration/test_type_zoo.py).
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from fuzz.codec import lake_values
from ingester.codec import BinlogDecoder, BinlogError
from ingester.codec import events as E
from ingester.codec.rows import JsonDiff, RowImages
from ingester.daemon.snapshot import _b64
from ingester.records.builder import Record
from ingester.records.format import record_events
from ingester.sources.binlog_file import binlog_frames
from streaming_job import arrow_rows
from streaming_job.decode import _OPS, _Out, _shape, decode_partition, decode_record
from tests.corpus import CORPUS, manifest
from tests.unit.test_corpus import BROKEN
from tests.unit.test_records import _build
from tests.unit.test_snapshot_records import _record, json_null_record

ENTRIES = manifest()


def _typed(value: Any) -> Any:
    """A value with its type made part of what == compares (1 == 1.0 == True otherwise)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [type(value).__name__, *(_typed(v) for v in value)]
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
        assert _typed(list(b.rows)) == _typed(a.rows), f"{path.name} at {a.position}"
        compared[a.type_code] += len(a.rows)
    return compared


def test_columnar_rows_equal_row_dicts_in_the_whole_corpus() -> None:
    """Every file; pre-GA, v1, v2 and partial JSON rows events all among them (MariaDB compressed rows
    events: the type zoo)."""
    compared: collections.Counter = collections.Counter()
    for entry in ENTRIES:
        compared += assert_columnar_equals_dicts(entry.path)
    assert set(compared) == {20, 21, 22, 23, 24, 25, 30, 31, 32, 39} and sum(compared.values()) > 10_000


@pytest.mark.parametrize("name", ["zendesk-maxwell/binlog.000004", "rust-mysql-common/mariadb-bin.000001",
                                  "rust-mysql-common/json.binlog.000001"])
def test_corrupted_rows_fail_alike(name) -> None:
    """Every single-byte corruption of a file's first rows events gives the same rows or the same error
    (message and byte position) in both decoders."""
    assert_corruptions_alike(CORPUS / name, True, lambda ev: _typed(list(ev.rows)), 1500)


def assert_corruptions_alike(path: Path, columnar: Any, values: Any, most: int) -> None:
    """Flip each byte of the file's first rows events: the row-dict decoder (``columnar=False``) or the
    Python columnar one (else) and a decoder with ``columnar`` give the same ``values(event)`` or fail
    alike (the codec's message and position, or the same lake conversion error)."""
    reference = BinlogDecoder(str(path), verify_checksums=False, columnar=columnar is not True)
    other = BinlogDecoder(str(path), verify_checksums=False, columnar=columnar)
    tried = errors = 0
    for pos, raw in binlog_frames(path, BinlogDecoder(str(path))):
        ev = reference.decode(raw, pos)
        other.decode(raw, pos)
        if not isinstance(ev, E.RowsEvent) or tried > most:
            continue
        for i in range(19, len(raw)):
            bad = bytearray(raw)
            bad[i] ^= 0xFF if i % 2 else 0x01
            outcome = []
            for dec in (reference, other):
                try:
                    outcome.append(values(dec.decode(bytes(bad), pos)))
                except BinlogError as exc:
                    outcome.append(("error", str(exc), exc.position))
                except (ValueError, pa.ArrowException) as exc:  # the lake cannot hold a value: an error row
                    outcome.append(("lake", type(exc).__name__))
            assert outcome[0] == outcome[1], f"byte {i} of the event at {pos}"
            tried += 1
            errors += outcome[0][0] == "error"
    assert tried > 50 and errors > 5


# --- the land job's images --------------------------------------------------------------------


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


def _assert_record(topic: str, headers: dict[str, bytes], value: bytes) -> int:
    """decode_record's IPC streams hold exactly the reference images; returns the row changes compared."""
    rows = _Out()
    decode_record(rows, topic, 0, 0, headers, value)
    expected = _reference(headers, value)
    assert [r[0] for r in rows.rows] == ["row"] * len(expected), rows.rows[0][13]
    compared = 0
    for row, (schema, ops, before, after) in zip(rows.rows, expected, strict=True):
        got = pa.ipc.open_stream(row[12]).read_all().combine_chunks()
        assert row[6] == schema and got["op"].to_pylist() == ops
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
    _, out, _ = _build(path)
    walker = arrow_rows.native
    counting = arrow_rows.native = _CountingWalker(walker)
    try:
        compared = sum(_assert_record(r.topic, dict(r.headers), r.value) for r in out if isinstance(r, Record))
    finally:
        arrow_rows.native = walker
    events = sum(isinstance(ev, E.RowsEvent) and ev.type_code not in _PYTHON_ONLY for r in out if isinstance(r, Record)
                 for ev in (item.event for item in record_events(dict(r.headers), r.value)))
    assert counting.left == 0 and counting.decoded == events, (path.name, counting.decoded, counting.left, events)
    return compared


def test_land_images_equal_the_row_dict_reference() -> None:
    """Every corpus file with rows, as records (the sakila dump aside: gzip, and slow)."""
    total = sum(assert_land_images_equal_reference(e.path) for e in ENTRIES
                if e.path.name not in BROKEN and e.path.suffix != ".gz")
    assert total > 400


def test_snapshot_rows_land_like_before() -> None:
    """Snapshot entries hold row dicts (no binlog rows event): decode.py turns those into columns."""
    headers, value = _record([[[1, "a", _b64(b"\x00\xff")], [2, None, None]], [[3, "ç", _b64(b"")]], []])
    assert _assert_record("db.t", headers, value) == 3


def test_snapshot_json_null_documents_land_as_text_null() -> None:
    """A snapshot's JSON null document lands as the JSON text "null", SQL NULL as the lake's NULL."""
    headers, value = json_null_record()
    rows = _Out()
    decode_record(rows, "db.t", 0, 0, headers, value)
    after = pa.ipc.open_stream(rows.rows[0][12]).read_all()["after"].combine_chunks()
    assert after.field("j").to_pylist() == ["null", None, "[null]", '"null"']
    assert _assert_record("db.t", headers, value) == 4


@pytest.mark.parametrize("name", ["zendesk-maxwell/binlog.000004", "alibaba-canal/mysql-bin.000001",
                                  "apecloud-mysql-binlog-connector-rust/mysql-bin.000080"])
def test_corrupted_rows_land_alike(name) -> None:
    """Every single-byte corruption of a file's first rows events gives the same lake values or the same
    error (message and position) through the C walker as through the Python columnar decoder."""
    assert_corruptions_alike(CORPUS / name, arrow_rows.compile_arrow_rows, lake_values, 2000)


def test_a_task_shipping_to_the_driver_stops_past_its_share() -> None:
    """decode_partition(ship=N): the whole output while it holds at most N row changes; past that, one
    ``withheld`` row and nothing more (the driver then decodes the batch the cached way)."""
    _, out, _ = _build(CORPUS / "alibaba-canal" / "mysql-bin.000001", max_record_bytes=2000)
    records = [r for r in out if isinstance(r, Record)]
    batch = pa.RecordBatch.from_pylist([
        {"topic": r.topic, "partition": 0, "offset": i, "headers": [{"key": k, "value": v} for k, v in r.headers],
         "value": r.value} for i, r in enumerate(records)])
    whole = pa.Table.from_batches(list(decode_partition([batch])))
    total = sum(whole.column("rows").to_pylist()[i] or 0 for i in range(len(whole)))
    assert len(records) > 5 and total > 20
    assert pa.Table.from_batches(list(decode_partition([batch], ship=total))).equals(whole)
    cut = pa.Table.from_batches(list(decode_partition([batch], ship=total // 2)))
    assert cut.column("kind").to_pylist()[-1] == "withheld" and len(cut) == 1
