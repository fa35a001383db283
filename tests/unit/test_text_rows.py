"""Row packets of a text result set: the reference parser and the native reader agree, and the native
reader leaves to Python every packet it does not take whole (the server's side is proven in
tests/integration/test_snapshot_reader.py)."""

from __future__ import annotations

import importlib

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
