"""Values into dates, times and timestamps as the server converts them on ALTER TABLE ... MODIFY (schema_changes.py
has the rules): fractional digits cut or rounded, text in the canonical layouts, integers as YYYYMMDD[hhmmss]."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ingester.codec.table_map import Column

from .column_kinds import DAY_US, EPOCH, UTC, ZERO, Statement, Unknown, fsp, local, type_name

_DATE_TEXT = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})"
                        r"(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})(\d*))?)?)?\s*$")


_DIGITS_TEXT = re.compile(r"\s*(\d{8}|\d{14})\s*$")


_TIME_TEXT = re.compile(r"\s*(-?)(\d{1,3}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6})(\d*))?\s*$")


def _micros(frac: str | None, rest: str | None, mariadb: bool) -> int:
    """Fractional digits as µs: MariaDB cuts the digits past the sixth, MySQL rounds by the seventh (which may
    give 1,000,000: the caller carries it)."""
    us = int((frac or "").ljust(6, "0"))
    return us + 1 if not mariadb and rest and rest[0] >= "5" else us


def _parts(text: str, mariadb: bool = True) -> tuple[int, int, int, int, int, int, int] | None:
    """A date or datetime in text (the canonical layouts), as (y, m, d, h, mi, s, µs); None: not one of them."""
    m = _DATE_TEXT.match(text)
    if m is not None:
        y, mo, d, h, mi, s, frac, rest = m.groups()
        return (int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), _micros(frac, rest, mariadb))
    m = _DIGITS_TEXT.match(text)
    if m is not None:
        g = m.group(1)
        if len(g) == 8:
            return int(g[:4]), int(g[4:6]), int(g[6:8]), 0, 0, 0, 0
        return int(g[:4]), int(g[4:6]), int(g[6:8]), int(g[8:10]), int(g[10:12]), int(g[12:14]), 0
    return None


def _datetime_of(parts: tuple[int, ...]) -> datetime.datetime | str:
    y, mo, d, h, mi, s, us = parts
    try:
        return datetime.datetime(y, mo, d, h, mi, s) + datetime.timedelta(microseconds=us)
    except ValueError:
        return ZERO  # an invalid or zero date: the server's zero date


def _cut(us: int, digits: int, mariadb: bool) -> int:
    """Microseconds cut (MariaDB) or rounded (MySQL) to ``digits`` fractional digits."""
    unit = 10 ** (6 - digits)
    if mariadb or unit == 1:
        return us - us % unit if us >= 0 else -((-us) - (-us) % unit)
    return (us + unit // 2) // unit * unit if us >= 0 else -(((-us) + unit // 2) // unit * unit)


def as_temporal(old: Column, new: Column, ok: str, nk: str, stmt: Statement) -> Callable[[Any], Any]:
    digits = fsp(new)
    mariadb = stmt.mariadb

    def point(v: Any) -> datetime.datetime | int | str:
        """The old value as a naive local datetime, TIME microseconds (int), or ZERO."""
        if v is ZERO:
            return ZERO
        if ok == "datetime":
            return v
        if ok == "date":
            return datetime.datetime(v.year, v.month, v.day)
        if ok == "timestamp":
            return local(v, stmt)
        if ok == "time":
            return int(v)
        if ok in ("text", "binary", "enum", "set"):
            text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
            if nk == "time" and _TIME_TEXT.match(text):
                sign, h, mi, s, frac, rest = _TIME_TEXT.match(text).groups()  # type: ignore[union-attr]
                us = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + _micros(frac, rest, mariadb)
                return -us if sign else us
            parts = _parts(text, mariadb)
            if parts is None:
                if not text.strip():
                    return ZERO
                raise Unknown(f"the text {text[:40]!r} as a date (a layout only the server reads)")
            return _datetime_of(parts)
        if ok in ("int", "decimal"):
            number = v if ok == "decimal" else Decimal(v)
            whole = int(number)
            frac = int(((number - whole) * 1_000_000).to_integral_value()) if ok == "decimal" else 0
            if whole == 0:
                return ZERO
            text = str(whole)
            if len(text) not in (8, 14):
                raise Unknown(f"the number {v} as a date (a layout only the server reads)")
            found = _datetime_of(_parts(text) or (0, 0, 0, 0, 0, 0, 0))
            return found if found is ZERO or not isinstance(found, datetime.datetime) else found.replace(
                microsecond=frac)
        raise Unknown(f"{type_name(old)} -> {type_name(new)}")

    def store(v: Any) -> Any:
        p = point(v)
        if p is ZERO:
            return None
        if isinstance(p, int):  # a TIME
            if nk == "time":
                return _cut(p, digits, mariadb)
            if stmt.offset is None:
                raise Unknown("a TIME as a date: the statement's day in the session time zone SYSTEM")
            day = (stmt.micros + stmt.offset) // DAY_US
            p = EPOCH + datetime.timedelta(days=day, microseconds=p)
        assert isinstance(p, datetime.datetime)
        micros = (p - EPOCH) // datetime.timedelta(microseconds=1)
        if nk == "date":  # MySQL rounds to the second first ('23:59:59.5' is the next day)
            return p.date() if mariadb else (EPOCH + datetime.timedelta(microseconds=_cut(micros, 0, False))).date()
        if nk == "time":
            return _cut(micros % DAY_US, digits, mariadb)
        cut = _cut(micros, digits, mariadb)
        local = EPOCH + datetime.timedelta(microseconds=cut)
        if nk == "datetime":
            return local
        if stmt.offset is None:
            raise Unknown("a local time as a TIMESTAMP in the session time zone SYSTEM")
        return (local - datetime.timedelta(microseconds=stmt.offset)).replace(tzinfo=UTC)

    return store
