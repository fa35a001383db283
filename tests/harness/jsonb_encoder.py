"""MySQL's binary JSON built by the tests: an independent encoder written from the format description
(sql-common/json_binary.h in the MySQL server), partial-update diff vectors, real events' bodies from binlog files,
and Hypothesis' JSON values, for cross-checks of ingester.codec.jsonb and json_diff.

A value is a type byte and its data; objects and arrays start with an element count and a byte size (2 bytes each in
the small format, 4 in the large one), counted from the count field, then key entries (offset, 2-byte length) for
objects, then value entries (type byte + offset, or the scalar itself when it is inlined), then keys, then values.
Offsets are relative to the count field.
"""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import strategies as st

from ingester.codec.errors import BinlogError
from tests.harness.binlogs import packed_int


def _varlen(n: int) -> bytes:
    """Variable-length size: 7 bits per byte, least significant first, high bit = more follow."""
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _scalar(value: object) -> tuple[int, bytes]:
    if value is None:
        return 0x04, b"\x00"
    if value is True:
        return 0x04, b"\x01"
    if value is False:
        return 0x04, b"\x02"
    if isinstance(value, int):
        for kind, fmt in ((0x05, "<h"), (0x07, "<i"), (0x09, "<q"), (0x0A, "<Q")):
            try:
                return kind, struct.pack(fmt, value)
            except struct.error:
                continue
        raise ValueError(value)
    if isinstance(value, float):
        return 0x0B, struct.pack("<d", value)
    data = value.encode("utf-8")  # type: ignore[union-attr]
    return 0x0C, _varlen(len(data)) + data


def _container(value: dict | list, large: bool) -> tuple[int, bytes]:
    word = 4 if large else 2
    fmt = "<I" if large else "<H"
    is_object = isinstance(value, dict)
    if is_object:
        pairs = sorted(value.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
    else:
        pairs = [(None, item) for item in value]
    count = len(pairs)
    header = 2 * word + count * ((word + 2) if is_object else 0) + count * (1 + word)
    offset = header
    key_entries, keys = b"", b""
    for key, _ in pairs if is_object else ():
        raw = key.encode("utf-8")
        key_entries += struct.pack(fmt, offset) + struct.pack("<H", len(raw))
        keys += raw
        offset += len(raw)
    value_entries, values = b"", b""
    for _, item in pairs:
        kind, payload = _encode_value(item, large)
        inlined = kind in (0x04, 0x05, 0x06) or (large and kind in (0x07, 0x08))
        if inlined:  # the scalar itself fills the offset slot, sign-extended
            number = int.from_bytes(payload, "little", signed=True)
            value_entries += bytes([kind]) + number.to_bytes(word, "little", signed=True)
        else:
            value_entries += bytes([kind]) + struct.pack(fmt, offset)
            values += payload
            offset += len(payload)
    kind = (0x00 if is_object else 0x02) + (1 if large else 0)
    counts = struct.pack(fmt, count) + struct.pack(fmt, offset)
    return kind, counts + key_entries + value_entries + keys + values


def _encode_value(value: object, large: bool) -> tuple[int, bytes]:
    if isinstance(value, (dict, list)):
        if not large:
            try:
                return _container(value, False)
            except struct.error:  # an offset does not fit in 16 bits: MySQL uses the large format
                pass
        return _container(value, True)
    return _scalar(value)


def encode(value: object, large: bool = False) -> bytes:
    kind, payload = _encode_value(value, large)
    return bytes([kind]) + payload


def encode_decimal(text: str, precision: int, scale: int) -> bytes:
    """MySQL packed DECIMAL: 9-digit groups in 4 big-endian bytes, sign bit flipped, negatives inverted."""
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    whole = whole.lstrip("0").rjust(precision - scale, "0")
    frac = frac.ljust(scale, "0")
    leftover_bytes = [0, 1, 1, 2, 2, 3, 3, 4, 4]
    out = bytearray()
    lead = len(whole) % 9
    chunks = ([whole[:lead]] if lead else []) + [whole[i : i + 9] for i in range(lead, len(whole), 9)]
    chunks += [frac[i : i + 9] for i in range(0, len(frac), 9)]
    for chunk in chunks:
        out += int(chunk).to_bytes(4 if len(chunk) == 9 else leftover_bytes[len(chunk)], "big")
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def opaque(field_type: int, payload: bytes) -> bytes:
    return b"\x0f" + bytes([field_type]) + _varlen(len(payload)) + payload


def packed_datetime(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, us: int = 0) -> bytes:
    """In-memory packed DATETIME: ((year*13+month)<<5 | day)<<17 | h<<12 | m<<6 | s, then <<24 | usec."""
    whole = ((y * 13 + mo) << 5 | d) << 17 | h << 12 | mi << 6 | s
    return struct.pack("<q", whole << 24 | us)


def packed_time(h: int, mi: int, s: int, us: int = 0, negative: bool = False) -> bytes:
    """In-memory packed TIME: (hour<<12 | minute<<6 | second)<<24 | us, negated for negative times."""
    value = (h << 12 | mi << 6 | s) << 24 | us
    return struct.pack("<q", -value if negative else value)


def diff_entry(op: int, path: str, value: bytes | None = None) -> bytes:
    raw = path.encode("utf-8")
    out = bytes([op]) + packed_int(len(raw)) + raw
    return out if value is None else out + packed_int(len(value)) + value


REPLACE, INSERT, REMOVE = 0, 1, 2


def event_bodies(path: Path, event_type: int) -> list[bytes]:
    """Bodies (after the 19-byte header, before the CRC32) of the events of one type."""
    data = path.read_bytes()
    bodies, pos = [], 4
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        if data[pos + 4] == event_type:
            bodies.append(data[pos + 19 : pos + size - 4])
        pos += size
    return bodies


# Hypothesis: any JSON value.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=30,
)


def only_binlog_errors(call, *args) -> None:
    """Call ``call(*args)``: it returns, or raises BinlogError (any other exception fails the test)."""
    try:
        call(*args)
    except BinlogError:
        pass
