"""A key column's range: the one type for the bounds of a batch's keys (the MERGE's condition, pyiceberg's
delete planning), of a mirror file's keys (its statistics) and of a verify cut (format.mirror_read.KeyCut).
Each format renders it in its own terms: Delta's SQL literals (delta/mirror_spark.py), pyiceberg's
expressions (iceberg/tables.py)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc


class KeyRange(NamedTuple):
    """A key column's smallest and largest value, both included; None: unbounded on that side."""

    low: Any
    high: Any

    def meets(self, other: KeyRange) -> bool:
        """Whether a value may lie in both ranges (the bounds of both of one comparable type)."""
        apart = (self.high is not None and other.low is not None and self.high < other.low) or (
            other.high is not None and self.low is not None and other.high < self.low)
        return not apart


def range_of(values: pa.Array | pa.ChunkedArray) -> KeyRange | None:
    """The range of a column's values (None: no value that is not null)."""
    bounds = pc.min_max(values)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return None if low is None or high is None else KeyRange(low, high)
