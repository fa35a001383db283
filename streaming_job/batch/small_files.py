"""Which data files a table's compaction rewrites (Delta's change logs and mirrors, Iceberg's tables): one rule
for every format, counted in rows, what a rewrite costs, as well as in bytes. A file is small when it holds
fewer than ``SMALL_ROWS`` rows in fewer than land.small_file_bytes; a compaction takes those of fewest rows
first, at most ``COMPACT_ROWS`` rows and land.compact_bytes in all. Bytes alone are not enough: a bulk load's
well-compressed files hold hundreds of thousands of rows in a few MiB, and rewriting them all in one batch took
a 10,000,000-row mirror's batch from under a second to 9.5 s (bench/run_big_tables.py --keys hot).

A compaction off the batches' path (Iceberg's upkeep) merges the files in between too (``tiered``): once a
partition holds ``MERGE_FILES`` files under half of ``MERGE_ROWS`` (small ones among them), those of fewest rows
first, each next one at most ``MERGE_RATIO`` times the rows taken before it (or than ``MERGE_FLOOR``), up to
``MERGE_ROWS`` rows in all. A long-running table keeps about one file per ``MERGE_ROWS`` rows and two or three
smaller ones, as a compacted one does, and each row is rewritten about nine times on its way up (simulated with
batches of 2,000 rows: 2.5 such files on average and at most 3, 9.1 rewrites per row; merging all of them at once,
2.0 files and 42 rewrites; batches of 500 rows: 21 rewrites, of 20,000: 4)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

SMALL_ROWS = 50_000
COMPACT_FILES = 32  # land.compact_files of Delta's tables, compacted in the batches' commits
COMPACT_ROWS = 250_000  # ~0.3-0.5 s of pyarrow's reading and writing on 2 CPUs
MERGE_ROWS = 1_000_000
MERGE_FILES = 4  # land.compact_files of Iceberg's, merged beside the batches
MERGE_RATIO = 4
MERGE_FLOOR = 10_000  # rows: files this small join a merge whatever its rows so far (a one-row file never blocks it)
# a file more than this share of whose rows are deleted (a Delta deletion vector's, Iceberg's position deletes) is
# rewritten without them
REWRITE_SHARE = 0.3
# ... by a compaction off the batches' path (Iceberg's upkeep, its rewrites in a worker process at the lowest CPU
# priority): a reader reads the deleted rows too, and a mirror's files hold 5% of them on average, not 15%
MERGE_SHARE = 0.1
# A quiet table's compaction (land.quiet_compaction) takes up to this many times a compaction's
# rows, and merges files under half of that: a 10,000,000-row mirror kept 13 files of up to 1,000,000 rows, and a
# Spark scan of them took 1.46x one of a single file. A larger file whose deleted share passes MERGE_SHARE is then
# rewritten alone (its rows past a compaction's): what a compaction holds in memory stays bounded by this
TIDY_RATIO = 4


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


def tiered(files: Iterable[FileSize], byte_budget: int, rows_budget: int) -> list[FileSize]:
    """Of ``files``, those of fewest rows first while each next one holds at most ``MERGE_RATIO`` times the rows
    taken before it (or than ``MERGE_FLOOR``), within ``rows_budget`` rows and ``byte_budget`` bytes in all; none
    where fewer than two."""
    chosen: list[FileSize] = []
    rows = size = 0
    for f in sorted(files, key=lambda f: (f.rows, f.name)):
        grown = chosen and f.rows > MERGE_RATIO * max(rows, MERGE_FLOOR)
        if grown or rows + f.rows > rows_budget or size + f.size > byte_budget:
            break
        chosen.append(f)
        rows, size = rows + f.rows, size + f.size
    return chosen if len(chosen) >= 2 else []


def tidy_pick(heavy: Iterable[FileSize], open_: Iterable[FileSize], byte_budget: int,
              rows_budget: int) -> list[FileSize]:
    """A quiet table's compaction pass (Delta's: delta/tidy.py): of the files with deleted rows (``heavy``), those of
    fewest rows first within the budgets (the smallest alone where none fits), with the ``open_`` files (no deleted row,
    under half of ``rows_budget``) that fit beside them; where none has deleted rows, the open files, at least two."""
    heavy, open_ = list(heavy), list(open_)
    kept = fewest_rows(heavy, byte_budget, rows_budget) or fewest_rows(heavy, 1 << 62, 1 << 62)[:1]
    if not kept and len(open_) < 2:
        return []
    rest = fewest_rows(open_, byte_budget - sum(f.size for f in kept), rows_budget - sum(f.rows for f in kept))
    return kept + rest if kept or len(rest) >= 2 else []
