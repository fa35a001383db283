"""Where a mirror file's rows of a batch's keys are (their positions, for the file's deletion vector), from the
file's key columns read once and kept in memory (delta/mirror_driver.DriverMirror: 512 MiB of them at most).

A file the driver wrote holds its rows in key order. A single integer key column that ascends is kept as runs of
consecutive keys (``KeyRuns``): a table keyed by AUTO_INCREMENT has one run per file, 24 bytes whatever its rows,
where the column itself takes 8 bytes a row (a 100,000,000-row mirror's 800 MB would not fit the memory kept, and
each batch of updates at scattered keys would read every file's keys again). Ascending keys with gaps everywhere
are kept as they are and searched (``SortedKeys``); other keys (several columns, or a file in another order, e.g.
one Spark's MERGE wrote) are matched by a scan or a join (``KeyColumns``). Each finds exactly the rows a join of the
file's keys with the batch's finds (a null matches nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_POSITION = "_binlake_position"


def key_numbers(keys: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """A first key column's values (no nulls) as numbers numpy compares exactly: integers as they are, dates as days
    and timestamps as microseconds since 1970 (whatever unit a file has them in), a decimal of scale 0 (an unsigned
    BIGINT's decimal(20,0)) as uint64 or int64 where every value fits, else as Python integers; None for other
    types (text, bytes, decimals with a scale: compared as they are)."""
    kind = keys.type
    if pa.types.is_integer(kind):
        return keys.to_numpy()
    if pa.types.is_date32(kind):
        return pc.cast(keys, pa.int32()).to_numpy()
    if pa.types.is_timestamp(kind):
        return pc.cast(pc.cast(keys, pa.timestamp("us", kind.tz)), pa.int64()).to_numpy()
    if not (pa.types.is_decimal(kind) and kind.scale == 0):
        return None
    bounds = pc.min_max(keys)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None or (low >= 0 and high < 1 << 64):
        return pc.cast(keys, pa.uint64()).to_numpy()
    if -(1 << 63) <= low and high < 1 << 63:
        return pc.cast(keys, pa.int64()).to_numpy()
    return np.array([int(v) for v in keys.to_pylist()], dtype=object)


class BatchKeys:
    """A batch's keys (its last change per key: ``latest``, key columns ``pk``), looked up in each file it may
    touch; the first column's numbers are worked out once for all of them."""

    def __init__(self, latest: pa.Table, pk: list[str]) -> None:
        self.latest, self.pk = latest, pk

    @cached_property
    def numbers(self) -> np.ndarray:
        """The first key column's distinct non-null values, ascending (a key of numbers: file_keys)."""
        found = key_numbers(self.latest.column(self.pk[0]).drop_null())
        assert found is not None
        return np.unique(found)


class FileKeys(Protocol):
    """A file's keys as kept in memory: its rows (deleted ones too) and the bytes kept."""

    @property
    def rows(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def positions(self, batch: BatchKeys) -> np.ndarray:
        """The (ascending, uint64) positions of the file's rows whose key is one of the batch's."""
        ...


@dataclass(frozen=True)
class KeyRuns:
    """Ascending, distinct integer keys as runs of consecutive ones: run i holds keys ``starts[i]`` to
    ``ends[i]`` at rows ``firsts[i]`` on."""

    starts: np.ndarray
    ends: np.ndarray
    firsts: np.ndarray
    rows: int

    @property
    def nbytes(self) -> int:
        return self.starts.nbytes + self.ends.nbytes + self.firsts.nbytes

    def positions(self, batch: BatchKeys) -> np.ndarray:
        wanted = _as(batch.numbers, self.starts.dtype)
        run = np.searchsorted(self.starts, wanted, "right") - 1  # the last run starting at or below each key
        found = run >= 0
        run, wanted = run[found], wanted[found]
        inside = wanted <= self.ends[run]
        run, wanted = run[inside], wanted[inside]
        return (self.firsts[run] + (wanted - self.starts[run]).astype(np.int64)).astype(np.uint64)


@dataclass(frozen=True)
class SortedKeys:
    """Ascending, distinct integer keys, searched by bisection (O(batch keys x log rows))."""

    numbers: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.numbers)

    @property
    def nbytes(self) -> int:
        return self.numbers.nbytes

    def positions(self, batch: BatchKeys) -> np.ndarray:
        wanted = _as(batch.numbers, self.numbers.dtype)
        at = np.searchsorted(self.numbers, wanted)
        inside = at < len(self.numbers)
        at, wanted = at[inside], wanted[inside]
        return at[self.numbers[at] == wanted].astype(np.uint64)


@dataclass(frozen=True)
class KeyColumns:
    """A file's key columns as they are: its rows of the batch's keys found by a scan (one column) or a join."""

    keys: pa.Table

    @property
    def rows(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes

    def positions(self, batch: BatchKeys) -> np.ndarray:
        if len(batch.pk) == 1:
            column = batch.latest.column(batch.pk[0]).combine_chunks()
            found = pc.is_in(self.keys.column(batch.pk[0]), value_set=column, skip_nulls=True)
            return np.flatnonzero(found.to_numpy(zero_copy_only=False)).astype(np.uint64)
        numbered = self.keys.append_column(_POSITION, pa.array(np.arange(len(self.keys), dtype=np.uint64)))
        joined = numbered.join(batch.latest.select(batch.pk), keys=batch.pk, join_type="inner")
        return np.sort(joined.column(_POSITION).to_numpy())


def file_keys(keys: pa.Table) -> FileKeys:
    """A file's key columns (in file order) as kept in memory: runs, sorted numbers or the columns themselves."""
    if keys.num_columns != 1 or keys.column(0).null_count:
        return KeyColumns(keys)
    numbers = key_numbers(keys.column(0))
    if numbers is None or numbers.dtype == object:
        return KeyColumns(keys)
    if len(numbers) > 1 and not np.all(numbers[1:] > numbers[:-1]):
        return KeyColumns(keys)  # not in ascending order (or a key twice): scanned
    breaks = np.flatnonzero(np.diff(numbers) != 1) + 1  # where a run starts, after the first
    if 4 * (len(breaks) + 1) > len(numbers):
        return SortedKeys(numbers)
    firsts = np.concatenate([[0], breaks]).astype(np.int64)
    lasts = np.concatenate([breaks - 1, [len(numbers) - 1]])
    return KeyRuns(numbers[firsts], numbers[lasts], firsts, len(numbers))


def _as(wanted: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The batch's (ascending) key numbers in a file's integer type: those outside its range are in no such file."""
    if wanted.dtype == dtype:
        return wanted
    bounds = np.iinfo(dtype)
    if len(wanted):  # compared as Python integers: exact whatever the two types
        low = int(np.searchsorted(wanted, bounds.min, "left")) if int(wanted[0]) < bounds.min else 0
        high = int(np.searchsorted(wanted, bounds.max, "right")) if int(wanted[-1]) > bounds.max else len(wanted)
        wanted = wanted[low:high]
    return wanted.astype(dtype)
