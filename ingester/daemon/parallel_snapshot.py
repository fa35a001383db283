"""A large table's snapshot read on several source connections at once (``snapshot_parallelism``): its key range
cut into parts, each read in chunks (chunk_reader.py) by whichever of the reading threads is free, every thread on
a connection and consistent snapshot of its own.

The connections' snapshots are opened together with the snapshot's own (snapshot.py ``_begin``): at its point
where the server allows, else newer, and a resumed snapshot's are newer too; the stream replays the binlog from
the point over their rows, which converges on the source's rows. The parts and how far each has been published
are the checkpoint's progress (``ranges``): a restart reads each part on from its last published key.

Only tables keyed by one integer column are cut (the key's MIN and MAX, cut evenly; ``_PARTS_PER_READER`` parts
a thread so that a dense part does not leave the others idle); others are read on one connection.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

import zstandard

from ..codec.constants import ColumnType as T
from ..config import Config
from .chunk_reader import table_chunks
from .table_reader import TableReader, _quote, load_key

_INTEGERS = frozenset((T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG))
_PARTS_PER_READER = 4


class RangeChunk(NamedTuple):
    """A chunk of one part (``part``: its index in the ranges): its rows as zstd frames of the JSON of records'
    rows, how many, and the key of its last row (where the part goes on)."""

    part: int
    frames: list[bytes]
    rows: int
    key: list[Any]


def key_ranges(conn: Any, reader: TableReader, readers: int, least_rows: int) -> list[dict[str, Any]] | None:
    """The parts of the table's key for ``readers`` threads, as the checkpoint keeps them (``after``: the key the
    part starts after, None from the table's start; ``upto``: its last key, None to the table's end; ``rows``
    published): None unless the table has one integer key column and at least ``least_rows`` rows by its
    statistics (smaller tables are read at once)."""
    if readers < 2 or len(reader.key) != 1 or reader.table_map.columns[reader.key[0]].type not in _INTEGERS:
        return None
    column = _quote(reader.table_map.columns[reader.key[0]].name)
    table = f"{_quote(reader.table_map.database)}.{_quote(reader.table_map.table)}"
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (reader.table_map.database, reader.table_map.table))
        found = cur.fetchone()
        if found is None or int(found[0] or 0) < least_rows:
            return None
        cur.execute(f"SELECT MIN({column}), MAX({column}) FROM {table}")
        low, high = cur.fetchone()
    if low is None:
        return None
    low, high = int(low), int(high)
    parts = min(readers * _PARTS_PER_READER, high - low + 1)
    if parts < 2:
        return None
    bounds = [None, *(low + (high - low) * k // parts for k in range(1, parts)), None]
    return [{"after": None if bounds[k] is None else [bounds[k]],
             "upto": None if bounds[k + 1] is None else [bounds[k + 1]], "rows": 0} for k in range(parts)]


class RangeReader:
    """Iterates over the chunks of ``ranges`` (key_ranges' parts, each from its ``after``) as threads read them, in
    no particular order, one thread on each of ``conns`` (connections in their snapshot transactions, the
    snapshot's own first); ``close`` stops and joins the threads (always call it: they use the connections)."""

    def __init__(self, cfg: Config, reader: TableReader, ranges: list[dict[str, Any]], conns: list[Any]) -> None:
        self.cfg, self.reader = cfg, reader
        readers = min(len(conns), len(ranges))
        self._todo = [(k, load_key(r["after"]), load_key(r["upto"])) for k, r in enumerate(ranges)]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._queue: queue.Queue[RangeChunk | BaseException | None] = queue.Queue(maxsize=2 * readers)
        self._threads = [threading.Thread(target=self._read, args=(conns[n],), name=f"snapshot {reader.name} {n}",
                                          daemon=True) for n in range(readers)]
        for thread in self._threads:
            thread.start()

    def __iter__(self) -> Iterator[RangeChunk]:
        running = len(self._threads)
        while running:
            item = self._queue.get()
            if item is None:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            while thread.is_alive():
                try:  # unblock its put
                    self._queue.get(timeout=0.05)
                except queue.Empty:
                    pass
            thread.join()

    def _next(self) -> tuple[int, list[Any] | None, list[Any] | None] | None:
        with self._lock:
            return self._todo.pop(0) if self._todo and not self._stop.is_set() else None

    def _read(self, conn: Any) -> None:
        compressor = zstandard.ZstdCompressor(level=1)  # here: zstd leaves the GIL, the threads compress at once
        try:
            while (part := self._next()) is not None:
                index, after, upto = part
                chunks = table_chunks(conn, self.reader, after, self.cfg.snapshot_chunk_rows,
                                      self.cfg.kafka.max_record_bytes, upto)
                try:
                    for chunk in chunks:
                        assert chunk.key is not None
                        frames = [compressor.compress(group) for group in chunk.rows.groups]
                        self._queue.put(RangeChunk(index, frames, chunk.rows.rows, chunk.key))
                        if self._stop.is_set():
                            return
                finally:
                    chunks.close()
            self._queue.put(None)
        except BaseException as exc:  # raised again where the chunks are taken
            self._queue.put(exc)
