"""MySQL's partial JSON updates (ingester.codec.json_diff): diff vectors built by hand and a real one from MySQL 8,
decoded and applied as the server applies them; hostile diffs raise only BinlogError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingester.codec.errors import BinlogError
from ingester.codec.json_diff import apply_json_diff, decode_json_diff
from ingester.codec.jsonb import JSON_NULL, decode_json_binary, to_json_text
from tests.corpus import CORPUS as CORPUS_ROOT
from tests.harness.jsonb_encoder import (
    INSERT,
    REMOVE,
    REPLACE,
    diff_entry,
    encode,
    event_bodies,
    json_values,
    only_binlog_errors,
)

CORPUS = CORPUS_ROOT / "rust-mysql-common"


def test_diff_values_are_never_json_null() -> None:
    """A diff's value replaces part of a document (a path is never the whole document): null is None."""
    diff = diff_entry(REPLACE, "$.a", encode(None)) + diff_entry(INSERT, "$.b", b"")
    assert decode_json_diff(diff) == [("REPLACE", "$.a", None), ("INSERT", "$.b", None)]
    assert apply_json_diff({"a": 1}, diff) == {"a": None, "b": None}
    assert apply_json_diff(JSON_NULL, b"") is JSON_NULL  # an empty diff of the null document
    with pytest.raises(BinlogError, match="does not exist"):
        apply_json_diff(JSON_NULL, diff_entry(REPLACE, "$.a.b", encode(1)))


def test_real_partial_update_from_mysql_8() -> None:
    binlog = CORPUS / "json.binlog.000001"
    # Table mysql.t (id INT, json_col JSON, name VARCHAR AS (...), age INT AS (...)).
    # WRITE_ROWS: 10 bytes of post-header, count, bitmap, null bitmap, id (4), then the JSON column.
    first_row = event_bodies(binlog, 30)[0]
    length = struct.unpack_from("<I", first_row, 17)[0]
    joe = decode_json_binary(first_row[21 : 21 + length])
    assert to_json_text(joe) == '{"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}'
    # PARTIAL_UPDATE_ROWS: post-header (10), count, before bitmap, after bitmap, before image
    # (null bitmap + id), then value options (1 = PARTIAL_JSON), partial bits, null bitmap, and
    # the JSON column as a 4-byte length followed by the diff vector.
    partial = event_bodies(binlog, 39)[0]
    assert partial[18] == 1
    length = struct.unpack_from("<I", partial, 21)[0]
    diff = partial[25 : 25 + length]
    assert decode_json_diff(diff) == [("REPLACE", "$.age", 26)]
    assert apply_json_diff(joe, diff) == {"age": 26, "data": "xxxxxxxxxx", "name": "Joe"}


def test_diff_replace_insert_remove() -> None:
    document = {"a": 1, "cc": [10, 20, 30]}
    diff = (
        diff_entry(REPLACE, "$.a", encode("one"))
        + diff_entry(INSERT, "$.b", encode({"x": None}))
        + diff_entry(INSERT, "$.cc[1]", encode(15))
        + diff_entry(INSERT, "$.cc[99]", encode(99))  # past the end appends, like the server
        + diff_entry(REMOVE, "$.cc[0]")
        + diff_entry(REPLACE, "$.b.x", encode(2.5))
    )
    result = apply_json_diff(document, diff)
    assert result == {"a": "one", "b": {"x": 2.5}, "cc": [15, 20, 30, 99]}
    assert list(result) == ["a", "b", "cc"]  # inserted member sorted into MySQL's key order
    assert document == {"a": 1, "cc": [10, 20, 30]}  # the input is not modified
    assert decode_json_diff(diff) == [
        ("REPLACE", "$.a", "one"),
        ("INSERT", "$.b", {"x": None}),
        ("INSERT", "$.cc[1]", 15),
        ("INSERT", "$.cc[99]", 99),
        ("REMOVE", "$.cc[0]", None),
        ("REPLACE", "$.b.x", 2.5),
    ]


def test_diff_quoted_member_names() -> None:
    document = {"a b": [{'k"q': 1}], "é": {"\n": 0}}
    diff = (
        diff_entry(REPLACE, '$."a b"[0]."k\\"q"', encode(2))
        + diff_entry(REPLACE, '$."\\u00e9"."\\n"', encode(True))
        + diff_entry(INSERT, '$."a b"[0]."\\ud83d\\ude00"', encode("smile"))  # surrogate pair escape
        + diff_entry(REMOVE, "$.é")  # MySQL writes non-ASCII identifiers bare
    )
    result = apply_json_diff(document, diff)
    assert result == {"a b": [{'k"q': 2, "😀": "smile"}]}


def test_diff_long_value_uses_two_byte_length() -> None:
    value = encode("v" * 300)
    entry = diff_entry(REPLACE, "$[0]", value)
    assert entry[6] == 0xFC  # op, path length 4, "$[0]", then 0xfc + 2-byte value length
    assert apply_json_diff([1], entry) == ["v" * 300]


def test_diff_value_may_be_empty_json_null() -> None:
    assert apply_json_diff({"a": 1}, diff_entry(REPLACE, "$.a", b"")) == {"a": None}


def test_empty_diff_vector_is_a_copy() -> None:
    document = {"a": [1]}
    result = apply_json_diff(document, b"")
    assert result == document and result is not document and result["a"] is not document["a"]


@pytest.mark.parametrize(
    ("document", "diff"),
    [
        ({"a": 1}, diff_entry(REPLACE, "$.b", encode(1))),  # replace needs an existing member
        ([1], diff_entry(REPLACE, "$[1]", encode(1))),
        ({"a": 1}, diff_entry(INSERT, "$.a", encode(1))),  # insert needs a new member
        ({"a": 1}, diff_entry(REMOVE, "$.b")),
        ([1], diff_entry(REMOVE, "$[3]")),
        ({"a": 1}, diff_entry(REPLACE, "$[0]", encode(1))),  # array leg on an object
        ([1], diff_entry(INSERT, "$.a", encode(1))),  # member leg on an array
        (5, diff_entry(REPLACE, "$.a", encode(1))),
        ({"a": 1}, diff_entry(REPLACE, "$.x.y", encode(1))),  # missing intermediate member
        ({"a": 1}, diff_entry(REPLACE, "$", encode(1))),  # the root is never a diff target
        ({"a": 1}, diff_entry(REPLACE, "a", encode(1))),
        ({"a": 1}, diff_entry(REMOVE, "$.*")),  # wildcards are not concrete paths
        ([1], diff_entry(REMOVE, "$[last]")),
        ([1], diff_entry(REMOVE, "$[0 to 1]")),
        ([1], diff_entry(REMOVE, "$[" + "9" * 5000 + "]")),  # never handed to int()
        ({"a": 1}, diff_entry(REMOVE, '$."unterminated')),
        ({"a": 1}, diff_entry(REMOVE, '$."\\ud800"')),  # lone surrogate
        ({"a": 1}, diff_entry(REMOVE, '$."bad \\x escape"')),
        ({"a": 1}, bytes([3]) + diff_entry(REMOVE, "$.a")[1:]),  # operation 3 does not exist
        ({"a": 1}, b"\x02\x04$.a"),  # path shorter than declared
        ({"a": 1}, b"\x00\x03$.a"),  # value length missing
        ({"a": 1}, b"\x00\x03$.a\x05\x05\x01\x00"),  # value shorter than declared
        ({"a": 1}, b"\x00\x03$.a\x03\x99\x01\x00"),  # value of an unknown type
        ({"a": 1}, b"\x02\xfb"),  # NULL is not a length
        ({"a": 1}, b"\x02\xff"),
        ({"a": 1}, b"\x02\xfc\x03"),  # truncated 2-byte length
        ({"a": 1}, b"\x02\x03$.\xff"),  # path is not UTF-8
        ({"a": 1}, b"\x02"),
    ],
)
def test_diff_rejected(document: object, diff: bytes) -> None:
    with pytest.raises(BinlogError):
        apply_json_diff(document, diff)


def test_diff_cannot_nest_past_the_limit() -> None:
    deep: list = []
    for _ in range(98):
        deep = [deep]  # 99 levels
    assert apply_json_diff({"a": 1}, diff_entry(REPLACE, "$.a", encode(deep))) == {"a": deep}
    with pytest.raises(BinlogError, match="deeper than 100"):
        apply_json_diff({"a": [1]}, diff_entry(REPLACE, "$.a[0]", encode(deep)))


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_as_diff_raise_only_binlog_error(diff: bytes) -> None:
    only_binlog_errors(apply_json_diff, {"a": [1, {"b": 2}], "c": "d"}, diff)


paths = st.sampled_from(["$.a", "$.a[0]", "$.a[1].b", "$.c", '$."a"', "$[0]", "$.a[5]", "$.z"]) | st.text(
    max_size=12
)


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=3), paths, json_values | st.binary(max_size=20)),
        max_size=4,
    )
)
def test_structured_random_diffs_raise_only_binlog_error(entries: list) -> None:
    diff = b""
    for op, path, value in entries:
        raw = value if isinstance(value, bytes) else encode(value)
        diff += diff_entry(op, path, None if op == REMOVE else raw)
    only_binlog_errors(apply_json_diff, {"a": [1, {"b": 2}], "c": "d"}, diff)
