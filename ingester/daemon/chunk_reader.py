"""A table's rows for the snapshot: chunks by the primary key (or one pass without a usable key), each about
``_TARGET_CHUNK_BYTES`` at most (bounded memory), encoded as the JSON of records' rows: straight from the
packets by the native reader where every column's value is its text, so that no Python object stands between
the server's rows and Kafka's records.

(Reading the next chunk on a thread while this one is compressed and published was tried: no faster on two
CPUs shared with the server and the broker, 2,000,000 rows at 413,000-450,000 rows/s either way.)
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from .source_conn import unbuffered_cursor
from .table_reader import TableReader

if TYPE_CHECKING:
    from ..sources.resultset import TextResult

_TARGET_CHUNK_BYTES = 8 << 20  # chunks shrink below chunk_rows when rows are large (bounded memory)
_FIRST_LIMIT = 256  # rows of the first chunk; doubled while chunks stay small (rows may be large)


class Rows(NamedTuple):
    """A chunk of a table's rows, encoded: ``groups`` are the JSON of its records' rows, ``size`` their bytes;
    ``last_raw``/``last_wire`` its last row as read and converted."""

    groups: list[bytes]
    rows: int
    size: int
    last_raw: list[Any] | None
    last_wire: list[Any] | None


class Chunk(NamedTuple):
    """One chunk to publish: its rows, whether it is the table's last, and (keyed reads) its last row's key,
    where the next chunk starts."""

    rows: Rows
    last: bool
    key: list[Any] | None


def split_rows(wire: list[list[Any]], encoded: bytes, max_bytes: int) -> list[bytes]:
    """Wire rows (``encoded``: their JSON) as JSON arrays of rows of at most about ``max_bytes`` each."""
    parts = 1 + len(encoded) // max_bytes
    return [encoded] if parts == 1 else [
        orjson.dumps(wire[k * len(wire) // parts : (k + 1) * len(wire) // parts]) for k in range(parts)]


def encode_groups(wire: list[list[Any]], max_bytes: int) -> tuple[list[bytes], int]:
    """split_rows' arrays of wire rows, empty ones dropped, and the size of the rows' JSON in one array."""
    encoded = orjson.dumps(wire)
    return [g for g in split_rows(wire, encoded, max_bytes) if g != b"[]"], len(encoded)


def fetch_rows(reader: TableReader, result: TextResult, limit: int, max_bytes: int) -> Rows:
    """Up to ``limit`` rows of the result, encoded: by the native reader straight from the packets when every
    column's value is its text (integers and text), else converted and encoded here."""
    if reader.json_rows:
        got = result.fetch_json(limit, max_bytes)
        return Rows(got.groups, got.rows, got.size, got.last, got.last)
    raw = result.fetch(limit)
    wire = reader.convert(raw)
    groups, size = encode_groups(wire, max_bytes)
    return Rows(groups, len(wire), size, raw[-1] if raw else None, wire[-1] if wire else None)


def table_chunks(conn: Any, reader: TableReader, after: list[Any] | None, chunk_rows: int, max_bytes: int,
                 upto: list[Any] | None = None) -> Generator[Chunk, None, None]:
    """The rest of a table's chunks (after the key ``after``; None: from its start), up to the key ``upto`` (None:
    to its end). Closing the iterator early inside a one-pass read leaves the connection's result unread: close
    the connection then."""
    limit = min(chunk_rows, _FIRST_LIMIT)
    held: Rows | None = None  # a one-pass read: the chunk before, until the next says whether it is last
    cur = conn.cursor(unbuffered_cursor())
    result: TextResult | None = None
    try:
        if not reader.key:
            cur.execute(*reader.query(0, None))
            result = reader.result(cur)
        while True:
            if reader.key:  # a row more than the chunk: whether the chunk is the table's last
                cur.execute(*reader.query(limit + 1, after, upto))
                result = reader.result(cur)
                rows = fetch_rows(reader, result, limit, max_bytes)
                last = not result.fetch()
            else:
                assert result is not None
                rows = fetch_rows(reader, result, limit, max_bytes)
                if held is not None:
                    yield Chunk(held, not rows.rows, None)
                    held = None
            if not rows.rows:
                return
            if reader.key:
                assert rows.last_raw is not None and rows.last_wire is not None
                after = reader.key_values(rows.last_raw, rows.last_wire)
                yield Chunk(rows, last, after)
                if last:
                    return
            else:
                held = rows
            if rows.size > _TARGET_CHUNK_BYTES and limit > 1:
                limit = max(1, limit * _TARGET_CHUNK_BYTES // rows.size)
            elif rows.size < _TARGET_CHUNK_BYTES // 4:
                limit = min(chunk_rows, limit * 2)
    finally:
        if result is None or result.done:
            cur.close()  # (pymysql would read the rest of an unfinished result: it cannot, the reader took its bytes)
