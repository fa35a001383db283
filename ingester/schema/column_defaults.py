"""A column's DEFAULT: the DDL parser's tokens (ddl_tokens.py) of it as a literal value, shared by the land job's
defaults of added columns (streaming_job/batch/defaults.py) and the schema history's defaults for the Debezium
formats' field schemas; information_schema's COLUMN_DEFAULT as those tokens."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from .ddl_tokens import tokens
from .table_schema import ColumnDef


class Uncomputable(ValueError):
    """A default only the server can evaluate."""


def literal(toks: list[tuple[str, str]]) -> str | int | bytes:
    """A literal DEFAULT's value: text (strings, numbers as written), int (bits, TRUE/FALSE) or bytes (x'..');
    an expression (CURRENT_TIMESTAMP, a function, arithmetic, NULL) is ``Uncomputable``."""
    if len(toks) >= 3 and toks[0] == ("op", "(") and toks[-1] == ("op", ")"):
        return literal(toks[1:-1])
    kinds = [k for k, _ in toks]
    text = "".join(t for _, t in toks)
    if kinds == ["str"]:
        return toks[0][1]
    if kinds == ["word", "str"]:
        intro, value = toks[0][1].upper(), toks[1][1]
        if intro == "B":
            return int(value or "0", 2)
        if intro == "X":
            return bytes.fromhex(value)
        if intro.startswith("_") or intro in ("N", "DATE", "TIME", "TIMESTAMP"):
            return value
    if kinds == ["word"] and text.upper() in ("TRUE", "FALSE"):
        return int(text.upper() == "TRUE")
    if kinds == ["word"] and text[:2].lower() in ("0x", "0b"):
        return int(text[2:], 16 if text[1] in "xX" else 2)
    try:
        Decimal(text)
        return text
    except InvalidOperation:
        raise Uncomputable(f"the expression {' '.join(t for _, t in toks)}") from None


def column_default(c: ColumnDef) -> str | int | None:
    """A NOT NULL column's literal DEFAULT (text or int) as records carry it for the Debezium formats' schemas;
    None for a nullable column (Kafka Connect gives a null field its default: its NULLs would read as the default),
    an expression (CURRENT_TIMESTAMP...), and bytes (x'..')."""
    if not c.not_null or not c.default or c.generated:
        return None
    try:
        value = literal(c.default)
    except Uncomputable:
        return None
    return None if isinstance(value, bytes) else value


def default_tokens(col: ColumnDef, default: str, extra: str, mariadb: bool) -> list[tuple[str, str]] | None:
    """information_schema's COLUMN_DEFAULT as the DDL parser's tokens of DEFAULT: MariaDB's is SQL (a quoted
    literal, a number, NULL, an expression), MySQL's the bare value (an expression marked DEFAULT_GENERATED
    in EXTRA; BIT's b'..' and binary types' 0x.. as SQL)."""
    if mariadb or "DEFAULT_GENERATED" in extra.upper() or col.type == "bit" or col.charset == "binary":
        return tokens(default)
    return [("str", default)]
