"""Row packets of a text result set: the reference parser and the native reader agree, and the native
reader leaves to Python every packet it does not take whole (the server's side is proven in
tests/integration/test_snapshot_reader.py)."""

from __future__ import annotations

import importlib
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingester.sources.resultset import parse_row

# Imported directly, not through resultset (which BINLAKE_PURE_PYTHON switches off): not built, these fail
native = importlib.import_module("ingester.sources._textrows")


def _lenenc(data: bytes | None) -> bytes:
    if data is None:
        return b"\xfb"
    n = len(data)
    if n < 0xFB:
        head = bytes([n])
    elif n < 1 << 16:
        head = b"\xfc" + n.to_bytes(2, "little")
    elif n < 1 << 24:
        head = b"\xfd" + n.to_bytes(3, "little")
    else:
        head = b"\xfe" + n.to_bytes(8, "little")
    return head + data


def _packet(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq & 0xFF]) + payload


def test_values_by_kind() -> None:
    payload = b"".join(_lenenc(v) for v in (b"\xff\x00", b"12.50", "né".encode(), b"a\xffb", b"-42", None))
    assert parse_row(payload, b"bauria") == [b"\xff\x00", "12.50", "né", "a\ufffdb", -42, None]
    big = b"x" * 300 + b"y" * 70_000
    assert parse_row(_lenenc(big[:300]) + _lenenc(big), b"bb") == [big[:300], big]
    assert parse_row(b"\xfe" + (3).to_bytes(8, "little") + b"abc", b"a") == ["abc"]  # an 8-byte length


@pytest.mark.parametrize(("payload", "kinds", "error"), [
    (b"\x01a", b"aa", "ends before its column 2 of 2"),
    (b"\x05ab", b"a", "column 1's 5 bytes at byte 1 run past it"),
    (b"\xfc\x01", b"a", "cut in column 1's length at byte 0"),
    (b"\xff", b"a", "length prefix 0xff at byte 0"),
    (b"\x01a\x00", b"a", "1 bytes after its 1 columns"),
])
def test_malformed_packets_name_the_byte(payload: bytes, kinds: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_row(payload, kinds)
    assert native.text_rows(_packet(payload, 3), 0, 3, kinds, -1) == ([], 0, 3)  # it takes none of them: Python raises


_value = st.one_of(st.none(), st.binary(max_size=300), st.text(max_size=80).map(str.encode),
                   st.integers(-(1 << 70), 1 << 70).map(lambda i: str(i).encode()))


@given(st.lists(st.tuples(st.sampled_from(b"baur"), _value), min_size=1, max_size=8), st.integers(1, 40),
       st.integers(0, 255))
def test_native_rows_equal_the_reference(columns, count, seq) -> None:
    kinds = bytes(k for k, _ in columns)
    kinds = bytes(ord("b") if k == ord("a") else k for k in kinds)  # 'a' refuses non-ASCII: tested below
    rows = [[v for _, v in columns]] * count
    payloads = [b"".join(_lenenc(v) for v in row) for row in rows]
    stream = b"".join(_packet(p, seq + n) for n, p in enumerate(payloads))
    got, pos, next_seq = native.text_rows(stream, 0, seq, kinds, -1)
    try:
        expected = [parse_row(p, kinds) for p in payloads]
    except UnicodeDecodeError:  # 'u' is strict: the native reader leaves the packet to Python, which raises
        assert (got, pos, next_seq) == ([], 0, seq)
        return
    assert got == expected
    assert (pos, next_seq) == (len(stream), (seq + count) & 0xFF)
    assert native.text_rows(stream, 0, seq, kinds, 2)[0] == got[:2]  # the limit


def test_native_reader_stops_where_python_must_take_over() -> None:
    row = _lenenc(b"7") + _lenenc(b"x")
    eof = b"\xfe\x00\x00\x02\x00"
    stream = _packet(row, 1) + _packet(row, 2) + _packet(eof, 3)
    assert native.text_rows(stream, 0, 1, b"ia", -1) == ([[7, "x"], [7, "x"]], len(stream) - 9, 3)  # at the EOF
    assert native.text_rows(stream, 0, 1, b"ii", -1) == ([], 0, 1)  # int("x"): Python raises the same error
    assert native.text_rows(stream, 0, 2, b"ia", -1) == ([], 0, 2)  # out of sequence: the framer raises
    assert native.text_rows(stream[:-3], 4 + len(row), 2, b"ia", -1) == ([[7, "x"]], len(stream) - 9, 3)  # cut
    err = b"\xff\x15\x04#28000denied"
    assert native.text_rows(_packet(err, 1), 0, 1, b"a", -1) == ([], 0, 1)
    multi = b"\xff\xff\xff\x01" + b"\x00" * 16  # the first piece of a 16 MB packet: the framer joins it
    assert native.text_rows(_packet(row, 1) + multi, 0, 1, b"ia", -1)[0] == [[7, "x"]]
    assert native.text_rows(_packet(_lenenc("é".encode()), 1), 0, 1, b"a", -1) == ([], 0, 1)  # not ASCII
    for digits in (b"", b"-", b"+1", b" 1", b"1" * 40):  # left to Python's int()
        assert native.text_rows(_packet(_lenenc(digits), 1), 0, 1, b"i", -1)[0] == []
    assert native.text_rows(_packet(_lenenc(b"18446744073709551615"), 1), 0, 1, b"i", -1)[0] == [[2**64 - 1]]


def _json_rows(stream: bytes, seq: int, kinds: bytes, limit: int = -1, max_bytes: int = 1 << 30,
               carry: int = 0) -> tuple[list[bytes], bool, int, Any, int, int]:
    return native.text_rows_json(stream, 0, seq, kinds, limit, max_bytes, carry)


_json_value = st.one_of(st.none(), st.text(max_size=80).map(str.encode), st.binary(max_size=40),
                        st.integers(-(1 << 63), (1 << 64) - 1).map(lambda i: str(i).encode()),
                        st.sampled_from([b"007", b"-007", b"-0", b"000", b"0"]))


@given(st.lists(st.tuples(st.sampled_from(b"auri"), _json_value), min_size=1, max_size=8), st.integers(1, 30),
       st.integers(0, 255))
def test_native_json_is_orjsons_json_of_the_rows(columns, count, seq) -> None:
    """Each row's JSON is byte for byte what orjson writes for the row text_rows gives; a packet whose values
    text_rows would not take, or an 'r' value that is not UTF-8, is left to Python."""
    kinds = bytes(k for k, _ in columns)
    payload = b"".join(_lenenc(v) for _, v in columns)
    stream = b"".join(_packet(payload, seq + n) for n in range(count))
    fragments, continues, n, last, pos, next_seq = _json_rows(stream, seq, kinds)
    taken = native.text_rows(stream, 0, seq, kinds, -1)[0]
    utf8 = all(k != ord("r") or v is None or _is_utf8(v) for k, v in columns)
    if not taken or not utf8:
        assert (fragments, n, last, pos, next_seq) == ([], 0, None, 0, seq)
        return
    assert not continues and len(fragments) == 1 and n == count and last == taken[-1]
    assert b"[" + fragments[0] + b"]" == orjson.dumps(taken)
    assert (pos, next_seq) == (len(stream), (seq + count) & 0xFF)


def _is_utf8(v: bytes) -> bool:
    try:
        v.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_native_json_integers_and_escapes() -> None:
    values = [b"00042", b"-0007", b"-000", b"0", b"18446744073709551615", b"-9223372036854775808"]
    stream = _packet(b"".join(_lenenc(v) for v in values), 0)
    fragments = _json_rows(stream, 0, b"iiiiii")[0]
    assert fragments == [b"[42,-7,0,0,18446744073709551615,-9223372036854775808]"]
    text = '"\\/\x00\x1f\x7f\b\t\n\f\r é😀\u2028'
    fragments = _json_rows(_packet(_lenenc(text.encode()) + _lenenc(b"a\\b"), 5), 5, b"ua")[0]
    assert b"[" + fragments[0] + b"]" == orjson.dumps([[text, "a\\b"]])


@given(st.lists(st.binary(min_size=0, max_size=60), min_size=1, max_size=40), st.integers(2, 200),
       st.integers(0, 150))
def test_native_json_groups_stay_within_max_bytes(values, max_bytes, carry) -> None:
    """Rows are grouped greedily: each bracketed group within max_bytes unless it is one row, the first group
    continuing the caller's open group (of bracketed size ``carry``) when the row fits in it."""
    rows = [[v.hex()] for v in values]
    stream = b"".join(_packet(_lenenc(r[0].encode()), n) for n, r in enumerate(rows))
    fragments, continues, n, last, _, _ = _json_rows(stream, 0, b"a", max_bytes=max_bytes, carry=carry)
    assert n == len(rows) and last == rows[-1]
    row_json = [orjson.dumps(r) for r in rows]
    assert continues == (carry > 0 and carry + len(row_json[0]) + 1 <= max_bytes)
    assert b",".join(fragments) == b",".join(row_json)  # every row once, in order
    for k, fragment in enumerate(fragments):
        size = (carry if continues and k == 0 else 1) + len(fragment) + 1
        assert size <= max_bytes or fragment in row_json  # within the bound, or one row alone
        if k + 1 < len(fragments):  # closed only when the next row does not fit
            following = orjson.loads(b"[" + fragments[k + 1] + b"]")[0]
            assert size + len(orjson.dumps(following)) + 1 > max_bytes


def test_native_json_limit_and_refusals() -> None:
    row = _lenenc(b"7") + _lenenc(b"x")
    stream = _packet(row, 1) + _packet(row, 2) + _packet(_lenenc(b"7") + _lenenc(b"\xff"), 3) + _packet(row, 4)
    assert _json_rows(stream, 1, b"ia", limit=1)[:5] == ([b'[7,"x"]'], False, 1, [7, "x"], 4 + len(row))
    fragments, _, n, _, pos, seq = _json_rows(stream, 1, b"ir")  # b"\xff" is not UTF-8: Python replaces it
    assert (fragments, n, pos, seq) == ([b'[7,"x"],[7,"x"]'], 2, 2 * (4 + len(row)), 3)
    assert _json_rows(stream, 1, b"ib")[2] == 0  # bytes are not text
