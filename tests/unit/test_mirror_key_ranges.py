"""The driver's mirror files' ranges of a text first key (delta/mirror_driver.py): from Delta statistics that Delta's
writer may have cut to 32 characters, searched with a batch's keys in Arrow's order."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from streaming_job.batch.key_range import KeyRange
from streaming_job.delta.commit import LiveFile
from streaming_job.delta.mirror_driver import MirrorFiles, file_range, sorted_keys


def _stats(low, high) -> str:
    return orjson.dumps({"numRecords": 2, "minValues": {"k": low}, "maxValues": {"k": high}}).decode()


def test_a_text_keys_range_is_open_above_where_its_largest_value_may_have_been_cut():
    assert file_range(_stats("apple", "pear"), "k", text=True) == KeyRange("apple", "pear")
    cut = "x" * 32  # as Delta's writer leaves a longer value
    assert file_range(_stats("apple", cut), "k", text=True) == KeyRange("apple", None)
    # 15 characters, 36 UTF-8 bytes: a count in bytes or UTF-16 units may have cut it
    assert file_range(_stats("a", "ключ😀" * 3), "k", text=True) == KeyRange("a", None)
    assert file_range(_stats("a", "é" * 15), "k", text=True) == KeyRange("a", "é" * 15)  # 30 bytes: whole
    # the integer ranges as before; text only where asked for (verify's cuts compare integers)
    assert file_range(_stats(3, 9), "k", text=True) == KeyRange(3, 9)
    assert file_range(_stats("apple", "pear"), "k") is None
    assert file_range(_stats(3, "pear"), "k", text=True) is None
    assert file_range(None, "k", text=True) is None


def test_a_batchs_text_keys_are_in_arrows_order():
    values = ["b", "B", "é", "e", "😀", "\uffff", "ключ", "", "a b", "ab", "z"]
    column = pa.chunked_array([values[:5], [*values[5:], None]])
    by_arrow = pc.take(pa.array(values), pc.sort_indices(pa.array(values))).to_pylist()
    assert list(sorted_keys(column)) == by_arrow  # code point order: "\uffff" before the emoji
    assert list(sorted_keys(pa.chunked_array([[5, -2, 9]]))) == [-2, 5, 9]


def _files(ranges: dict[str, KeyRange | None]) -> MirrorFiles:
    stats = orjson.dumps({"numRecords": 5}).decode()
    live = {n: LiveFile(n, 100, stats, None, {}, 0) for n in ranges}
    return MirrorFiles(1, live, dict(ranges), dict.fromkeys(ranges, 100))


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
