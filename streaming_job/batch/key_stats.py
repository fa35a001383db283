"""A mirror's first key column as the driver compares it with Delta's file statistics (delta/mirror_driver.py): the
key types it keeps, a file's key range from its statistics, the statistics of a file it writes, a batch's keys sorted
to be searched with those ranges.

Delta's writer keeps (as its statistics show): integers and decimals as JSON numbers, exact; dates as
``YYYY-MM-DD``; timestamps to the millisecond, cut (not rounded), as ``...T03:04:05.123Z`` (``+hh:mm`` in another
session time zone) or, without a time zone, ``...T03:04:05.123``; text to 32 characters, a cut largest value followed
by U+10FFFF. A range holds every key the file may hold: a timestamp's largest value is a millisecond's start (999
microseconds more are let in), a cut text one bounds the file's by its characters' next string, and a text one of 32
UTF-8 bytes or more without U+10FFFF (another writer's: it may be cut) leaves the range open above. The driver writes
its files' statistics in the same forms. Dates and timestamps compare as day and microsecond numbers, decimals of
scale 0 as integers, others as Python Decimals; text in code point order (Arrow's, and Spark's for UTF-8 bytes).
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..decode.lake_types import date_days
from .key_index import key_numbers
from .key_range import KeyRange

INTEGER = ("tinyint", "smallint", "int", "bigint")
_DRIVER_TYPES = (*INTEGER, "string", "binary", "date", "timestamp", "timestamp_ntz")
# Delta's writer keeps a text column's statistics to 32 characters (delta.dataSkippingStringPrefixLength): a largest
# value of 32 UTF-8 bytes or more (no fewer than its characters) may be a cut one, so the range is then open above
TEXT_STATS_BYTES = 32
_TEXT_STATS_CHARACTERS = 32
_TIE_BREAKER = "\U0010ffff"  # after a cut largest value (Delta's writer's, and the driver's)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MICROSECOND = datetime.timedelta(microseconds=1)


def driver_key(dtype: str) -> bool:
    """Whether the driver keeps a mirror whose first key column is of this lake type (floats and booleans: Spark)."""
    return dtype in _DRIVER_TYPES or dtype.startswith("decimal(")


def file_range(stats: str | None, key: str, dtype: str | None = None) -> KeyRange | None:
    """A file's range of the first key from its statistics (JSON); None where there is none or it cannot be read.
    ``dtype``: the key's lake type (None: integers only, as verify's cuts compare them)."""
    if not stats:
        return None
    parsed = json.loads(stats, parse_float=Decimal) if dtype and dtype.startswith("decimal(") else orjson.loads(stats)
    return stats_range(parsed, key, dtype)


def stats_range(stats: dict[str, Any], key: str, dtype: str | None = None) -> KeyRange | None:
    """file_range of statistics already parsed."""
    low, high = stats.get("minValues", {}).get(key), stats.get("maxValues", {}).get(key)
    if low is None or high is None:
        return None
    try:
        if dtype is None or dtype in INTEGER:
            ok = type(low) is int and type(high) is int
            return KeyRange(low, high) if ok else None
        if dtype == "string":  # a cut smallest value is still a lower bound
            return KeyRange(low, _text_high(high)) if isinstance(low, str) and isinstance(high, str) else None
        if dtype == "date":
            days = date_days(str(low)), date_days(str(high))
            return KeyRange(*days) if None not in days else None
        if dtype in ("timestamp", "timestamp_ntz"):
            return KeyRange(_micros(low), _micros(high) + 999)
        if dtype.startswith("decimal("):
            low, high = Decimal(low), Decimal(high)  # (an exact number, whatever its JSON form)
            if dtype.endswith(",0)"):
                return KeyRange(int(low), int(high)) if low == int(low) and high == int(high) else None
            return KeyRange(low, high)
    except (TypeError, ValueError, ArithmeticError):
        return None
    return None


def _text_high(high: str) -> str | None:
    """A text range's upper bound from a largest-value statistic: Delta's writer cuts a longer one to its first 32
    characters and appends U+10FFFF, so every value of the file is below the next string after those characters in
    code point order; one without it is whole under 32 UTF-8 bytes, and may have been cut otherwise (None: open)."""
    if high.endswith(_TIE_BREAKER):
        return _next_prefix(high[:-1])
    return None if len(high.encode()) >= TEXT_STATS_BYTES else high


def _next_prefix(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix`` (None: none, all its characters are the
    last one)."""
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i]) + 1
        if code <= 0x10FFFF:
            return prefix[:i] + chr(0xE000 if 0xD800 <= code <= 0xDFFF else code)
    return None


def _micros(text: Any) -> int:
    """An ISO timestamp statistic as microseconds since 1970-01-01 00:00 UTC (one without a zone: as UTC)."""
    found = datetime.datetime.fromisoformat(str(text))
    if found.tzinfo is None:
        found = found.replace(tzinfo=datetime.UTC)
    return (found - _EPOCH) // _MICROSECOND


def stats_values(column: pa.ChunkedArray | pa.Array) -> tuple[Any, Any] | None:
    """A driver-written file's smallest and largest key as Delta's writer puts them in its statistics (None: no
    statistics, as Delta keeps none of a bytes column)."""
    kind = column.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return None
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or high is None:
        return None
    if pa.types.is_timestamp(kind):
        return _timestamp_stat(low), _timestamp_stat(high)
    if pa.types.is_date(kind):
        return low.isoformat(), high.isoformat()
    if pa.types.is_decimal(kind):  # a JSON number, exact (orjson writes a Fragment as it is)
        return orjson.Fragment(format(low, "f")), orjson.Fragment(format(high, "f"))
    if isinstance(high, str) and len(high.encode()) >= TEXT_STATS_BYTES:  # as Delta's writer cuts them
        return low[:_TEXT_STATS_CHARACTERS], high[:_TEXT_STATS_CHARACTERS] + _TIE_BREAKER
    return low, high


def _timestamp_stat(value: datetime.datetime) -> str:
    """Delta's form: to the millisecond (cut), ``Z`` for a time zone's instant, nothing for a wall-clock time."""
    text = value.replace(microsecond=value.microsecond // 1000 * 1000, tzinfo=None).isoformat(timespec="milliseconds")
    return text + ("Z" if value.tzinfo is not None else "")


def sorted_keys(column: pa.ChunkedArray) -> np.ndarray:
    """A batch's first key column, ascending, as a file's range (``stats_range``) is compared with it: integers,
    dates, timestamps and decimals of scale 0 as numbers (key_index.key_numbers), text, bytes and other decimals in
    Arrow's order (Delta's: text by code point) as Python objects."""
    values = column.drop_null()
    numbers = key_numbers(values)
    if numbers is not None:
        return np.sort(numbers)
    return values.take(pc.sort_indices(values)).to_numpy(zero_copy_only=False)
