"""What the driver keeps of a mirror's files between batches, by path, within a byte budget (the least recently
used go first): a Delta mirror's small files' rows (delta/mirror_driver.py), and the files' keys
(batch/key_index.py) of Delta's deletion vectors and Iceberg's position deletes (iceberg/position_deletes.py).
A data file never changes once written, so what is kept is the file's for as long as it exists.

Where what the batches touch does not fit the budget, a file dropped for want of room is read again by a later
batch: with the name of the budget's setting, that is said in a warning (at most every ``WARN_SECONDS``), since the
batches then slow as the tables grow."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar


class _Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


_T = TypeVar("_T", bound=_Sized)
log = logging.getLogger("binlake.land")
WARN_SECONDS = 600.0
_DROPPED = 1_000_000  # paths of dropped files remembered, at most (then forgotten at once)


class RecentFiles(Generic[_T]):
    """Files' rows or keys (anything with ``nbytes``) by path, within ``budget`` bytes; shared by tables landing
    side by side. ``setting``: the budget's setting (e.g. ``land.key_memory``), named in the warning that files
    dropped for want of room are read again (none without it)."""

    def __init__(self, budget: int, setting: str | None = None) -> None:
        self.budget = budget
        self.setting = setting
        self.size = 0
        self.again = 0  # files put again after they were dropped for want of room
        self._rows: OrderedDict[str, _T] = OrderedDict()
        self._dropped: set[str] = set()
        self._warned = 0  # ``again`` at the last warning
        self._warned_at = -WARN_SECONDS
        self._lock = threading.Lock()  # tables land side by side

    def get(self, path: str) -> _T | None:
        with self._lock:
            rows = self._rows.get(path)
            if rows is not None:
                self._rows.move_to_end(path)
            return rows

    def put(self, path: str, rows: _T) -> None:
        with self._lock:
            if path in self._dropped:
                self._dropped.discard(path)
                self.again += 1
            old = self._rows.pop(path, None)
            if old is not None:
                self.size -= old.nbytes
            self._rows[path] = rows
            self.size += rows.nbytes
            while self.size > self.budget:
                gone, dropped = self._rows.popitem(last=False)
                self.size -= dropped.nbytes
                if self.setting is not None:
                    self._dropped.add(gone)
            if len(self._dropped) > _DROPPED:
                self._dropped.clear()
            now = time.monotonic()
            due = self.setting is not None and self.again > self._warned and now - self._warned_at >= WARN_SECONDS
            if due:
                again, self._warned, self._warned_at = self.again - self._warned, self.again, now
        if due:
            log.warning("what the batches touch of the lake's files takes more than %s (%d MiB): %d files dropped for "
                        "want of room were read again since the last warning, and batches slow as the tables grow; "
                        "raise %s where the driver has the memory", self.setting, self.budget >> 20, again,
                        self.setting)

    def drop(self, paths: list[str]) -> None:
        with self._lock:
            for path in paths:
                rows = self._rows.pop(path, None)
                if rows is not None:
                    self.size -= rows.nbytes
                self._dropped.discard(path)
