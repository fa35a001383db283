"""A quiet Delta mirror compacted whole (land.quiet_compaction; docs/LAND.md, "Delta Lake"): once no commit has
changed a mirror for that long, the upkeep's thread (format/upkeep.py) rewrites every file with a deletion vector
without its deleted rows and merges its files under half of a quiet compaction's rows (batch/small_files.tidy_pick),
pass after pass until none is due, so that a mirror kept with deletion vectors reads as fast as a compacted one
until its next change. A batch's own commits keep the mirror meanwhile as before (mirror_driver.py: a file rewritten
at ``REWRITE_SHARE`` deleted rows, small files compacted with the batch): only a quiet table pays for the rest.

A pass reads the table's log on its own (delta_log.TableLog: the batches' threads keep theirs), reads and writes the
files beside the batches (pausing while one lands), then, while no writer holds the table (``Upkeep.exclusive``),
reads the log again and commits only where every file it rewrote is still live with the deletion vector it read
(Delta's rule for a compaction: no batch deleted or replaced a row of them since); else its files are deleted and the
table, changed since, is tidied once quiet again. The commit is Delta's OPTIMIZE: the same rows (``dataChange``
false), no SetTransaction of its own (the table keeps the batches'). A kill -9 before it leaves files no version
names (VACUUM removes them); after it, the rows are the same in either version."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa

from ..batch.key_stats import driver_key
from ..batch.keys import recorded_key
from ..batch.mirror import conform
from ..batch.small_files import MERGE_ROWS, TIDY_RATIO, FileSize, tidy_pick
from ..batch.writer import write_mirror_file
from ..decode.lake_types import arrow_type
from ..format.upkeep import Due, Upkeep
from ..lake.delta_log import CommitConflict, TableLog, UnreadableLog
from ..lake.files import LakeFiles
from ..lake.paths import join, scheme
from .commit import compaction_actions
from .vector_files import VectorFiles

log = logging.getLogger("binlake.land")
Name = tuple[str, str]


class DeltaTidy:
    """The quiet mirrors' compaction of a lake whose logs the driver writes (``files``), on its upkeep's thread
    (``upkeep``: a mirror's entry, its path, tidied ``quiet_after`` seconds after its last commit; ``lease`` checked
    first): each pass at most ``rows`` rows (deleted ones too) and ``budget`` bytes of files, written as files of up to
    ``rows`` rows."""

    def __init__(self, files: LakeFiles, budget: int, lease: Callable[[], None] | None, quiet_after: float,
                 rows: int = TIDY_RATIO * MERGE_ROWS) -> None:
        self.files = files
        self.budget = budget
        self.rows = rows
        self.vectors = VectorFiles(files)
        self.upkeep: Upkeep[str] = Upkeep(self.work, lease, quiet_after, "binlake-delta")

    def work(self, name: Name, due: Due[str]) -> bool:
        """One pass over the mirror at ``due.table`` once it is quiet (on the upkeep's thread); whether it committed
        a compaction (the upkeep then tries again)."""
        return due.tidy and self.tidy(name, due.table, self.upkeep.pause, self.upkeep.exclusive)

    def tidy(self, name: Name, path: str, pause: Callable[[], None], exclusive: Callable[[Name], Any]) -> bool:
        table = TableLog(path, self.files)
        try:
            table.refresh()
        except UnreadableLog as exc:
            log.debug("%s: not compacted once quiet (%s)", path, exc)
            return False
        picked = self.pick(table)
        if not picked:
            return False
        schema, key = _schema(table)
        started, version = time.monotonic(), table.version
        pause()
        parts = []
        for add in picked:
            rows = self.files.read_parquet(join(path, add["path"]))
            parts.append(conform(self.vectors.live(rows, path, add.get("deletionVector") or None), schema))
        rows = pa.concat_tables(parts).sort_by(key[0])
        del parts
        pause()
        size = -(-len(rows) // max(1, -(-len(rows) // self.rows)))  # files of like rows, at most ``rows`` each
        adds = [write_mirror_file(self.files, path, rows.slice(i, size), key[0]) for i in range(0, len(rows), size)
                ] if len(rows) else []
        with exclusive(name):
            try:
                table.refresh()
                if any(_vector(table.files.get(a["path"])) != _vector(a) or a["path"] not in table.files
                       for a in picked):
                    raise CommitConflict("a batch changed its files meanwhile")
                committed = table.commit(compaction_actions(adds, picked), "OPTIMIZE",
                                         {"predicate": "[]", "binlake": "quiet"}, blind_append=False)
            except (CommitConflict, UnreadableLog) as exc:
                log.debug("%s: quiet compaction dropped (%s); it comes again once the table is quiet", path, exc)
                for name_, *_ in adds:
                    self.files.delete(join(path, name_))
                return False
        log.info("%s: compacted once quiet (version %d after %d): %d files (%d with deletion vectors) of %d rows "
                 "rewritten as %d in %.1fs", path, committed, version, len(picked),
                 sum(1 for a in picked if a.get("deletionVector")), len(rows), len(adds), time.monotonic() - started)
        return True

    def pick(self, table: TableLog) -> list[dict[str, Any]]:
        """The add actions of the files a pass rewrites (tidy_pick); none where the mirror is not one the driver
        keeps (a key of a type it keeps, unpartitioned files of the table's own directory)."""
        key = recorded_key(table.configuration)
        types = dict(table.columns())
        if table.version < 0 or not table.writable or not key or not driver_key(types.get(key[0], "")):
            return []
        heavy, open_ = [], []
        for path, add in table.files.items():
            if add.get("partitionValues") or scheme(path) or path.startswith("/"):
                return []
            stats = orjson.loads(add["stats"]) if add.get("stats") else {}
            if not isinstance(stats.get("numRecords"), int):
                return []
            weighed = FileSize(path, int(add["size"]), stats["numRecords"])
            if add.get("deletionVector"):
                heavy.append(weighed)
            elif weighed.rows < self.rows // 2:
                open_.append(weighed)
        picked = {f.name for f in tidy_pick(heavy, open_, self.budget, self.rows)}
        try:
            _schema(table)
        except (KeyError, ValueError):  # a column of a type the driver does not write
            return []
        return [table.files[p] for p in sorted(picked)]


def _schema(table: TableLog) -> tuple[pa.Schema, list[str]]:
    key = recorded_key(table.configuration) or []
    return pa.schema([pa.field(n, arrow_type(t)) for n, t in table.columns()]), key


def _vector(add: dict[str, Any] | None) -> Any:
    return None if add is None else (add.get("deletionVector") or None)
