"""Where a compaction moves the rows it rewrites, so that the position deletes the job's batches commit while it
runs follow them (issue 39).

A compaction (compaction.py) reads a mirror's data files as of one snapshot and writes their live rows, sorted by
key, into new files; the job's batches go on committing meanwhile, and each batch of keys spread over the mirror
deletes by position rows of most data files, among them the ones being rewritten. Such a delete names the old file:
committed as it is, the replaced rows would come back in the new files. Giving the compaction up instead (what
compaction.py did) starves it under a steady load of spread updates: the delete files pile up and every batch gets
slower.

``MovedRows`` keeps, for each file read, the positions of the rows it read (the file's rows less the positions its
delete files delete: what pyiceberg's scan of it gives, in that order) and their keys, and for each new file its
key columns (read back once written). A delete committed since then of (old file, position) is the row of that
key in the new files: ``follow`` gives those positions, which the compaction's ``replace`` snapshot deletes in a
delete file of its own (its data sequence number is the new files', and a position delete applies to the data files
of its sequence number and older: Iceberg's spec, pyiceberg's DeleteFileIndex). A mirror holds one live row per
key, so a key read is in exactly one new file once: anything else and ``follow`` says so (None), and the compaction
is given up as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa

from ..batch.key_index import BatchKeys, FileKeys, file_keys
from .position_deletes import FilePositions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import FileScanTask, Table

    from .planning import KeptManifests
    from .rewrite import Rewritten


class _Read(NamedTuple):
    """A data file's rows as a compaction read them: their positions in the file (ascending) and the index of the
    first in the read (the rows of the files read follow each other in the order the files were read)."""

    positions: np.ndarray
    start: int


class _Written(NamedTuple):
    """A new data file and its key columns in file order."""

    data_file: DataFile
    keys: FileKeys


@dataclass
class MovedRows:
    """The rows a compaction read (``read``: by old data file path; ``keys``: their key columns ``pk``, in read
    order), ``kept``: the delete files' positions (planning.py), and the new files it wrote them to (``written``)."""

    pk: list[str]
    read: dict[str, _Read]
    keys: pa.Table
    kept: KeptManifests
    written: list[_Written]

    @classmethod
    def of(cls, table: Table, tasks: Sequence[FileScanTask], rewritten: Rewritten, pk: list[str],
           kept: KeptManifests) -> MovedRows | None:
        """The rows of ``rewritten`` (rewrite.py: its read of ``tasks``, in their order, and the new files it wrote
        them to) with the positions each came from; None where the counts do not agree (the mirror is not keyed, or
        a file's rows less its deletes are not what was read)."""
        if not pk or rewritten.keys is None:
            return None
        read, start = {}, 0
        for task in tasks:
            positions = kept.live(table.io, task.file.file_path, task.delete_files,
                                  np.arange(task.file.record_count, dtype=np.int64))
            read[task.file.file_path] = _Read(positions, start)
            start += len(positions)
        if start != rewritten.rows:
            return None
        written = [_Written(f, file_keys(keys)) for f, keys in zip(rewritten.added, rewritten.written, strict=True)]
        return cls(pk, read, rewritten.keys, kept, written)

    def follow(self, io: FileIO, deletes: dict[str, list[DataFile]]) -> list[FilePositions] | None:
        """The positions in the new files of the rows read that the delete files ``deletes`` (by the old data file
        they name) delete (positions the read did not hold are not in the new files either); None where a key is
        not in the new files exactly once."""
        found = []
        for path, named in deletes.items():
            was = self.read[path]
            positions = self.kept.deleted(io, path, named)
            at = np.searchsorted(was.positions, positions)
            held = at < len(was.positions)
            held[held] = was.positions[at[held]] == positions[held]
            found.append(was.start + at[held])
        rows = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
        if not len(rows):
            return []
        batch = BatchKeys(self.keys.take(rows), self.pk)
        out = [FilePositions(w.data_file, w.keys.positions(batch).astype(np.int64)) for w in self.written]
        out = [f for f in out if len(f.positions)]
        return out if sum(len(f.positions) for f in out) == len(rows) else None
