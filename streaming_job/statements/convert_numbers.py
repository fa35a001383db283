"""Values into numbers as the server converts them on ALTER TABLE ... MODIFY (schema_changes.py has the rules):
integers, DECIMAL, FLOAT/DOUBLE from numbers, text (its leading number) and ENUM/SET labels; the server's ``my_gcvt``
layout of floating-point numbers as text."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from ingester.codec.table_map import Column

from .column_kinds import WIDE, Unknown, labels_of, type_name


def as_integer(old: Column, ok: str, mariadb: bool) -> Callable[[Any], int]:
    if ok == "int":
        return int
    if ok == "decimal":
        return lambda d: int(d.quantize(Decimal(1), ROUND_HALF_UP, WIDE))
    if ok in ("float", "double"):
        return lambda f: round(f) if abs(f) != float("inf") else (1 << 64 if f > 0 else -(1 << 64))
    if ok in ("text", "binary"):
        if mariadb:
            return lambda v: _clamp64(_leading_integer(v))
        return lambda v: int(_leading_decimal(v).quantize(Decimal(1), ROUND_HALF_UP, WIDE))
    if ok in ("enum", "set"):
        labels = labels_of(old, ok)
        return lambda v: _index(v, labels) if ok == "enum" else _mask(v, labels)
    raise Unknown(f"{type_name(old)} -> an integer")


def _clamp64(n: int) -> int:
    return min(max(n, -(1 << 63)), (1 << 63) - 1)


def as_decimal(old: Column, ok: str, mariadb: bool) -> Callable[[Any], Decimal]:
    if ok == "int":
        return Decimal
    if ok == "decimal":
        return lambda d: d
    if ok in ("float", "double"):  # a FLOAT as the double it is
        return lambda f: Decimal(repr(f)) if f == f and abs(f) != float("inf") else Decimal(0)
    if ok in ("text", "binary"):
        return _leading_decimal
    if ok in ("enum", "set"):
        integer = as_integer(old, ok, mariadb)
        return lambda v: Decimal(integer(v))
    raise Unknown(f"{type_name(old)} -> DECIMAL")


def as_float(old: Column, ok: str, mariadb: bool) -> Callable[[Any], float]:
    if ok in ("int", "decimal", "float", "double"):
        return float
    if ok in ("text", "binary"):
        return lambda v: float(_leading_decimal(v, exact=False))
    if ok in ("enum", "set"):
        integer = as_integer(old, ok, mariadb)
        return lambda v: float(integer(v))
    raise Unknown(f"{type_name(old)} -> FLOAT/DOUBLE")


_LEADING_INT = re.compile(rb"[ \t\n\r\f\v]*([+-]?)(\d*)")


_LEADING_NUMBER = re.compile(rb"[ \t\n\r\f\v]*([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+)?")


def _ascii(v: str | bytes) -> bytes:
    return v if isinstance(v, bytes) else v.encode("utf-8", "replace")


def _leading_integer(v: str | bytes) -> int:
    m = _LEADING_INT.match(_ascii(v))
    assert m is not None  # the pattern matches the empty string
    digits = m.group(2)
    return 0 if not digits else int(m.group(1) + digits)


def _leading_decimal(v: str | bytes, exact: bool = True) -> Decimal:
    m = _LEADING_NUMBER.match(_ascii(v))
    if m is None:
        return Decimal(0)
    text = (m.group(1) + (m.group(2) or b"")).decode()
    try:
        d = Decimal(text)
    except InvalidOperation:
        return Decimal(0)
    if exact and abs(d.adjusted()) > 400:  # beyond any column: clamped by the caller
        return Decimal("1e400").copy_sign(d) if d.adjusted() > 0 else Decimal(0)
    return d


def _index(v: str, labels: list[str]) -> int:
    low = [x.lower() for x in labels]
    return low.index(v.lower()) + 1 if v.lower() in low else 0


def _mask(v: str, labels: list[str]) -> int:
    low = [x.lower() for x in labels]
    bits = 0
    for member in v.split(",") if v else []:
        if member.lower() in low:
            bits |= 1 << low.index(member.lower())
    return bits


def _float_digits(f: float, digits: int) -> str:
    """A FLOAT's value to ``digits`` significant digits (as the server prints a FLOAT), trailing zeros cut."""
    return f"{f:.{digits - 1}e}"


def gcvt(f: float, single: bool) -> str:
    """A FLOAT (``single``: 6 significant digits) or DOUBLE (its shortest round-trip digits) as the server's
    ``my_gcvt`` writes it: fixed notation while the decimal point is within 15 digits of the first, else
    ``<d>[.<ddd>]e<exp>``."""
    if f != f:
        return "nan"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    d = Decimal(_float_digits(f, 6) if single else repr(float(f)))
    sign, digits_t, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    decpt = len(digits_t) + exponent  # the decimal point's place after the first digit's
    neg = "-" if sign else ""
    n = len(digits)
    if -14 <= decpt and (decpt <= 15 or n > decpt):  # MAX_DECPT_FOR_F_FORMAT = DBL_DIG
        if decpt <= 0:
            return f"{neg}0.{'0' * -decpt}{digits}"
        if decpt >= n:
            return f"{neg}{digits}{'0' * (decpt - n)}"
        return f"{neg}{digits[:decpt]}.{digits[decpt:]}"
    mantissa = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{neg}{mantissa}e{decpt - 1}"
