"""Where a server's binlog is now: its file, position and GTID state, as one connection's queries read them."""

from __future__ import annotations

from typing import Any

from .errors import ReplicationError


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value or "")


def binlog_status(cur: Any) -> tuple[str, int, str]:
    """(file, position, MySQL's executed GTID set or "") of SHOW BINARY LOG STATUS (MySQL 8.4; SHOW MASTER
    STATUS before it and on MariaDB). Raises ReplicationError where binary logging is off."""
    try:
        cur.execute("SHOW BINARY LOG STATUS")
    except Exception:
        cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    if row is None:
        raise ReplicationError("the server has binary logging off")
    return _text(row[0]), int(row[1]), _text(row[4]).replace("\n", "") if len(row) > 4 else ""


def current_position(cur: Any, mariadb: bool) -> tuple[str, int, str]:
    """(file, position, GTID state there): MariaDB's GTID position of that point, MySQL's executed set."""
    file, position, gtids = binlog_status(cur)
    if mariadb:
        cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, position))
        gtids = _text(cur.fetchone()[0])
    return file, position, gtids


def binlog_sizes(cur: Any) -> list[tuple[str, int]]:
    """The server's binlog files and their sizes, oldest first (SHOW BINARY LOGS)."""
    cur.execute("SHOW BINARY LOGS")
    return [(_text(row[0]), int(row[1])) for row in cur.fetchall()]


def bytes_after(sizes: list[tuple[str, int]], file: str, position: int) -> int | None:
    """How many binlog bytes follow ``file:position`` in ``sizes`` (None where ``file`` is not there: purged,
    or another server's)."""
    names = [name for name, _ in sizes]
    if file not in names:
        return None
    at = names.index(file)
    return max(0, sizes[at][1] - position) + sum(size for _, size in sizes[at + 1:])
