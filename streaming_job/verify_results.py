"""The results of ``binlake verify`` in ``<lake>/_verify``, read without Spark (its log by delta_log, its
files by pyarrow): for ``binlake verify --wait`` and ``binlake status``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from .delta_log import TableLog
from .lake_files import LakeFiles
from .lake_paths import join

VERIFY_TABLE = "_verify"


def read_results(files: LakeFiles, lake: str, run: str | None = None) -> list[dict[str, Any]]:
    """Every result row (of ``run`` only, if given), oldest first by check time; [] without a _verify table."""
    path = join(lake, VERIFY_TABLE)
    log = TableLog.read(path, files)
    if log.version < 0:
        return []
    tables = [files.read_parquet(join(path, name)) for name in log.files]
    if not tables:
        return []
    rows = pa.concat_tables(tables, promote_options="permissive").to_pylist()
    for r in rows:  # Spark writes INT96 by default: naive, in UTC
        if r["checked_ts"].tzinfo is None:
            r["checked_ts"] = r["checked_ts"].replace(tzinfo=dt.UTC)
    if run is not None:
        rows = [r for r in rows if r["run"] == run]
    return sorted(rows, key=lambda r: (r["checked_ts"], r["chunk"]))
