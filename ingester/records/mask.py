"""Column exclusion, hashing and masking in rows events, before they reach Kafka (docs/MASKING.md).

The daemon publishes rows events undecoded, so a table with rules gets a ``Rewriter``, compiled once per
table map: it walks each row image by value spans (the lengths of rows.py, without building values), copies
every column without a rule byte for byte and re-encodes only the masked ones, then re-frames the event
(size field, CRC32). Anything it cannot rewrite safely raises ``BinlogError``: the daemon stops rather than
publish a masked column's value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..codec import BinlogError
from ..codec import header as H
from ..codec import values as V
from ..codec.charsets import charset_for
from ..codec.compression import mariadb_uncompress_column, mariadb_uncompress_event
from ..codec.constants import HEADER_V3
from ..codec.constants import ColumnType as T
from ..codec.table_map import Column, TableMap

_FIXED: dict[int, int] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8, T.FLOAT: 4, T.DOUBLE: 8,
                          T.YEAR: 1, T.DATE: 3, T.NEWDATE: 3, T.TIME: 3, T.DATETIME: 8, T.TIMESTAMP: 4, T.NULL: 0}
_FRACTIONAL_BYTES: dict[int, int] = {T.TIMESTAMP2: 4, T.DATETIME2: 5, T.TIME2: 3}
_INTEGERS = frozenset((T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG))
_STRINGS = frozenset((T.VARCHAR, T.VAR_STRING, T.STRING))
_BLOBS = frozenset((T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB))
_COMPRESSED_COLUMNS = frozenset((T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED))
_PREFIXED = _BLOBS | {T.GEOMETRY, T.JSON, T.VECTOR}  # length prefix of ``meta`` bytes
# Rows event codes -> (kind, has extra data, uncompressed code); MariaDB compressed events are re-emitted plain.
_EVENTS = {23: ("write", False, 23), 24: ("update", False, 24), 25: ("delete", False, 25),
           30: ("write", True, 30), 31: ("update", True, 31), 32: ("delete", True, 32),
           39: ("partial", True, 39),
           166: ("write", False, 23), 167: ("update", False, 24), 168: ("delete", False, 25),
           169: ("write", True, 30), 170: ("update", True, 31), 171: ("delete", True, 32)}
STAR = b"****"


@dataclass
class Masked:
    """What a route carries for a table with masked columns (truthy: the native router leaves it to Python)."""

    schema: bytes  # the schema history's entry, as in an unmasked route
    rewriter: Rewriter

    def __bool__(self) -> bool:
        return True


def _span(col: Column) -> Callable[[bytes, int], int]:
    """The byte length of one non-NULL value of ``col`` at ``p`` (the rules of rows.py)."""
    t, meta = col.type, col.meta
    size: int | None = _FIXED.get(t)
    if t == T.NEWDECIMAL:
        size = V.decimal_code(meta >> 8, meta & 0xFF, "v")[0]
    elif t in (T.TIMESTAMP2, T.DATETIME2, T.TIME2):
        if not 0 <= meta <= 6:
            raise BinlogError(f"column {col.name} has fractional precision {meta}")
        size = _FRACTIONAL_BYTES[t] + V.frac_bytes(meta)
    elif t == T.BIT:
        size = (meta >> 8) + (1 if meta & 0xFF else 0)
    elif t in (T.ENUM, T.SET):
        size = meta & 0xFF
    if size is not None:
        fixed = size
        return lambda b, p: fixed
    if t not in _STRINGS and t not in _PREFIXED and t not in (T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED):
        raise BinlogError(f"column {col.name} has unsupported type {t}")
    width = _prefix_width(col)
    return lambda b, p: width + int.from_bytes(b[p:p + width], "little")


def _zero(col: Column, size: int) -> bytes:
    """The type's zero value: 0, 0.0, '', 0000-00-00 (00:00:00), 00:00:00, the empty ENUM/SET/BIT."""
    if col.type in (T.NEWDECIMAL, T.DATETIME2, T.TIME2):
        return b"\x80" + bytes(size - 1)  # these encodings offset the value by their sign bit
    if col.type in _FIXED or col.type in (T.TIMESTAMP2, T.BIT, T.ENUM, T.SET):
        return bytes(size)
    return _prefixed(col, b"")


def _prefix_width(col: Column) -> int:
    """Bytes of a string or blob value's length prefix."""
    if col.type in _STRINGS:
        return 1 if col.max_length < 256 else 2
    if col.type == T.VARCHAR_COMPRESSED:
        return 1 if col.meta < 256 else 2
    return col.meta


# Charsets that are not ASCII-compatible: ASCII text takes 2 or 4 bytes a character in them.
_WIDE = {"ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be"}


def _in_charset(col: Column, mariadb: bool, text: bytes) -> bytes:
    """ASCII text (the mask, a hash's hex digits) as the column's bytes: every charset the servers have is
    ASCII-compatible but the wide Unicode ones (binary columns and unknown charsets take the bytes)."""
    codec = _WIDE.get(charset_for(col.collation, mariadb) or "") if col.collation is not None else None
    return text if codec is None else text.decode("ascii").encode(codec)


def _prefixed(col: Column, data: bytes) -> bytes:
    """A string value of ``col``: length prefix + data cut to the column's maximum byte length."""
    width = _prefix_width(col)
    limit = col.max_length if col.type in _STRINGS else (1 << (8 * width)) - 1
    if col.type in _COMPRESSED_COLUMNS:
        data = b"\x00" + data[: limit - 1]  # MariaDB's header of an uncompressed column value
    else:
        data = data[:limit]
    return len(data).to_bytes(width, "little") + data


class Rewriter:
    """Rewrites the rows events of one table map (compiled once: spans and rules per column)."""

    def __init__(self, tm: TableMap, actions: dict[int, str], key: bytes) -> None:
        self.tm, self.actions, self._key = tm, actions, key
        self._spans = [_span(c) for c in tm.columns]
        for index, action in actions.items():
            col = tm.columns[index]
            where = f"filters.columns: {tm.database}.{tm.table}.{col.name}"
            if action == "hash" and col.type not in _STRINGS | _BLOBS | _COMPRESSED_COLUMNS | _INTEGERS:
                raise BinlogError(f"{where}: cannot hash a column of type {T(col.type).name}; use exclude or mask")
            if action != "hash" and not col.nullable and col.type in (T.JSON, T.GEOMETRY, T.VECTOR):
                raise BinlogError(f"{where}: a NOT NULL {T(col.type).name} column can only be replaced by NULL")

    def __repr__(self) -> str:  # never the key
        return f"Rewriter({self.tm.database}.{self.tm.table}, {self.actions})"

    def _replace(self, index: int, value: bytes) -> bytes | None:
        """The new bytes of a masked value (None: NULL)."""
        col = self.tm.columns[index]
        action = self.actions[index]
        if action == "hash":
            if col.type in _INTEGERS:
                digest = hmac.new(self._key, value, hashlib.sha256).digest()
                return digest[: len(value)]
            data = value[_prefix_width(col):]
            if col.type in _COMPRESSED_COLUMNS:
                data = mariadb_uncompress_column(data)
            digest = hmac.new(self._key, data, hashlib.sha256).hexdigest().encode()
            return _prefixed(col, _in_charset(col, self.tm.is_mariadb, digest))
        if action == "mask" and col.type in _STRINGS | _BLOBS | _COMPRESSED_COLUMNS:
            return _prefixed(col, _in_charset(col, self.tm.is_mariadb, STAR))
        if col.nullable:
            return None
        return _zero(col, len(value))

    def rewrite(self, raw: bytes, post_header: int, checksum: bool, position: int, source: str) -> bytes:
        """The event ``raw`` with its masked values replaced, re-framed (uncompressed, size, CRC32)."""
        code = raw[H.TYPE]
        spec = _EVENTS.get(code)
        if spec is None:
            raise BinlogError(f"cannot mask columns of `{self.tm.database}`.`{self.tm.table}` in event type {code}",
                              position, source)
        kind, extra, plain = spec
        end = len(raw) - (4 if checksum else 0)
        p = HEADER_V3 + 8
        if extra and post_header >= 10:
            p += int.from_bytes(raw[p:p + 2], "little")
        width = raw[p]
        if width >= 0xFB:
            raise BinlogError("rows event column count over 250 is not supported by masking", position, source)
        p += 1
        if width != len(self.tm.columns):
            raise BinlogError(f"rows event has {width} columns, its table map {len(self.tm.columns)}", position,
                              source)
        nbytes = (width + 7) >> 3
        images = 2 if kind in ("update", "partial") else 1
        bitmaps = [int.from_bytes(raw[p + i * nbytes:p + (i + 1) * nbytes], "little") for i in range(images)]
        p += nbytes * images
        head = bytearray(raw[:p])
        body = raw[p:end]
        if code != plain:
            try:
                body = mariadb_uncompress_event(body)
            except BinlogError as exc:
                raise BinlogError(f"compressed rows event: {exc.reason}", position, source) from None
            head[4] = plain
        present = [[i for i in range(width) if bm >> i & 1] for bm in bitmaps]
        out = bytearray(head)
        q = 0
        try:
            while q < len(body):
                for n, cols in enumerate(present):
                    q = self._image(body, q, cols, kind == "partial" and n == 1, out)
        except (IndexError, ValueError, zlib.error) as exc:
            raise BinlogError(f"malformed row data for masking: {exc}", position, source) from None
        if q != len(body):
            raise BinlogError(f"row data ends at {q}, the event at {len(body)}", position, source)
        if checksum:
            out += b"\0\0\0\0"
        out[9:13] = len(out).to_bytes(4, "little")
        if checksum:
            out[-4:] = zlib.crc32(memoryview(out)[:-4]).to_bytes(4, "little")
        return bytes(out)

    def _image(self, b: bytes, p: int, cols: list[int], partial: bool, out: bytearray) -> int:
        """Copy one row image at ``p`` into ``out``, masked; returns where it ends."""
        if partial:  # PARTIAL_UPDATE_ROWS after image: packed options and the JSON partial bits, copied
            start = p
            opts = b[p]
            if opts >= 0xFB:
                raise ValueError("unexpected partial update options")
            p += 1
            if opts & 1:
                p += (sum(1 for i in cols if self.tm.columns[i].type == T.JSON) + 7) >> 3
            out += b[start:p]
        nbytes = (len(cols) + 7) >> 3
        nulls = int.from_bytes(b[p:p + nbytes], "little")
        p += nbytes
        at = len(out)
        out += bytes(nbytes)
        for bit, index in enumerate(cols):
            if nulls >> bit & 1:
                continue
            size = self._spans[index](b, p)
            if p + size > len(b):
                raise ValueError(f"value of {size} bytes runs past the event")
            if index in self.actions:
                new = self._replace(index, b[p:p + size])
                if new is None:
                    nulls |= 1 << bit
                else:
                    out += new
            else:
                out += b[p:p + size]
            p += size
        out[at:at + nbytes] = nulls.to_bytes(nbytes, "little")
        return p


def value_masker(tm: TableMap, index: int, action: str, key: bytes) -> Callable[[bytes], Any]:
    """For rows read with SELECT (snapshots): a function from a column's raw non-NULL value (the server's bytes:
    ``character_set_results=binary``, integers as their digits) to the value the binlog path publishes for it.
    The replacement is made by the same ``Rewriter`` from the value's binlog encoding and decoded by the
    binlog decoder, so a snapshot row and a rows event of the same row carry the same masked value."""
    from ..codec.rows import compile_rows

    col = tm.columns[index]
    rewriter = Rewriter(tm, {index: action}, key)  # refuses what the binlog path refuses
    one = dataclasses.replace(col, index=0, nullable=True)
    decode = compile_rows(TableMap(0, 0, tm.database, tm.table, [one], None, has_names=True,
                                   is_mariadb=tm.is_mariadb), "write", (), (0,))
    if col.type in _INTEGERS:
        size, signed = _FIXED[col.type], not col.unsigned

        def stored(raw: bytes) -> bytes:
            return int(raw).to_bytes(size, "little", signed=signed)
    elif col.type in _STRINGS | _BLOBS | _COMPRESSED_COLUMNS:
        width, header = _prefix_width(col), b"\x00" if col.type in _COMPRESSED_COLUMNS else b""

        def stored(raw: bytes) -> bytes:  # SELECT gives compressed columns uncompressed
            data = header + raw
            return len(data).to_bytes(width, "little") + data
    else:  # exclude/mask of another type: only a fixed-size type's size matters (JSON etc. are only NULLed)
        size = _span(col)(bytes(4), 0)

        def stored(raw: bytes) -> bytes:
            return bytes(size)

    def masked(raw: bytes) -> Any:
        new = rewriter._replace(index, stored(raw))
        if new is None:
            return None
        image = b"\x00" + new  # the NULL bitmap of one column, then its value
        return decode(image, 0, len(image))[0]["after"][col.name]

    return masked
