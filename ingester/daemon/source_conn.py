"""Plain SQL connections to the source, for the daemon's parts that query it (snapshot, re-snapshot,
schema capture, checks): one module below the runner and the snapshots, which all use it."""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..sources.replication import SourceURL


def binlog_purged(cfg: Config, file: str) -> bool:
    """Whether the server no longer has the binlog file a checkpoint names (when-needed snapshots)."""
    conn = connect(cfg, raw=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            return file not in {row[0] for row in cur.fetchall()}
    finally:
        conn.close()


def connect(cfg: Config, raw: bool = True) -> Any:
    """A pymysql connection to the source (utf8mb4). ``raw``: for reading rows as the snapshot does."""
    import pymysql

    options: dict[str, Any] = {"charset": "utf8mb4"}
    if raw:  # values as the server sends them: converted here exactly like the binlog decoder's
        options["conv"] = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}
    conn = SourceURL.parse(cfg.source_url()).connect(**options)
    if raw:
        with conn.cursor() as cur:
            cur.execute("SET SESSION character_set_results = binary, time_zone = '+00:00',"
                        " net_write_timeout = 600, net_read_timeout = 600")
    return conn


def unbuffered_cursor() -> Any:
    """pymysql's streaming cursor class (rows read as they come, not all at once)."""
    import pymysql

    return pymysql.cursors.SSCursor
