"""MySQL's binary JSON format: JSON column values and MySQL's text rendering (partial-update diffs: json_diff.py).

Decoded values are plain Python: ``dict`` (keys in stored order, which is MySQL's own key order),
``list``, ``str``, ``int``, ``float``, ``True``/``False``/``None``, plus ``decimal.Decimal`` for
opaque DECIMAL values so that a serializer can write them as numbers with their exact digits.
A whole document that is the JSON literal null decodes to :data:`JSON_NULL`, never ``None``, which
stays SQL NULL for the column's readers; a null inside an array or object is ``None``.
Opaque temporal values become the strings MySQL prints for them, and other opaque values MySQL's
``"base64:typeNN:..."`` text, so :func:`to_json_text` reproduces ``SELECT json_col`` output.

The input is untrusted: every offset and length is checked against the bytes present before it is
used, nesting is capped at MySQL's limit, and values may not share bytes (the server never writes
them that way), which bounds the work to the input size. Malformed input raises :class:`BinlogError`
with the offset inside the JSON value in its reason; the caller attaches the stream position.
"""

from __future__ import annotations

import base64
import math
import struct
from decimal import Decimal

from .constants import ColumnType
from .errors import BinlogError

MAX_DEPTH = 100  # JSON_DOCUMENT_MAX_DEPTH: deeper documents are rejected by the server

_SMALL_OBJECT, _LARGE_OBJECT, _LARGE_ARRAY = 0x00, 0x01, 0x03  # 0x02 is the small array
_LITERAL, _STRING, _OPAQUE = 0x04, 0x0C, 0x0F
_INT16, _UINT16, _INT32, _UINT32 = 0x05, 0x06, 0x07, 0x08
_DOUBLE = 0x0B
_NUMBERS = {
    _INT16: struct.Struct("<h"),
    _UINT16: struct.Struct("<H"),
    _INT32: struct.Struct("<i"),
    _UINT32: struct.Struct("<I"),
    0x09: struct.Struct("<q"),  # int64
    0x0A: struct.Struct("<Q"),  # uint64
    _DOUBLE: struct.Struct("<d"),
}
# Scalars stored inside the value entry instead of at an offset; the large format has room for 32 bits.
_INLINED_SMALL = frozenset({_LITERAL, _INT16, _UINT16})
_INLINED_LARGE = _INLINED_SMALL | {_INT32, _UINT32}
_COUNTS_SMALL = struct.Struct("<HH")
_COUNTS_LARGE = struct.Struct("<II")
_OFFSET_SMALL = struct.Struct("<H")
_OFFSET_LARGE = struct.Struct("<I")
_KEY_LENGTH = struct.Struct("<H")

_TEMPORALS = frozenset({ColumnType.DATE, ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP})
_PACKED_FRACTION_BITS = 24

_DECIMAL_DIGITS_PER_WORD = 9
_DECIMAL_LEFTOVER_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4)  # bytes for a group of 0..8 digits

_ESCAPES = {code: f"\\u{code:04x}" for code in range(0x20)} | {
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    ord("\b"): "\\b",
    ord("\f"): "\\f",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}
# my_gcvt() switches to exponent notation outside these decimal-point positions.
_MIN_FIXED_DECPT, _MAX_FIXED_DECPT = -14, 15


class JsonNull:
    """The type of :data:`JSON_NULL`: a JSON column holding the JSON null document, not SQL NULL."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __reduce__(self) -> str:
        return "JSON_NULL"  # copies and pickles are the one instance

    def to_json(self) -> dict[str, None]:
        """Its JSONL value (docs/JSONL.md): SQL NULL is ``null``."""
        return {"$json": None}


JSON_NULL = JsonNull()


def malformed(reason: str, offset: int) -> BinlogError:
    return BinlogError(f"{reason} (JSON offset {offset})")


class _Reader:
    """Decodes one binary JSON document; ``budget`` is the byte count values may still claim."""

    __slots__ = ("budget", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.budget = len(data)

    def claim(self, amount: int, offset: int) -> None:
        """Account for bytes a value occupies, so entries pointing at shared bytes cannot multiply work."""
        self.budget -= amount
        if self.budget < 0:
            raise malformed("JSON values overlap: more value bytes than the document holds", offset)

    def value(self, kind: int, pos: int, end: int, depth: int) -> object:
        """The value of type ``kind`` stored at ``pos``; ``end`` bounds its enclosing container."""
        self.claim(1, pos)
        if kind <= _LARGE_ARRAY:
            return self.container(kind, pos, end, depth + 1)
        return self.scalar(kind, pos, end)

    def container(self, kind: int, pos: int, end: int, depth: int) -> object:
        if depth > MAX_DEPTH:
            raise malformed(f"JSON document nests deeper than {MAX_DEPTH} levels", pos)
        large = kind in (_LARGE_OBJECT, _LARGE_ARRAY)
        is_object = kind in (_SMALL_OBJECT, _LARGE_OBJECT)
        counts, offset_field = (_COUNTS_LARGE, _OFFSET_LARGE) if large else (_COUNTS_SMALL, _OFFSET_SMALL)
        word = offset_field.size
        if end - pos < counts.size:
            raise malformed("JSON container header is truncated", pos)
        count, size = counts.unpack_from(self.data, pos)
        if size > end - pos:
            raise malformed(f"JSON container of {size} bytes exceeds the {end - pos} available", pos)
        key_entry, value_entry = word + 2, 1 + word
        values_at = counts.size + (count * key_entry if is_object else 0)
        header = values_at + count * value_entry
        if header > size:
            raise malformed(f"JSON container header of {count} entries exceeds its {size} bytes", pos)
        inlined = _INLINED_LARGE if large else _INLINED_SMALL
        limit = pos + size
        items = []
        for index in range(count):
            entry = pos + values_at + index * value_entry
            item_kind = self.data[entry]
            if item_kind in inlined:
                self.claim(1, entry)
                items.append(self.scalar(item_kind, entry + 1, entry + value_entry))
                continue
            offset = offset_field.unpack_from(self.data, entry + 1)[0]
            if not header <= offset <= size:
                raise malformed(f"JSON value offset {offset} lies outside its container", entry)
            items.append(self.value(item_kind, pos + offset, limit, depth))
        if not is_object:
            return items
        members = {}
        for index, item in enumerate(items):
            entry = pos + counts.size + index * key_entry
            offset = offset_field.unpack_from(self.data, entry)[0]
            length = _KEY_LENGTH.unpack_from(self.data, entry + word)[0]
            if offset < header or offset + length > size:
                raise malformed(f"JSON key at offset {offset} lies outside its container", entry)
            members[self.text(pos + offset, length, limit)] = item
        return members

    def scalar(self, kind: int, pos: int, end: int) -> object:
        data = self.data
        if kind == _LITERAL:
            if pos >= end:
                raise malformed("JSON literal is truncated", pos)
            if data[pos] > 2:
                raise malformed(f"unknown JSON literal 0x{data[pos]:02x}", pos)
            return (None, True, False)[data[pos]]
        number = _NUMBERS.get(kind)
        if number is not None:
            if end - pos < number.size:
                raise malformed("JSON number is truncated", pos)
            result = number.unpack_from(data, pos)[0]
            if kind == _DOUBLE and not math.isfinite(result):
                raise malformed("JSON double is not finite", pos)
            return result
        if kind == _STRING:
            length, start = self.length(pos, end)
            return self.text(start, length, end)
        if kind == _OPAQUE:
            if pos >= end:
                raise malformed("JSON opaque value is truncated", pos)
            length, start = self.length(pos + 1, end)
            if length > end - start:
                raise malformed(f"JSON opaque value of {length} bytes exceeds its container", pos)
            self.claim(length, start)
            return _opaque(data[pos], data[start : start + length], pos)
        raise malformed(f"unknown JSON value type 0x{kind:02x}", pos)

    def length(self, pos: int, end: int) -> tuple[int, int]:
        """A variable-length size: 7 bits per byte, low bits first, at most 5 bytes (32 bits)."""
        value = 0
        for index in range(min(5, end - pos)):
            byte = self.data[pos + index]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value, pos + index + 1
        raise malformed("JSON variable-length size is malformed or truncated", pos)

    def text(self, pos: int, length: int, end: int) -> str:
        if length > end - pos:
            raise malformed(f"JSON string of {length} bytes exceeds its container", pos)
        self.claim(length, pos)
        try:
            return self.data[pos : pos + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise malformed("JSON string is not valid UTF-8", pos + exc.start) from None


def _opaque(field_type: int, payload: bytes, offset: int) -> object:
    """An opaque value as MySQL presents it: DECIMAL as a number, temporals and the rest as text."""
    if field_type == ColumnType.NEWDECIMAL:
        if len(payload) < 2:
            raise malformed("JSON DECIMAL lacks its precision and scale", offset)
        digits, end = decode_mysql_decimal(payload, 2, payload[0], payload[1])
        if end != len(payload):
            raise malformed("JSON DECIMAL size does not match its precision and scale", offset)
        return Decimal(digits)
    if field_type in _TEMPORALS:
        if len(payload) != 8:
            raise malformed(f"JSON temporal value has {len(payload)} bytes instead of 8", offset)
        return _packed_temporal(field_type, int.from_bytes(payload, "little", signed=True), offset)
    if field_type == ColumnType.VAR_STRING:  # the server prints these as plain strings
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError:
            raise malformed("JSON opaque string is not valid UTF-8", offset) from None
    encoded = base64.b64encode(payload).decode("ascii")
    # MySQL's base64_encode() breaks the text every 76 characters; the JSON printer escapes the newlines.
    lines = "\n".join(encoded[start : start + 76] for start in range(0, len(encoded), 76))
    return f"base64:type{field_type}:{lines}"


def _packed_temporal(field_type: int, packed: int, offset: int) -> str:
    """Format MySQL's in-memory packed temporal as its JSON text (always 6 fractional digits)."""
    negative, magnitude = packed < 0, abs(packed)
    fraction = magnitude & ((1 << _PACKED_FRACTION_BITS) - 1)
    whole = magnitude >> _PACKED_FRACTION_BITS
    if field_type == ColumnType.TIME:
        hour, minute, second = whole >> 12, (whole >> 6) & 0x3F, whole & 0x3F
        if hour > 838 or minute > 59 or second > 59 or fraction > 999_999:
            raise malformed("JSON TIME value is out of range", offset)
        return f"{'-' if negative else ''}{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}"
    day_part, time_part = whole >> 17, whole & 0x1FFFF
    year, month, day = (day_part >> 5) // 13, (day_part >> 5) % 13, day_part & 0x1F
    hour, minute, second = time_part >> 12, (time_part >> 6) & 0x3F, time_part & 0x3F
    if negative or year > 9999 or hour > 23 or minute > 59 or second > 59 or fraction > 999_999:
        raise malformed("JSON date/datetime value is out of range", offset)
    date = f"{year:04d}-{month:02d}-{day:02d}"
    if field_type == ColumnType.DATE:
        return date
    return f"{date} {hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}"


def decode_mysql_decimal(data: bytes, offset: int, precision: int, scale: int) -> tuple[str, int]:
    """Read MySQL's packed binary DECIMAL(precision, scale) at ``offset``.

    Returns the digits exactly as MySQL prints them (``scale`` fraction digits, no leading zeros)
    and the offset just past the value. Digits come in big-endian groups of nine per 4 bytes,
    a shorter leading (integer) and trailing (fraction) group use fewer bytes; the top bit is
    flipped so the bytes sort, and negative values have every byte inverted.
    """
    if not (1 <= precision <= 65 and 0 <= scale <= 30 and scale <= precision):
        raise BinlogError(f"invalid DECIMAL({precision},{scale})")
    int_words, int_leftover = divmod(precision - scale, _DECIMAL_DIGITS_PER_WORD)
    frac_words, frac_leftover = divmod(scale, _DECIMAL_DIGITS_PER_WORD)
    groups = (
        [int_leftover] * (int_leftover > 0)
        + [_DECIMAL_DIGITS_PER_WORD] * (int_words + frac_words)
        + [frac_leftover] * (frac_leftover > 0)
    )
    size = sum(_DECIMAL_LEFTOVER_BYTES[n] if n < _DECIMAL_DIGITS_PER_WORD else 4 for n in groups)
    if offset < 0 or size > len(data) - offset:
        raise BinlogError(f"DECIMAL({precision},{scale}) needs {size} bytes at offset {offset}")
    raw = bytearray(data[offset : offset + size])
    negative = not raw[0] & 0x80
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(byte ^ 0xFF for byte in raw)
    digits, pos = [], 0
    for count in groups:
        width = _DECIMAL_LEFTOVER_BYTES[count] if count < _DECIMAL_DIGITS_PER_WORD else 4
        group = int.from_bytes(raw[pos : pos + width], "big")
        if group >= 10**count:
            raise BinlogError(f"DECIMAL({precision},{scale}) digit group {group} has over {count} digits")
        digits.append(f"{group:0{count}d}")
        pos += width
    text = "".join(digits)
    integer = text[: precision - scale].lstrip("0") or "0"
    fraction = text[precision - scale :]
    # Like the server, a negative zero keeps its sign only when it has fraction digits.
    sign = "-" if negative and (scale or integer != "0") else ""
    return sign + integer + ("." + fraction if scale else ""), offset + size


def decode_value(raw: bytes) -> object:
    """One binary JSON value; empty input is the null literal, as MySQL reads it."""
    return _Reader(raw).value(raw[0], 1, len(raw), 0) if raw else None


def decode_json_binary(data: bytes | memoryview) -> object:
    """Decode one binary JSON document (a JSON column's bytes); the null document is :data:`JSON_NULL`."""
    value = decode_value(bytes(data))
    return JSON_NULL if value is None else value


def _format_double(number: float) -> str:
    """The text my_gcvt() gives for a JSON double: shortest digits, '.0' appended to integral values."""
    if number == 0:
        return "-0.0" if math.copysign(1.0, number) < 0 else "0.0"
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    significant = all_digits.lstrip("0")
    decpt = len(whole) + int(exponent or 0) - (len(all_digits) - len(significant))
    digits = significant.rstrip("0")
    sign = "-" if number < 0 else ""
    if _MIN_FIXED_DECPT <= decpt <= _MAX_FIXED_DECPT or 0 < decpt < len(digits):
        if decpt <= 0:
            return f"{sign}0.{'0' * -decpt}{digits}"
        if decpt < len(digits):
            return f"{sign}{digits[:decpt]}.{digits[decpt:]}"
        return f"{sign}{digits}{'0' * (decpt - len(digits))}.0"
    rest = f".{digits[1:]}" if len(digits) > 1 else ""
    return f"{sign}{digits[0]}{rest}e{decpt - 1}"


def _quote(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def _render(value: object, out: list[str]) -> None:
    if value is None or value is JSON_NULL:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_format_double(value))
    elif isinstance(value, Decimal):
        out.append(format(value, "f"))
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(", ")
            _render(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(", ")
            out.append(_quote(key) + ": ")
            _render(item, out)
        out.append("}")
    else:
        raise TypeError(f"not a decoded JSON value: {type(value).__name__}")


def to_json_text(value: object) -> str:
    """Render a decoded value the way MySQL prints a JSON column (``{"a": 1, "b": [true, null]}``)."""
    out: list[str] = []
    _render(value, out)
    return "".join(out)
