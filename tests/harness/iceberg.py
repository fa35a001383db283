"""The lake's Iceberg tables as pyiceberg reads them (a reader other than Spark): through the lake's catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness.land import store_env


def catalog(lake: Path, uri: str | None = None) -> Any:
    """The lake's catalog as pyiceberg opens it (``uri``: its database; default: the Hadoop catalog on the lake's
    path, or an earlier lake's SQLite catalog in it)."""
    from streaming_job.iceberg.catalog import IcebergCatalog

    return IcebergCatalog(str(lake), uri).open()


def pyiceberg_table(lake: Path, db: str, table: str, uri: str | None = None) -> Any:
    """A table of an Iceberg lake as pyiceberg reads it, as an Arrow table (None: no such table). A lake in
    Iceberg's Hadoop catalog (the default): pyiceberg's own reader of a table on a path (StaticTable follows
    ``metadata/version-hint.text`` itself), not binlake's catalog."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.table import StaticTable

    from streaming_job.iceberg.catalog import IcebergCatalog

    if IcebergCatalog(str(lake), uri).hadoop:
        path = lake / db / table
        hint = path / "metadata" / "version-hint.text"
        return StaticTable.from_metadata(str(path)).scan().to_arrow() if hint.exists() else None
    try:
        return catalog(lake, uri).load_table((db, table)).scan().to_arrow()
    except NoSuchTableError:
        return None


def snapshot_count(lake: Path, db: str, table: str) -> int:
    """The table's snapshots (each commit adds one or two)."""
    return len(catalog(lake).load_table((db, table)).snapshots())


_SPARK_READ = """
import json, sys
from streaming_job.iceberg.catalog import IcebergCatalog
from streaming_job.land.job import build_session
from streaming_job.lake.object_store import ObjectStoreSettings
lake, checkpoint, endpoint, db, tables = json.loads(sys.argv[1])
store = ObjectStoreSettings(endpoint, path_style=True)
spark = build_session("local[1]", 1, "binlake-iceberg-read", store=store,
                      iceberg=IcebergCatalog(lake, None, store, checkpoint).spark_conf())
print(json.dumps({t: [[str(v) for v in r] for r in spark.table(f"binlake.`{db}`.`{t}`").select(*c).collect()]
                  for t, c in tables.items()}))
"""


def spark_rows_in_store(store: Any, lake: str, checkpoint: Path, db: str,
                        tables: dict[str, list[str]]) -> dict[str, list]:
    """Tables of an Iceberg lake in a bucket of ``store`` (an ObjectStore), its SQLite catalog in the local
    ``checkpoint``, as a Spark session of its own reads them through Hadoop's s3a (Iceberg's HadoopFileIO):
    each table's rows of the columns ``tables`` names for it, every value as ``str()``."""
    import json
    import subprocess
    import sys

    env = store_env(store)
    done = subprocess.run([sys.executable, "-c", _SPARK_READ, json.dumps([lake, str(checkpoint), store.endpoint, db,
                                                                          tables])],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def local_format(lake: Path, app_id: str = "app-1", uri: str | None = None, maintenance: Any = None) -> Any:
    """An IcebergFormat on the lake's default catalog (Iceberg's Hadoop catalog on its path, or the SQLite one an
    earlier lake has), or on the catalog ``uri`` names, without Spark (no defaults of added columns); ``maintenance``:
    its IcebergMaintenance (the defaults without it)."""
    from streaming_job.iceberg.catalog import IcebergCatalog
    from streaming_job.iceberg.format import IcebergFormat

    return IcebergFormat(IcebergCatalog(str(lake), uri), app_id, maintenance=maintenance)
