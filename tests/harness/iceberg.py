"""The lake's Iceberg tables as pyiceberg reads them (a reader other than Spark): through the lake's catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def catalog(lake: Path, uri: str | None = None) -> Any:
    """The lake's catalog as pyiceberg opens it (``uri``: its database, default SQLite in the lake)."""
    from streaming_job.iceberg_catalog import IcebergCatalog

    return IcebergCatalog(str(lake), uri).open()


def pyiceberg_table(lake: Path, db: str, table: str, uri: str | None = None) -> Any:
    """A table of an Iceberg lake as pyiceberg reads it, as an Arrow table (None: no such table)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog(lake, uri).load_table((db, table)).scan().to_arrow()
    except NoSuchTableError:
        return None


def snapshot_count(lake: Path, db: str, table: str) -> int:
    """The table's snapshots (each commit adds one or two)."""
    return len(catalog(lake).load_table((db, table)).snapshots())


def local_format(lake: Path, app_id: str = "app-1") -> Any:
    """An IcebergFormat on a SQLite catalog in ``lake``, without Spark (no defaults of added columns)."""
    from streaming_job.iceberg_catalog import IcebergCatalog
    from streaming_job.iceberg_format import IcebergFormat
    from streaming_job.keys import MirrorKeys

    return IcebergFormat(IcebergCatalog(str(lake)), app_id, MirrorKeys({}, None, lambda d, t: "", lambda p: None))
