"""Deletion vectors on the lake (deletion_vectors.py's bytes, read and written through lake/files.LakeFiles): the
rows a data file's vector deletes, a file's live rows, and a batch's new vectors written as one file."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow as pa

from ..lake.files import LakeFiles
from ..lake.paths import join
from . import deletion_vectors as dv


class VectorFiles:
    """A lake's deletion vectors, those read kept by their unique id within ``budget`` bytes of row positions (a
    vector never changes: a new one is another file)."""

    def __init__(self, lake: LakeFiles, budget: int = 64 << 20) -> None:
        self.lake = lake
        self.budget = budget
        self.size = 0
        self._read: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # tables land side by side

    def deleted(self, table: str, vector: dict[str, Any] | None) -> np.ndarray:
        """The row positions (sorted uint64) a data file's ``vector`` (the log's descriptor; None: none)
        deletes; ``table``: the table's path, which "u" vectors' files are relative to."""
        if not vector:
            return np.zeros(0, np.uint64)
        descriptor = dv.Descriptor.from_json(vector)
        key = (table, descriptor.unique_id)
        with self._lock:
            found = self._read.get(key)
            if found is not None:
                self._read.move_to_end(key)
                return found
        name = descriptor.file()
        if name is None:
            positions = dv.decode(descriptor.inline())
        else:
            where = name if descriptor.storage_type == "p" else join(table, name)
            data = self.lake.read(where)
            if data is None:
                raise dv.DeletionVectorError(f"{where}: the deletion vector file is missing")
            positions = dv.decode(dv.from_file(data, descriptor.offset or 0, descriptor.size, where))
        if len(positions) != descriptor.cardinality:
            raise dv.DeletionVectorError(f"{table}: a deletion vector of {len(positions)} rows where its descriptor "
                                         f"says {descriptor.cardinality}")
        with self._lock:
            self._read[key] = positions
            self.size += positions.nbytes
            while self.size > self.budget and len(self._read) > 1:
                self.size -= self._read.popitem(last=False)[1].nbytes
        return positions

    def live(self, rows: pa.Table, table: str, vector: dict[str, Any] | None) -> pa.Table:
        """A data file's ``rows`` (all of them, in file order) without those its ``vector`` deletes."""
        deleted = self.deleted(table, vector)
        return rows.filter(dv.keep_mask(len(rows), deleted)) if len(deleted) else rows

    def write(self, table: str, vectors: list[np.ndarray]) -> list[dict[str, Any]]:
        """New deletion vectors (each a data file's deleted row positions) in one file of ``table``'s
        directory; their descriptors, in order, for the commit's add actions. A crash before the commit leaves
        a file no version names (as it leaves data files): readers never open it."""
        encoded = [dv.encode(v) for v in vectors]
        data, offsets = dv.file_bytes(encoded)
        file_id = uuid.uuid4()
        descriptors = [dv.Descriptor.in_file(file_id, at, len(bits), len(np.unique(v)))
                       for at, bits, v in zip(offsets, encoded, vectors, strict=True)]
        name = descriptors[0].file() if descriptors else None
        if name is not None:
            self.lake.write(join(table, name), data)
        return [d.as_json() for d in descriptors]
