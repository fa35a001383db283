"""The lake's value conversions and schema rules (streaming_job/decode/lake_types.py), without Spark.

Expected values are computed independently (datetime arithmetic), not with the functions under test.
"""

from __future__ import annotations

import datetime
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from ingester.records.format import ChunkAssembler, chunk_index
from streaming_job.decode.arrow_rows import column_array
from streaming_job.decode.decode import ChunkPiece, Reader, _Out, reassemble
from streaming_job.decode.lake_types import date_days, datetime_micros, time_micros, widens

EPOCH = datetime.datetime(1970, 1, 1)


@pytest.mark.parametrize("text", ["1000-01-01 00:00:00", "1969-12-31 23:59:59.5", "2024-02-29 12:34:56.123456",
                                  "9999-12-31 23:59:59.99", "2038-01-19 03:14:07.999"])
def test_datetime_micros(text: str) -> None:
    want = (datetime.datetime.fromisoformat(text) - EPOCH) // datetime.timedelta(microseconds=1)
    assert datetime_micros(text) == want


@pytest.mark.parametrize("text", ["0000-00-00", "2024-00-00", "2024-05-00", "0000-00-00 00:00:00",
                                  "2024-00-00 00:00:00"])
def test_zero_dates_are_null(text: str) -> None:
    assert (date_days if len(text) == 10 else datetime_micros)(text) is None


def test_date_days() -> None:
    assert date_days("1970-01-01") == 0
    assert date_days("1969-12-31") == -1
    assert date_days("2024-02-29") == (datetime.date(2024, 2, 29) - datetime.date(1970, 1, 1)).days


@pytest.mark.parametrize(("text", "micros"), [
    ("00:00:00", 0), ("-00:00:00.5", -500_000), ("838:59:59", 838 * 3_600_000_000 + 59 * 60_000_000 + 59_000_000),
    ("-838:59:58.999999", -(838 * 3_600_000_000 + 59 * 60_000_000 + 58_999_999)), ("-00:00:00.000001", -1),
    ("12:34:56.789", 45_296_789_000),
])
def test_time_micros(text: str, micros: int) -> None:
    assert time_micros(text) == micros


@pytest.mark.parametrize(("old", "new", "ok"), [
    ("int", "bigint", True), ("bigint", "int", False), ("tinyint", "smallint", True), ("float", "double", True),
    ("double", "float", False), ("int", "decimal(10,0)", True), ("int", "decimal(9,0)", False),
    ("decimal(5,2)", "decimal(7,3)", True), ("decimal(5,2)", "decimal(6,3)", True),
    ("decimal(5,2)", "decimal(5,3)", False), ("date", "timestamp_ntz", True),
    ("int", "string", False), ("string", "int", False), ("timestamp", "timestamp_ntz", False),
    ("bigint", "decimal(20,0)", True),
])
def test_widening_rules(old: str, new: str, ok: bool) -> None:
    assert widens(old, new) is ok


def _piece(i: int, n: int) -> dict[str, bytes]:
    return {"binlake.chunk": f"{i}/{n}".encode(), "binlake.seq": bytes(16)}


def test_chunks_cut_by_a_split_go_to_the_driver_and_come_back_whole() -> None:
    """A task whose offset range starts or ends inside a chunked record hands those pieces on."""
    assert chunk_index(_piece(1, 3)) == (1, 3) and chunk_index({}) is None
    first, second = Reader(), Reader()
    out1, out2 = _Out(), _Out()
    first.feed(out1, "t", 0, 10, _piece(0, 3), b"garbage-0")
    first.finish(out1)
    second.feed(out2, "t", 0, 11, _piece(1, 3), b"garbage-1")
    second.feed(out2, "t", 0, 12, _piece(2, 3), b"garbage-2")
    second.finish(out2)
    pieces = [r for r in out1.rows + out2.rows if r.kind == "chunk"]
    assert [r.offset for r in pieces] == [10, 11, 12]
    rows, carried = reassemble([ChunkPiece(r.topic, r.partition, r.offset, r.headers or b"", r.raw or b"")
                                for r in pieces], _no_fetch)
    # Reassembled whole (the bytes are no record, so it is one error row for the first offset, not three).
    assert [(r.kind, r.offset) for r in rows] == [("error", 12)] and carried == []
    assert ChunkAssembler().feed("p", _piece(0, 1), b"x") == b"x"


def _no_fetch(topic: str, partition: int, start: int, end: int) -> list:
    raise AssertionError(f"nothing to fetch, asked for {topic}[{partition}] {start}..{end}")


def test_a_record_cut_by_the_batch_end_is_carried_over_and_read_again_by_the_next_batch() -> None:
    """maxOffsetsPerTrigger cut a 3-chunk record after its first chunk (offset 5): this batch carries it
    over; the next one starts at offset 6 and reads offset 5 again from Kafka."""
    rows, carried = reassemble([ChunkPiece("t", 0, 5, _pickle(_piece(0, 3)), b"garbage-0")], _no_fetch)
    assert rows == [] and carried == [("t", 0, 5)]
    asked = []

    def fetch(topic: str, partition: int, start: int, end: int) -> list:
        asked.append((topic, partition, start, end))
        return [(5, _piece(0, 3), b"garbage-0")]

    rows, carried = reassemble([ChunkPiece("t", 0, 6, _pickle(_piece(1, 3)), b"garbage-1"),
                                ChunkPiece("t", 0, 7, _pickle(_piece(2, 3)), b"garbage-2")], fetch)
    assert asked == [("t", 0, 5, 6)] and carried == []
    # Whole again (the bytes are no record: one error row at the last chunk's offset).
    assert [(r.kind, r.offset) for r in rows] == [("error", 7)] and "bad magic" in (rows[0].error or "")


def test_a_chunk_whose_head_kafka_does_not_give_back_is_an_error_not_lost() -> None:
    rows, carried = reassemble([ChunkPiece("t", 0, 9, _pickle(_piece(2, 3)), b"x")],
                               lambda *a: [(8, _piece(1, 3), b"y")])
    assert carried == [] and [(r.kind, r.offset) for r in rows] == [("error", 8), ("error", 9)]
    assert all("earlier chunks are missing" in (r.error or "") for r in rows)


def _pickle(headers: dict[str, bytes]) -> bytes:
    import pickle

    return pickle.dumps(headers)


def _random_datetimes(rnd: random.Random, n: int) -> list[str | None]:
    out: list[str | None] = []
    for _ in range(n):
        y, mo, d = rnd.randint(1000, 9999), rnd.randint(1, 12), rnd.randint(1, 28)
        text = f"{y:04d}-{mo:02d}-{d:02d} {rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}"
        fsp = rnd.choice([0, 0, 1, 3, 6])
        out.append(text + (f".{rnd.randrange(10 ** fsp):0{fsp}d}" if fsp else ""))
    return [*out, None, "1970-01-01 00:00:00", "1969-12-31 23:59:59.999999", "9999-12-31 23:59:59.999999"]


@pytest.mark.parametrize("zero", [None, "0000-00-00 00:00:00", "2024-00-00 00:00:00", "2024-05-00 10:00:00",
                                  "0000-01-01 00:00:00", "0000-12-31 23:59:59"])  # year 0: partly zero (NULL)
def test_arrow_parses_datetimes_and_dates_like_the_reference_conversion(zero: str | None) -> None:
    """Differential: the columnar path (Arrow's parser, falling back to Python for zero dates) against
    lake_types' per-value conversions, themselves checked against datetime arithmetic above."""
    values = [*_random_datetimes(random.Random(7), 2000), zero]
    for typ in (pa.timestamp("us"), pa.timestamp("us", tz="UTC")):
        got = column_array(values, typ, datetime_micros, False).cast(pa.int64()).to_pylist()
        assert got == [None if v is None else datetime_micros(v) for v in values]
    days = [None if v is None else v[:10] for v in values]
    assert column_array(days, pa.date32(), date_days, False).cast(pa.int32()).to_pylist() == \
        [None if v is None else date_days(v) for v in days]


def test_decimals_keep_every_digit_or_fail() -> None:
    typ = pa.decimal128(12, 4)
    values = ["0.0000", "-12345678.9012", "99999999.9999", None, "-0.0001"]
    assert column_array(values, typ, None, False).to_pylist() == [None if v is None else Decimal(v) for v in values]
    assert column_array([2**64 - 1, None], pa.decimal128(20, 0), None, False).to_pylist() == [Decimal(2**64 - 1), None]
    with pytest.raises(pa.ArrowInvalid):
        column_array(["1.00005"], typ, None, False)  # a fifth fraction digit would be lost


def test_text_columns_take_labels_as_text_and_refuse_invalid_utf8() -> None:
    assert column_array(["plain", 3, None], pa.string(), None, True).to_pylist() == ["plain", "3", None]
    with pytest.raises(UnicodeEncodeError):  # the record becomes an undecodable-record error, never lost
        column_array([b"\xff\xfe"], pa.string(), None, True)
