"""Notices of string columns whose character set nobody gave (no charset metadata in the binlog, no schema
history): their values keep their bytes, and the user is told once per table and process why they are not text."""

from __future__ import annotations

import logging

from .charsets import keeps_bytes
from .table_map import STRING_TYPES, TableMap

log = logging.getLogger("binlake.codec")
_noticed: set[tuple[str, str]] = set()
# Where notices go instead of the log while not None (a worker process hands them to its parent).
notices: list[tuple[str, str, list[str]]] | None = None


def notice_unknown_charsets(tm: TableMap) -> None:
    """Say once per table (per process) on the log (stderr) that string columns whose charset the binlog
    does not give, and no schema told, keep their bytes: the user should know why they are not text."""
    if (tm.database, tm.table) in _noticed:
        return
    unknown = [c.name for c in tm.columns
               if c.type in STRING_TYPES and c.collation != 63 and keeps_bytes(c.collation, tm.is_mariadb)]
    if unknown:
        say_unknown_charsets(tm.database, tm.table, unknown)


def say_unknown_charsets(database: str, table: str, columns: list[str]) -> None:
    if notices is not None:
        notices.append((database, table, columns))
        return
    if (database, table) not in _noticed:
        _noticed.add((database, table))
        log.warning("`%s`.`%s`: no character set known for %s (the binlog has no charset metadata, "
                    "binlog_row_metadata is not FULL, and no schema history applies): their values are kept as "
                    "bytes (base64 in JSONL)", database, table, ", ".join(columns))
