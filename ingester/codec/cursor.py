"""A bounds-checked little-endian reader over one event's bytes.

Every read checks the remaining length first, so a hostile length can never make the codec
allocate or read past the event; errors carry the absolute byte position in the stream.
"""

from __future__ import annotations

import struct

from .errors import BinlogError

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_I64 = struct.Struct("<q").unpack_from
_F64 = struct.Struct("<d").unpack_from


class Cursor:
    """Sequential reader of ``buf[pos:end]``; ``base`` maps offsets to stream positions."""

    __slots__ = ("base", "buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None, base: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.base = base

    def error(self, reason: str, at: int | None = None) -> BinlogError:
        return BinlogError(reason, self.base + (self.pos if at is None else at))

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, what: str = "field") -> None:
        if n < 0 or self.pos + n > self.end:
            raise self.error(f"{what} needs {n} bytes but only {self.end - self.pos} remain")

    def u8(self) -> int:
        self.need(1)
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def u16(self) -> int:
        self.need(2)
        v = _U16(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def u24(self) -> int:
        return self.uint(3)

    def u32(self) -> int:
        self.need(4)
        v = _U32(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def u64(self) -> int:
        self.need(8)
        v = _U64(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def i64(self) -> int:
        self.need(8)
        v = _I64(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def f64(self) -> float:
        self.need(8)
        v = _F64(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def uint(self, n: int) -> int:
        self.need(n)
        v = int.from_bytes(self.buf[self.pos : self.pos + n], "little")
        self.pos += n
        return v

    def uint_be(self, n: int) -> int:
        self.need(n)
        v = int.from_bytes(self.buf[self.pos : self.pos + n], "big")
        self.pos += n
        return v

    def take(self, n: int, what: str = "field") -> bytes:
        self.need(n, what)
        v = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return v

    def rest(self) -> bytes:
        v = bytes(self.buf[self.pos : self.end])
        self.pos = self.end
        return v

    def packed(self) -> int:
        """MySQL length-encoded integer (1, 3, 4 or 9 bytes)."""
        first = self.u8()
        if first < 0xFB:
            return first
        if first == 0xFC:
            return self.u16()
        if first == 0xFD:
            return self.u24()
        if first == 0xFE:
            return self.u64()
        raise self.error(f"invalid length-encoded integer prefix 0x{first:02x}", self.pos - 1)

    def packed_bytes(self, what: str = "string") -> bytes:
        return self.take(self.packed(), what)

    def cstring(self) -> bytes:
        """NUL-terminated string (the NUL is consumed, not returned)."""
        nul = self.buf.find(b"\0", self.pos, self.end)
        if nul < 0:
            raise self.error("unterminated string")
        v = bytes(self.buf[self.pos : nul])
        self.pos = nul + 1
        return v

    def bitmap(self, bits: int) -> int:
        """A little-endian bitmap of ``bits`` bits as an int (bit i = column i)."""
        return self.uint((bits + 7) >> 3)

    def serialized_uint(self) -> int:
        """MySQL 8.4 ``mysql::serialization`` variable-length unsigned integer.

        The count of trailing one bits in the first byte is the number of extra bytes.
        """
        first = self.u8()
        if first == 0xFF:
            return self.u64()
        extra = 0
        while first & (1 << extra):
            extra += 1
        value = first >> (extra + 1)
        if extra:
            value |= self.uint(extra) << (7 - extra)
        return value

    def serialized_int(self) -> int:
        v = self.serialized_uint()
        return (v >> 1) ^ -(v & 1)
