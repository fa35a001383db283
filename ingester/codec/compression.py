"""MariaDB's compressed binlog data: compressed events (QUERY text, rows data) and COMPRESSED column values."""

from __future__ import annotations

import zlib

from .errors import BinlogError


def _inflate(data: bytes, size: int, wbits: int) -> bytes:
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(data, size)
    except zlib.error as exc:
        raise BinlogError(f"corrupt zlib data: {exc}") from None
    if len(out) != size or d.unconsumed_tail:
        raise BinlogError(f"compressed data inflates to {len(out)}+ bytes, its header says {size}")
    return out


def mariadb_uncompress_event(data: bytes) -> bytes:
    """MariaDB compressed QUERY text / rows data: 0x80 | length bytes, big-endian length, zlib."""
    head = data[0] if data else 0
    nlen = head & 0x07
    if not head & 0x80 or not 1 <= nlen <= 4 or len(data) < 1 + nlen:
        raise BinlogError(f"bad MariaDB event compression header 0x{head:02x}")
    return _inflate(data[1 + nlen :], int.from_bytes(data[1 : 1 + nlen], "big"), 15)


def mariadb_uncompress_column(data: bytes) -> bytes:
    """MariaDB COMPRESSED column value: 0x00 + raw bytes, or 0x80 | no-wrap 0x08 | length bytes,
    big-endian length, then deflate data (zlib-wrapped only with column_compression_zlib_wrap)."""
    if not data:
        return b""
    head = data[0]
    if head == 0:
        return data[1:]
    nlen = head & 0x07
    if not head & 0x80 or head & 0x70 or not 1 <= nlen <= 4 or len(data) < 1 + nlen:
        raise BinlogError(f"bad MariaDB column compression header 0x{head:02x}")
    return _inflate(data[1 + nlen :], int.from_bytes(data[1 : 1 + nlen], "big"), -15 if head & 0x08 else 15)
