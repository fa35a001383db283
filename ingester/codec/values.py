"""Value formatting shared by the compiled column decoders: temporal types and DECIMAL.

Temporal values are strings exactly as the server prints them (zero dates included, which
Python's datetime cannot hold); DECIMAL is a string with the column's scale, so nothing is lost.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

from .errors import BinlogError

_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_day_cache: dict[int, str] = {}


def utc_datetime(seconds: int) -> str:
    """Unix seconds to 'YYYY-MM-DD hh:mm:ss' in UTC (0 is MySQL's zero timestamp)."""
    if seconds == 0:
        return "0000-00-00 00:00:00"
    days, rem = divmod(seconds, 86400)
    day = _day_cache.get(days)
    if day is None:
        day = datetime.date.fromordinal(_EPOCH_ORDINAL + days).isoformat()
        if len(_day_cache) < 100_000:
            _day_cache[days] = day
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"{day} {h:02d}:{m:02d}:{s:02d}"


def fraction(micros: int, fsp: int) -> str:
    """'.ffffff' cut to fsp digits ('' for fsp 0)."""
    if not fsp:
        return ""
    return "." + f"{micros:06d}"[:fsp]


def frac_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def read_frac(data: bytes, pos: int, fsp: int) -> int:
    """Fractional seconds of TIMESTAMP2/DATETIME2 (big-endian, unsigned) as microseconds."""
    n = (fsp + 1) // 2
    if not n:
        return 0
    v = int.from_bytes(data[pos : pos + n], "big")
    return v * (10_000, 100, 1)[n - 1]


def datetime2(data: bytes, pos: int, fsp: int) -> str:
    packed = int.from_bytes(data[pos : pos + 5], "big") - 0x8000000000
    micros = read_frac(data, pos + 5, fsp)
    if packed < 0:  # not produced by servers, but keep the sign rather than garble it
        return "-" + _datetime_parts(-packed, micros, fsp)
    return _datetime_parts(packed, micros, fsp)


def _datetime_parts(packed: int, micros: int, fsp: int) -> str:
    ymd = packed >> 17
    ym = ymd >> 5
    hms = packed & 0x1FFFF
    return (
        f"{ym // 13:04d}-{ym % 13:02d}-{ymd & 31:02d} "
        f"{hms >> 12:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}{fraction(micros, fsp)}"
    )


def time2(data: bytes, pos: int, fsp: int) -> str:
    """TIME2: 3 bytes of offset int part, then 0-3 bytes of fraction, stored reversed when negative."""
    n = (fsp + 1) // 2
    if n == 3:
        packed = int.from_bytes(data[pos : pos + 6], "big") - 0x800000000000
    else:
        intpart = int.from_bytes(data[pos : pos + 3], "big") - 0x800000
        if n == 0:
            frac = 0
        else:
            frac = int.from_bytes(data[pos + 3 : pos + 3 + n], "big")
            if intpart < 0 and frac:
                intpart += 1
                frac -= 0x100 if n == 1 else 0x10000
            frac *= 10_000 if n == 1 else 100
        packed = (intpart << 24) + frac
    sign = ""
    if packed < 0:
        sign = "-"
        packed = -packed
    hms = packed >> 24
    micros = packed & 0xFFFFFF
    return (
        f"{sign}{(hms >> 12) & 0x3FF:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}{fraction(micros, fsp)}"
    )


def old_time(v: int) -> str:
    """Pre-5.6 TIME: a signed int hhmmss."""
    sign = "-" if v < 0 else ""
    v = abs(v)
    return f"{sign}{v // 10000:02d}:{v // 100 % 100:02d}:{v % 100:02d}"


def old_datetime(v: int) -> str:
    """Pre-5.6 DATETIME: an int YYYYMMDDhhmmss."""
    d, t = divmod(v, 1_000_000)
    return f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d} {t // 10000:02d}:{t // 100 % 100:02d}:{t % 100:02d}"


def date3(v: int) -> str:
    return f"{v >> 9:04d}-{(v >> 5) & 15:02d}-{v & 31:02d}"


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decimal_code(precision: int, scale: int, var: str) -> tuple[int, list[str]]:
    """Source lines that decode a packed DECIMAL(precision, scale) at ``b[p:]`` into ``var``.

    The value is read as one big-endian integer; each group of up to 9 digits is a fixed bit
    field of it, so decoding is a few shifts, one divmod and one format, with no loop.
    """
    if not 0 < precision <= 65 or not 0 <= scale <= 30 or scale > precision:
        raise BinlogError(f"invalid DECIMAL({precision},{scale})")
    intg = precision - scale
    groups: list[tuple[int, int]] = []  # (byte length, digits), most significant first
    if intg % 9:
        groups.append((_DIG2BYTES[intg % 9], intg % 9))
    groups += [(4, 9)] * (intg // 9)
    groups += [(4, 9)] * (scale // 9)
    if scale % 9:
        groups.append((_DIG2BYTES[scale % 9], scale % 9))
    size = sum(g[0] for g in groups)
    sign_bit = 1 << (size * 8 - 1)
    all_ones = (1 << (size * 8)) - 1
    lines = [
        f"d_x = from_bytes(b[p:p + {size}], 'big')",
        f"if d_x & {sign_bit}:",
        f"    d_x ^= {sign_bit}",
        "    d_s = ''",
        "else:",
        f"    d_x ^= {all_ones ^ sign_bit}",
        "    d_s = '-'",
    ]
    shift = size * 8
    checks = []
    expr = ""
    for i, (length, digits) in enumerate(groups):
        shift -= length * 8
        lines.append(f"d_{i} = d_x >> {shift} & {(1 << (length * 8)) - 1}")
        checks.append(f"d_{i} > {10**digits - 1}")
        expr = f"d_{i}" if not i else f"({expr}) * {10**digits} + d_{i}"
    lines.append(f"if {' or '.join(checks)}:")
    lines.append(f"    raise BinlogError('corrupt DECIMAL({precision},{scale}) digit group', p)")
    if scale:
        lines.append(f"d_i, d_f = divmod({expr}, {10**scale})")
        lines.append(f"{var} = f'{{d_s}}{{d_i}}.{{d_f:0{scale}d}}'")
    else:
        lines.append(f"{var} = f'{{d_s}}{{{expr}}}'")
    return size, lines


def compile_decimal(precision: int, scale: int) -> tuple[int, Callable[[bytes, int], str]]:
    """A decoder function of packed DECIMAL(precision, scale) (for values outside row images)."""
    key = (precision, scale)
    if key in _DECIMALS:
        return _DECIMALS[key]
    size, lines = decimal_code(precision, scale, "v")
    ns: dict[str, object] = {"from_bytes": int.from_bytes, "BinlogError": BinlogError}
    exec("def decode(b, p):\n" + "".join(f"    {line}\n" for line in lines) + "    return v\n", ns)
    result = (size, ns["decode"])
    _DECIMALS[key] = result  # type: ignore[assignment]
    return result  # type: ignore[return-value]


_DECIMALS: dict[tuple[int, int], tuple[int, Callable[[bytes, int], str]]] = {}


# Pieces of DATETIME2 text, so the row decoders format a value with lookups, not arithmetic.
HOUR_MINUTE = [f"{i >> 6:02d}:{i & 63:02d}:" for i in range(2048)]
SECOND = [f"{i:02d}" for i in range(64)]
DATES: dict[int, str] = {}


def date_prefix(ymd: int) -> str:
    """'YYYY-MM-DD ' of DATETIME2's packed year*13+month, day; cached (dates repeat)."""
    ym = ymd >> 5
    text = f"{ym // 13:04d}-{ym % 13:02d}-{ymd & 31:02d} "
    if len(DATES) >= 100_000:
        DATES.clear()
    DATES[ymd] = text
    return text
