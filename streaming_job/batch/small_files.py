"""Which data files a table's compaction rewrites (Delta's change logs and mirrors, Iceberg's tables): one rule
for every format, counted in rows, what a rewrite costs, as well as in bytes. A file is small when it holds
fewer than ``SMALL_ROWS`` rows in fewer than land.small_file_bytes; a compaction takes those of fewest rows
first, at most ``COMPACT_ROWS`` rows and land.compact_bytes in all. Bytes alone are not enough: a bulk load's
well-compressed files hold hundreds of thousands of rows in a few MiB, and rewriting them all in one batch took
a 10,000,000-row mirror's batch from under a second to 9.5 s (bench/run_big_tables.py --keys hot)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

SMALL_ROWS = 50_000
COMPACT_ROWS = 250_000  # ~0.3-0.5 s of pyarrow's reading and writing on 2 CPUs
# a file more than this share of whose rows are deleted (a Delta deletion vector's, Iceberg's position deletes) is
# rewritten without them
REWRITE_SHARE = 0.3


class FileSize(NamedTuple):
    """A data file as a compaction weighs it: its name, bytes and rows (deleted ones too)."""

    name: str
    size: int
    rows: int


def is_small(size: int, rows: int, small_file_bytes: int) -> bool:
    return size < small_file_bytes and rows < SMALL_ROWS


def fewest_rows(files: Iterable[FileSize], byte_budget: int, rows_budget: int = COMPACT_ROWS) -> list[FileSize]:
    """Of ``files``, those of fewest rows first while they add up to at most ``rows_budget`` rows and
    ``byte_budget`` bytes (the order they come in: by rows)."""
    chosen, rows, size = [], 0, 0
    for f in sorted(files, key=lambda f: (f.rows, f.name)):
        rows, size = rows + f.rows, size + f.size
        if rows > rows_budget or size > byte_budget:
            break
        chosen.append(f)
    return chosen
