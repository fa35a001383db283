"""Values into text, binary strings, ENUM/SET labels and JSON as the server converts them on ALTER TABLE ... MODIFY
(schema_changes.py has the rules): charsets, lengths, invalid bytes, labels by name, MySQL's JSON documents."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from ingester.codec.charsets import MAX_CHAR_BYTES, PYTHON_CODEC, decoder_for
from ingester.codec.constants import ColumnType as T
from ingester.codec.jsonb import to_json_text
from ingester.codec.table_map import Column

from .column_kinds import (
    ZERO,
    Statement,
    Unknown,
    column_charset,
    decimal_shape,
    fsp,
    labels_of,
    local,
    max_bytes,
    max_chars,
    type_name,
)
from .convert_numbers import as_integer, gcvt


def mysql_json(old: Column, new: Column, ok: str, nk: str) -> Callable[[Any], Any]:
    """MySQL's binary JSON <-> text. The lake holds a JSON document as compact JSON text (lake_types._json: the
    decoded document, its objects' keys in the server's order); the server's text of it is its own layout
    (``{"a": 1, "b": [1, 2]}``, jsonb.to_json_text), and text into JSON the parsed document (keys sorted by
    length, then bytes; the last of duplicate keys; integers past 64 bits doubles)."""
    if ok == "json" and nk == "text":
        fit = fit_text(new, False)
        return lambda v: None if v is None or v is ZERO else fit(to_json_text(_lake_json(v)))
    if ok == "text" and nk == "json":
        return lambda v: None if v is None or v is ZERO else _json_document(v)
    raise Unknown(f"{type_name(old)} -> {type_name(new)} (MySQL's binary JSON)")


def _lake_json(text: str) -> Any:
    """A JSON column's lake text as the codec's document: a number with digits a double does not print
    (json_default writes DECIMAL with its stored digits) a Decimal."""
    def number(token: str) -> float | Decimal:
        f = float(token)
        return f if orjson.dumps(f).decode() == token else Decimal(token)

    return json.loads(text, parse_float=number)


def _json_document(text: Any) -> str:
    """Text into MySQL's JSON as the lake holds the document the server stored; text that is not JSON the server
    refuses (the ALTER fails), so it never gets here."""
    def key(name: str) -> tuple[int, bytes]:
        raw = name.encode("utf-8")
        return len(raw), raw

    def stored(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: stored(v[k]) for k in sorted(v, key=key)}
        if isinstance(v, list):
            return [stored(x) for x in v]
        if isinstance(v, int) and not isinstance(v, bool) and not -(1 << 63) <= v < 1 << 64:
            return float(v)
        return v

    try:
        document = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except ValueError as exc:
        raise Unknown(f"text that is not JSON as MySQL's JSON: {exc}") from None
    return orjson.dumps(stored(document)).decode()


def as_text(old: Column, ok: str, stmt: Statement) -> Callable[[Any], str | bytes]:
    """The old value as the server's text (``str``; ``bytes`` of a binary column, read in the new charset)."""
    if ok == "int":
        return str
    if ok == "year":
        return lambda v: f"{v:04d}"
    if ok == "decimal":
        scale = decimal_shape(old)[1]
        return lambda d: f"{d:.{scale}f}"
    if ok in ("float", "double"):
        single = ok == "float"
        return lambda f: gcvt(f, single)
    if ok in ("text", "enum", "set"):
        return lambda v: v
    if ok == "binary":
        return lambda v: v
    if ok in ("date", "datetime", "timestamp", "time"):
        digits = fsp(old)
        return lambda v: _temporal_text(v, ok, digits, stmt)
    raise Unknown(f"{type_name(old)} -> text")


def _temporal_text(v: Any, k: str, digits: int, stmt: Statement) -> str:
    if v is ZERO:
        return {"date": "0000-00-00", "time": "00:00:00"}.get(k, "0000-00-00 00:00:00") + (
            "." + "0" * digits if digits and k != "date" else "")
    if k == "date":
        return v.isoformat()
    if k == "time":
        sign = "-" if v < 0 else ""
        us = abs(v)
        s, frac = divmod(us, 1_000_000)
        text = f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        return text + (f".{frac:06d}"[:digits + 1] if digits else "")
    if k == "timestamp":
        v = local(v, stmt)
    text = v.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{v.microsecond:06d}"[:digits + 1] if digits else "")


def python_codec(charset: str | None) -> str | None:
    return None if charset is None else PYTHON_CODEC.get(charset)


def fit_text(new: Column, mariadb: bool) -> Callable[[str | bytes], str]:
    """Text (or bytes of a binary column) as the new text column holds it: in its charset, cut to its length."""
    charset = column_charset(new, mariadb)
    codec = python_codec(charset)
    if charset is None or codec is None:
        raise Unknown("text of a charset the lake does not know")
    blob = new.type in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
    limit_chars = None if blob else max_chars(new, mariadb)
    limit_bytes = max_bytes(new)
    bmp_only = charset in ("utf8mb3", "ucs2")
    # Bytes into a single-byte charset are kept as they are (no sequence is invalid): the lake reads them as the
    # codec does (a byte the charset leaves undefined U+FFFD)
    single_byte = decoder_for(new.collation, mariadb) if MAX_CHAR_BYTES.get(charset, 1) == 1 else None

    def fit(v: str | bytes) -> str:
        if isinstance(v, bytes) and single_byte is not None:
            read = single_byte(v[:limit_bytes])  # a byte a character
            text = read if isinstance(read, str) else read.decode(codec, "replace")
        elif isinstance(v, bytes):
            text = _decode_each_byte(v, codec) if mariadb else _decode_valid_prefix(v, codec)
        else:
            text = v.encode(codec, "replace").decode(codec, "replace")
        if bmp_only:
            text = "".join(c if ord(c) <= 0xFFFF else "?" for c in text)
        if limit_chars is not None and len(text) > limit_chars:
            text = text[:limit_chars]
        elif limit_chars is None and len(text.encode(codec, "replace")) > limit_bytes:
            text = text.encode(codec)[:limit_bytes].decode(codec, "ignore")
        if new.type == T.STRING:  # CHAR: trailing spaces are not kept
            text = text.rstrip(" ")
        return text

    return fit


def _decode_each_byte(data: bytes, codec: str) -> str:
    """Bytes read in a charset, each byte of an invalid sequence a ``?`` (the server's way)."""
    out: list[str] = []
    i = 0
    while i < len(data):
        try:
            out.append(data[i:].decode(codec))
            break
        except UnicodeDecodeError as exc:
            out.append(data[i:i + exc.start].decode(codec))
            bad = max(exc.end - exc.start, 1)
            out.append("?" * bad)
            i += exc.start + bad
    return "".join(out).replace("\ufffe", "?")


def _decode_valid_prefix(data: bytes, codec: str) -> str:
    """Bytes read in a charset as MySQL reads them: cut at the first invalid sequence."""
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        text = data[:exc.start].decode(codec)
    cut = text.find("\ufffe")
    return text if cut < 0 else text[:cut]


def as_bytes(old: Column, ok: str, stmt: Statement) -> Callable[[Any], bytes]:
    if ok == "binary":
        return lambda v: v
    if ok in ("text", "enum", "set"):
        codec = python_codec(column_charset(old, stmt.mariadb))

        def encode(v: str) -> bytes:
            if codec is None:
                if v.isascii():
                    return v.encode("ascii")
                raise Unknown("non-ASCII text of a charset the lake does not know, as bytes")
            return v.encode(codec, "replace")

        return encode
    text = as_text(old, ok, stmt)
    return lambda v: str(text(v)).encode("ascii")


def fit_binary(new: Column) -> Callable[[bytes], bytes]:
    limit = max_bytes(new)
    if new.type == T.STRING:  # BINARY(n): zero bytes pad it
        return lambda b: b[:limit].ljust(limit, b"\0")
    return lambda b: b[:limit]


def as_labels(old: Column, new: Column, ok: str, nk: str, stmt: Statement) -> Callable[[Any], str]:
    labels = labels_of(new, nk)
    low = {x.lower(): x for x in reversed(labels)}
    if ok in ("int", "decimal", "float", "double"):
        integer = as_integer(old, ok, stmt.mariadb)

        def by_number(v: Any) -> str:
            n = integer(v)
            if nk == "enum":
                return labels[n - 1] if 1 <= n <= len(labels) else ""
            if n < 0 or (not stmt.mariadb and n >> len(labels)):  # MySQL: bits past the members, ''
                return ""
            return ",".join(x for i, x in enumerate(labels) if n >> i & 1)

        return by_number
    if ok not in ("text", "binary", "enum", "set"):
        raise Unknown(f"{type_name(old)} -> {nk.upper()}")

    def by_label(v: Any) -> str:
        text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        if nk == "enum":
            return low.get(text.lower(), "")
        members = {low[m.lower()] for m in text.split(",") if m.lower() in low} if text else set()
        return ",".join(x for x in labels if x in members)

    return by_label
