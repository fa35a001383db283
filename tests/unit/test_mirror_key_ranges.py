"""The driver's mirror files' ranges of a first key (batch/key_stats.py, delta/mirror_driver.py): from Delta
statistics (text cut by Delta's writer to 32 characters, timestamps to the millisecond), searched with a batch's keys
in the same order; the keys as numbers where they are dates, timestamps or decimals of scale 0."""

from __future__ import annotations

import datetime
from decimal import Decimal

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streaming_job.batch.key_index import BatchKeys, file_keys, key_numbers
from streaming_job.batch.key_range import KeyRange
from streaming_job.batch.key_stats import file_range, sorted_keys, stats_values
from streaming_job.delta.commit import LiveFile
from streaming_job.delta.mirror_driver import MirrorFiles

UTC = datetime.UTC


def _stats(low, high) -> str:
    return orjson.dumps({"numRecords": 2, "minValues": {"k": low}, "maxValues": {"k": high}}).decode()


def test_a_text_keys_range_is_open_above_where_its_largest_value_may_have_been_cut():
    assert file_range(_stats("apple", "pear"), "k", "string") == KeyRange("apple", "pear")
    cut = "x" * 32  # as Delta's writer leaves a longer value
    assert file_range(_stats("apple", cut), "k", "string") == KeyRange("apple", None)
    # 15 characters, 36 UTF-8 bytes: a count in bytes or UTF-16 units may have cut it
    assert file_range(_stats("a", "ключ😀" * 3), "k", "string") == KeyRange("a", None)
    assert file_range(_stats("a", "é" * 15), "k", "string") == KeyRange("a", "é" * 15)  # 30 bytes: whole
    # Delta 4.0's writer on 'a', 'z' * 40 and 'ключ' * 10: the largest cut to 32 characters, then U+10FFFF; every
    # value with those 32 characters lies below the next string after them
    delta = file_range(_stats("a", "ключ" * 8 + "\U0010ffff"), "k", "string")
    assert delta == KeyRange("a", "ключ" * 7 + "клюш") and "ключ" * 10 < delta.high
    assert file_range(_stats("a", "z" * 32 + "\U0010ffff"), "k", "string") == KeyRange("a", "z" * 31 + "{")
    assert file_range(_stats("a", "\U0010ffff" * 33), "k", "string") == KeyRange("a", None)  # no next string
    # integer ranges; text only where asked for (verify's cuts compare integers)
    assert file_range(_stats(3, 9), "k", "bigint") == file_range(_stats(3, 9), "k") == KeyRange(3, 9)
    assert file_range(_stats("apple", "pear"), "k") is None
    assert file_range(_stats(3, "pear"), "k", "string") is None
    assert file_range(None, "k", "string") is None


def test_a_batchs_text_keys_are_in_arrows_order():
    values = ["b", "B", "é", "e", "😀", "\uffff", "ключ", "", "a b", "ab", "z"]
    column = pa.chunked_array([values[:5], [*values[5:], None]])
    by_arrow = pc.take(pa.array(values), pc.sort_indices(pa.array(values))).to_pylist()
    assert list(sorted_keys(column)) == by_arrow  # code point order: "\uffff" before the emoji
    assert list(sorted_keys(pa.chunked_array([[5, -2, 9]]))) == [-2, 5, 9]


def _files(ranges: dict[str, KeyRange | None]) -> MirrorFiles:
    stats = orjson.dumps({"numRecords": 5}).decode()
    live = {n: LiveFile(n, 100, stats, None, {}, 0) for n in ranges}
    return MirrorFiles(1, live, dict(ranges), dict.fromkeys(ranges, 100), "k", "string")


def test_the_files_whose_text_range_may_hold_a_batchs_key():
    files = _files({"f1": KeyRange("a", "c"), "f2": KeyRange("d", "f"), "f3": KeyRange("m", None), "f4": None})
    assert files.holding(pa.chunked_array([["b"]])) == ["f1", "f4"]
    assert files.holding(pa.chunked_array([["g", "h"]])) == ["f4"]  # between ranges: none but unknown
    assert files.holding(pa.chunked_array([["zzz"]])) == ["f3", "f4"]  # open above
    assert files.holding(pa.chunked_array([["c", "d"]])) == ["f1", "f2", "f4"]  # bounds included
    assert files.holding(pa.chunked_array([["l"]])) == ["f4"]  # below the open range's lowest


def test_small_text_keyed_files_are_compacted_in_key_order_unknown_ranges_last():
    files = _files({"f1": KeyRange("m", None), "f2": None, "f3": KeyRange("b", "c")})
    assert files.small(1000, 2, set(), 10_000) == ["f3", "f1", "f2"]


# Statistics as Delta 4.0's own writer left them (Spark 4.0, session time zone UTC) for a file of two rows:
# d 0001-01-01 / 2026-01-02, ts 0001-01-01 00:00:00.000999 / 2026-01-02 03:04:05.123456 (UTC),
# ntz 2026-01-02 03:04:05.987654 / 9999-12-31 23:59:59.999999, dec (10,2) -0.01 / 12345678.91,
# big (38,4) -1 / 123456789012345678.1234
DELTA_STATS = ('{"numRecords":2,"minValues":{"d":"0001-01-01","ts":"0001-01-01T00:00:00.000Z",'
               '"ntz":"2026-01-02T03:04:05.987","dec":-0.01,"big":-1.0000},"maxValues":{"d":"2026-01-02",'
               '"ts":"2026-01-02T03:04:05.123Z","ntz":"9999-12-31T23:59:59.999","dec":12345678.91,'
               '"big":123456789012345678.1234},"nullCount":{"d":0,"ts":0,"ntz":0,"dec":0,"big":0}}')


def _micros(value: datetime.datetime) -> int:
    return (value - datetime.datetime(1970, 1, 1, tzinfo=UTC)) // datetime.timedelta(microseconds=1)


def test_ranges_of_dates_timestamps_and_decimals_hold_what_deltas_writer_described():
    """A timestamp's statistic is cut to the millisecond: the range lets in the rest of its last millisecond."""
    d = file_range(DELTA_STATS, "d", "date")
    assert d == KeyRange(datetime.date(1, 1, 1).toordinal() - datetime.date(1970, 1, 1).toordinal(), 20455)
    ts = file_range(DELTA_STATS, "ts", "timestamp")
    low, high = datetime.datetime(1, 1, 1, 0, 0, 0, 999, UTC), datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, UTC)
    assert ts is not None and ts.low <= _micros(low) and _micros(high) <= ts.high
    assert ts.high == _micros(datetime.datetime(2026, 1, 2, 3, 4, 5, 123999, UTC))
    ntz = file_range(DELTA_STATS, "ntz", "timestamp_ntz")
    assert ntz == KeyRange(_micros(datetime.datetime(2026, 1, 2, 3, 4, 5, 987000, UTC)),
                           _micros(datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, UTC)))
    assert file_range(DELTA_STATS, "dec", "decimal(10,2)") == KeyRange(Decimal("-0.01"), Decimal("12345678.91"))
    big = file_range(DELTA_STATS, "big", "decimal(38,4)")  # beyond a float's digits: exact
    assert big == KeyRange(Decimal(-1), Decimal("123456789012345678.1234"))
    # another session time zone's offset; an integer decimal in exponent form; a fraction where scale 0 is declared
    other = _stats("2026-01-02T04:04:05.123+01:00", "2026-01-02T04:04:05.123+01:00")
    assert file_range(other, "k", "timestamp") == KeyRange(ts.high - 999, ts.high)
    assert file_range('{"minValues":{"k":-1E+20},"maxValues":{"k":18446744073709551615}}', "k", "decimal(20,0)") == \
        KeyRange(-10**20, 2**64 - 1)
    assert file_range('{"minValues":{"k":1.5},"maxValues":{"k":3}}', "k", "decimal(20,0)") is None
    assert file_range(_stats("not a date", "2026-01-01"), "k", "date") is None


@pytest.mark.parametrize(("kind", "values"), [
    (pa.date32(), [datetime.date(1000, 1, 1), datetime.date(2026, 12, 2), datetime.date(9999, 12, 31)]),
    (pa.timestamp("us", "UTC"), [datetime.datetime(1970, 1, 1, 0, 0, 1, 999999, UTC),
                                 datetime.datetime(2038, 1, 19, 3, 14, 7, 1, UTC)]),
    (pa.timestamp("us"), [datetime.datetime(1000, 1, 1, 0, 0, 0, 1),
                          datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)]),
    (pa.decimal128(12, 3), [Decimal("-999999999.999"), Decimal("0.001"), Decimal("5")]),
    (pa.decimal128(20, 0), [Decimal(-10**19), Decimal(2**64 - 1)]),
    (pa.string(), ["a", "ключ" * 10, "ключ" * 9 + "😀"]),
    (pa.string(), ["😀" * 40, "😀" * 41]),
])
def test_a_driver_files_statistics_give_a_range_holding_its_keys(kind, values):
    """write_mirror_file's statistics (stats_values, in Delta's form) read back as a range holding every key,
    compared with the batch's keys as ``sorted_keys`` gives them."""
    column = pa.chunked_array([pa.array(values, kind)])
    low, high = stats_values(column)
    stats = orjson.dumps({"minValues": {"k": low}, "maxValues": {"k": high}}).decode()
    found = file_range(stats, "k", _lake_type(kind))
    keys = sorted_keys(column)
    assert found is not None and found.low <= keys[0] and keys[-1] <= found.high, (stats, found, keys)
    if not (pa.types.is_timestamp(kind) or kind == pa.string()):  # exact; cut timestamps and long text
        assert found == KeyRange(keys[0], keys[-1])


def _lake_type(kind: pa.DataType) -> str:
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if kind == pa.string():
        return "string"
    return {pa.date32(): "date", pa.timestamp("us", "UTC"): "timestamp", pa.timestamp("us"): "timestamp_ntz"}[kind]


def test_key_numbers_of_a_files_timestamps_in_nanoseconds_and_of_signed_decimals():
    """Spark's files may keep timestamps in nanoseconds (INT96): the same microseconds as the batch's; a signed
    DECIMAL(20,0) key's negative values (the cast to uint64 failed) and ones past 64 bits."""
    micros = [datetime.datetime(2026, 1, 1, 0, 0, 0, i, UTC) for i in (1, 2, 999)]
    batch = key_numbers(pa.array(micros, pa.timestamp("us", "UTC")))
    spark = key_numbers(pa.array(micros, pa.timestamp("ns")))
    assert batch is not None and spark is not None and list(batch) == list(spark)
    assert list(key_numbers(pa.array([Decimal(-5), Decimal(3)], pa.decimal128(20, 0)))) == [-5, 3]
    wide = key_numbers(pa.array([Decimal(-5), Decimal(2**64 - 1)], pa.decimal128(20, 0)))
    assert wide is not None and list(wide) == [-5, 2**64 - 1]
    assert key_numbers(pa.array([Decimal("1.5")], pa.decimal128(4, 1))) is None
    # a batch's keys beyond 64 bits looked up in a file's uint64 keys
    keys = file_keys(pa.table({"k": pa.array([Decimal(v) for v in (3, 4, 5, 2**64 - 1)], pa.decimal128(20, 0))}))
    batch_keys = BatchKeys(pa.table({"k": pa.array([Decimal(-1), Decimal(4), Decimal(2**64 - 1)],
                                                   pa.decimal128(20, 0))}), ["k"])
    assert list(keys.positions(batch_keys)) == [1, 3]
