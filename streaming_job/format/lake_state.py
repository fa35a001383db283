"""What the lake says of its tables without Spark, for ``binlake status``: which ended (dropped, renamed away:
table_statements.py), read from the mirror's table properties, or from the current change log's for a table
without a mirror."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..lake.delta_log import TableLog, UnreadableLog
from ..lake.files import LakeFiles
from ..lake.generations import change_log_name
from ..lake.paths import join
from ..statements.statements import ended_of

Name = tuple[str, str]


def ended_tables(names: list[Name], properties: Callable[[str, str], dict[str, str] | None]) -> dict[Name, str]:
    """Per ended table of ``names``, what ended it ("dropped at 1:420:0", "renamed to db.t2 at ..."), from
    ``properties(db, lake table name)`` (None: no such table)."""
    out = {}
    for db, table in names:
        found = properties(db, table)
        if found is None:  # no mirror (a table without a key): its current change log's
            number = 1
            while (more := properties(db, change_log_name(table, number))) is not None:
                found, number = more, number + 1
        ended = ended_of(found)
        if ended is not None:
            what = f"renamed to {ended['to']}" if ended.get("to") else "dropped" if ended["op"] == "drop" else \
                f"ended by {ended['op']}"
            out[(db, table)] = f"{what} at {ended['position']}"
    return out


def delta_properties(files: LakeFiles, lake: str) -> Callable[[str, str], dict[str, str] | None]:
    def read(db: str, name: str) -> dict[str, str] | None:
        try:
            table = TableLog.read(join(lake, db, name), files)
        except UnreadableLog:
            return None
        return table.configuration if table.version >= 0 else None

    return read


def iceberg_properties(catalog: Any) -> Callable[[str, str], dict[str, str] | None]:
    from pyiceberg.exceptions import NoSuchTableError

    def read(db: str, name: str) -> dict[str, str] | None:
        try:
            return dict(catalog.load_table((db, name)).metadata.properties)
        except NoSuchTableError:
            return None

    return read
