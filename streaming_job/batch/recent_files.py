"""What the driver keeps of a mirror's files between batches, by path, within a byte budget (the least recently
used go first): a Delta mirror's small files' rows (delta/mirror_driver.py), and the files' keys
(batch/key_index.py) of Delta's deletion vectors and Iceberg's position deletes (iceberg/position_deletes.py).
A data file never changes once written, so what is kept is the file's for as long as it exists."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar


class _Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


_T = TypeVar("_T", bound=_Sized)


class RecentFiles(Generic[_T]):
    """Files' rows or keys (anything with ``nbytes``) by path, within ``budget`` bytes; shared by tables landing
    side by side."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self._rows: OrderedDict[str, _T] = OrderedDict()
        self._lock = threading.Lock()  # tables land side by side

    def get(self, path: str) -> _T | None:
        with self._lock:
            rows = self._rows.get(path)
            if rows is not None:
                self._rows.move_to_end(path)
            return rows

    def put(self, path: str, rows: _T) -> None:
        with self._lock:
            self._rows[path] = rows
            self.size += rows.nbytes
            while self.size > self.budget:
                self.size -= self._rows.popitem(last=False)[1].nbytes

    def drop(self, paths: list[str]) -> None:
        with self._lock:
            for path in paths:
                rows = self._rows.pop(path, None)
                if rows is not None:
                    self.size -= rows.nbytes
