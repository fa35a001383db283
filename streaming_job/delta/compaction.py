"""Compaction of small files: a table gains a file per micro-batch, so once enough small ones gather, a
batch's commit rewrites them together. The change log's here (ChangeLogCompaction: files of one commit
date read and written again as one); the mirror's small files are picked by mirror_driver.MirrorFiles and
rewritten with the batch that the driver keeps the mirror with."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..batch.small_files import FileSize, fewest_rows, is_small
from ..batch.writer import PARTITION_COLUMN, write_change_log_file
from ..lake.files import LakeFiles
from ..lake.paths import join, scheme
from .commit import Commit, Moved

log = logging.getLogger("binlake.land")


@dataclass
class ChangeLogFiles:
    """A change log's small files (batch.small_files) as the driver last saw them (Delta version), by commit
    date."""

    version: int
    files: dict[str, FileSize]
    dates: dict[str, str]
    skipped: set[str] = field(default_factory=set)  # files a compaction could not read together

    @classmethod
    def read(cls, commit: Commit, below: int) -> ChangeLogFiles:
        found = cls(commit.version, {}, {})
        for file in commit.files():
            name, values = file.path, file.partition_values
            if not file.deletion_vector and PARTITION_COLUMN in values and not (scheme(name) or name.startswith("/")):
                found.add(name, values[PARTITION_COLUMN], file.size, file.rows(), below)
        return found

    def add(self, name: str, date: str, size: int, rows: int, below: int) -> None:
        if is_small(size, rows, below):
            self.files[name], self.dates[name] = FileSize(name, size, rows), date

    def pick(self, at_least: int, budget: int) -> tuple[str, list[str]] | None:
        """The commit date with the most small files, if at least ``at_least``, and those of them a compaction
        takes (fewest rows first, within ``budget`` bytes), at least two."""
        by_date: dict[str, list[FileSize]] = {}
        for name, date in self.dates.items():
            if name not in self.skipped:
                by_date.setdefault(date, []).append(self.files[name])
        if not by_date:
            return None
        date, files = max(by_date.items(), key=lambda kv: len(kv[1]))
        if len(files) < at_least:
            return None
        out = sorted(f.name for f in fewest_rows(files, budget))
        return (date, out) if len(out) >= 2 else None

    def skip(self, names: list[str]) -> None:
        self.skipped.update(names)

    def update(self, version: int, added: list[tuple[str, str, int, int]], removed: list[str], below: int) -> None:
        """``added``: (name, commit date, bytes, rows) each."""
        for name in removed:
            self.files.pop(name, None)
            self.dates.pop(name, None)
        for name, date, size, rows in added:
            self.add(name, date, size, rows, below)
        self.version = version


class ChangeLogCompaction:
    """The change logs' small files, kept up to date by this job's commits: once one of a change log's
    commit dates holds ``compact_files`` files under ``small_file_bytes``, up to ``budget`` bytes of them
    are compacted by the table's next commit."""

    def __init__(self, compact_files: int, small_file_bytes: int, budget: int, files: LakeFiles | None) -> None:
        self.compact_files = compact_files
        self.small_file_bytes = small_file_bytes
        self.budget = budget
        self._files: dict[str, ChangeLogFiles] = {}  # path -> its small files
        self.lake = files  # where they are read and written (None: nothing compacted, Spark lands the lake)

    def moved(self, commit: Commit, path: str) -> Moved:
        """A change log gains a file per micro-batch; once one of its commit dates holds ``compact_files``
        files under ``small_file_bytes``, they are read and written again as one file of that date, which
        the batch's commit adds in their place (Delta's ``dataChange`` false: the same rows, which a
        stream reading the change log does not see again). Files whose schemas Arrow cannot unify (none
        that binlake wrote: columns are only added) are left as they are."""
        lake = self.lake
        if lake is None:
            return (), ()
        files = self._files.get(path)
        if files is None or files.version != commit.version:
            files = self._files[path] = ChangeLogFiles.read(commit, self.small_file_bytes)
        picked = files.pick(self.compact_files, self.budget)
        if picked is None:
            return (), ()
        date, names = picked
        started = time.monotonic()
        try:
            rows = pa.concat_tables([lake.read_parquet(join(path, n)) for n in names], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            log.debug("%s: %d small change-log files of %s not compacted: %s", path, len(names), date, exc)
            files.skip(names)
            return (), ()
        add = write_change_log_file(lake, path, date, rows)
        log.debug("%s: %d small change-log files of %s compacted into one in %.1fs", path, len(names), date,
                  time.monotonic() - started)
        return [add], [(n, files.files[n].size, {PARTITION_COLUMN: date}) for n in names]

    def committed(self, path: str, version: int, files: list[tuple[Any, ...]], moved: Moved) -> None:
        """The batch's commit (``version``) added the change-log ``files`` (FILE_COLUMNS tuples) and made
        the compaction ``moved`` returned for it."""
        added = [(n, d, size, rows) for n, d, size, rows, *_ in files]
        added += [(a.path, a.partition_values[PARTITION_COLUMN], a.size, a.stats["numRecords"]) for a in moved[0]]
        self._files[path].update(version, added, [n for n, _, _ in moved[1]], self.small_file_bytes)
