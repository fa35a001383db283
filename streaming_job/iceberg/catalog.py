"""The Iceberg catalog of a lake (``land.format: iceberg``), named ``binlake`` (Spark's name of it too). A lake on
a local path, with ``land.iceberg_catalog`` unset: Iceberg's Hadoop catalog on the lake's path
(iceberg/hadoop.py: metadata files found by ``version-hint.text``; Spark's ``type=hadoop``), unless the lake
has the SQLite catalog an earlier binlake made (``<lake>/_iceberg_catalog.db``), which it keeps. Else
pyiceberg's SQL catalog, whose tables (``iceberg_tables``, ``iceberg_namespace_properties``) are the layout of
Iceberg's own JDBC catalog, read by Spark (and Trino, Flink...) as a JDBC catalog: in the database
``land.iceberg_catalog`` gives as a SQLAlchemy URL (``sqlite:///path``, ``mysql+pymysql://user:password@host:3306/db``,
``postgresql+psycopg://...``), or an Iceberg REST catalog at its ``http(s)://`` URL (pyiceberg's RestCatalog;
Spark's Iceberg REST catalog).

A lake on S3 or an S3-compatible store (``s3a://bucket/path``): pyiceberg's FileIO (pyarrow's S3 filesystem)
writes it with the store's settings and credentials (object_store.ObjectStoreSettings, land.s3_*, the same
as Delta's), Spark reads it through Hadoop's s3a (Iceberg's HadoopFileIO). A SQLite file needs a local
disk: the default catalog is then ``<checkpoint>/_iceberg_catalog.db``, where the checkpoint is a local
path; with the checkpoint on the store too, ``land.iceberg_catalog`` must name a database. (No Hadoop catalog
on a store: its commit needs an atomic create-if-absent of the metadata file.)

Table names (docs/LAND.md, "Iceberg"): the namespace ``<db>``, the change log ``<table>__changes`` and the
mirror ``<table>`` at ``<lake>/<db>/<table>[__changes]`` (the Delta layout's paths); the quarantine
``_binlake.quarantine`` at ``<lake>/_binlake/quarantine`` in the Hadoop catalog (a table's path is its name
there), ``<lake>/_quarantine`` in the others. Each snapshot binlake commits carries the job's app id
and the micro-batch's id in its summary (``binlake.app-id``, ``binlake.batch-id``): a replayed batch finds
them and skips the table."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ingester.redact import redact

from ..lake.object_store import ObjectStoreSettings, on_object_store
from ..lake.paths import join, scheme
from ..runtime.errors import LandError
from .auth import SPARK_REDACTION, RestAuth

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger("binlake.land")
CATALOG_NAME = "binlake"  # Spark's name of it too: Iceberg's JDBC catalog keys its rows by its own name
APP_ID, BATCH_ID = "binlake.app-id", "binlake.batch-id"  # in the summary of each snapshot binlake commits
_ANCESTORS = 1_000  # snapshots looked through for the job's last one (its own commits are the newest)
_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
_JDBC = {"sqlite": "sqlite", "mysql": "mariadb", "mariadb": "mariadb", "postgresql": "postgresql"}


@dataclass(frozen=True)
class IcebergCatalog:
    lake: str
    uri: str | None = None  # land.iceberg_catalog (SQLAlchemy or REST URL); None: the default (class docstring)
    store: ObjectStoreSettings | None = None  # a lake on S3: where the store is and its credentials (land.s3_*)
    checkpoint: str | None = None  # a lake on S3: the default SQLite catalog's directory, if a local path
    auth: RestAuth | None = None  # a REST catalog's token or OAuth2 credential (iceberg/auth.py)

    def __post_init__(self) -> None:
        if scheme(self.lake) and not on_object_store(self.lake):
            raise LandError(f"land.format iceberg: the lake {self.lake} must be a local path or on S3 (s3a://)")
        if scheme(self.lake) and self.uri is None and (not self.checkpoint or scheme(self.checkpoint)):
            raise LandError(f"land.format iceberg: the lake {self.lake} is on an object store and the checkpoint "
                            f"{self.checkpoint or '(none)'} too: the Iceberg catalog's SQLite file needs a local "
                            "path; give its database with land.iceberg_catalog (--iceberg-catalog, e.g. "
                            "mysql+pymysql://user:password@host:3306/db) or a local checkpoint")

    @property
    def warehouse(self) -> str:
        """The lake as the tables' locations name it: a file URI, or the s3a:// URI as given."""
        return self.lake.rstrip("/") if scheme(self.lake) else Path(self.lake).absolute().as_uri()

    @property
    def _sqlite(self) -> Path:
        """The default SQLite catalog: an earlier local lake's, else in the (local) checkpoint of a lake on S3."""
        return Path(self.checkpoint if scheme(self.lake) and self.checkpoint else self.lake).absolute() / \
            "_iceberg_catalog.db"

    @cached_property
    def hadoop(self) -> bool:
        """Iceberg's Hadoop catalog on the lake's path: the default of a local lake, but for a lake that has the
        SQLite catalog of an earlier binlake (kept: a lake's catalog never changes under it)."""
        return self.uri is None and not scheme(self.lake) and not self._sqlite.exists()

    @property
    def url(self) -> str:
        """The catalog's database (or REST) URL; the Hadoop catalog's: the warehouse, the lake's file URI."""
        return self.uri or (self.warehouse if self.hadoop else f"sqlite:///{self._sqlite}")

    def location(self, *parts: str) -> str:
        """A table's location: ``<lake>/<parts>`` as a URI."""
        if scheme(self.lake):
            return join(self.warehouse, *parts)
        return Path(self.lake).absolute().joinpath(*parts).as_uri()

    @property
    def rest(self) -> bool:
        """An Iceberg REST catalog (land.iceberg_catalog http(s)://...), not a database."""
        return scheme(self.url) in ("http", "https")

    def open(self) -> Catalog:
        from pyiceberg.catalog.rest import RestCatalog
        from pyiceberg.catalog.sql import SqlCatalog

        from .hadoop import HadoopCatalog
        from .transactions import StagedCommits

        class _SqlCatalog(StagedCommits, SqlCatalog):
            """pyiceberg's SQL catalog, its commits staged without copies (transactions.py)."""

        if self.hadoop:
            return HadoopCatalog(CATALOG_NAME, self.warehouse)
        if self.uri is None:
            self._sqlite.parent.mkdir(parents=True, exist_ok=True)
        if scheme(self.url) == "sqlite":
            write_ahead_log(self.url.split(":///", 1)[1])
        io = self.store.fileio_properties() if self.store is not None and scheme(self.lake) else {}
        try:
            if self.rest:  # the tables' locations are the job's (the lake's paths), not the server's warehouse
                return RestCatalog(CATALOG_NAME, uri=self.url, **io, **(self.auth.properties() if self.auth else {}))
            return _SqlCatalog(CATALOG_NAME, uri=self.url, warehouse=self.warehouse, **io)
        except Exception as exc:
            raise LandError(f"cannot open the Iceberg catalog {redact(self.url)}: {first_line(exc)}") from None

    def spark_conf(self) -> dict[str, str]:
        """Spark settings that read the catalog as Iceberg's Hadoop, JDBC or REST catalog ``binlake``
        (versions.iceberg_jars on the classpath): ``SELECT * FROM binlake.<db>.<table>``."""
        prefix = f"spark.sql.catalog.{CATALOG_NAME}"
        if self.hadoop:
            return {prefix: _SPARK_CATALOG, f"{prefix}.type": "hadoop", f"{prefix}.warehouse": self.warehouse}
        if self.rest:
            conf = {prefix: _SPARK_CATALOG, f"{prefix}.type": "rest", f"{prefix}.uri": self.url}
            if self.auth is not None:  # Spark's redaction of its settings covers the credential too
                conf |= {f"{prefix}.{k}": v for k, v in self.auth.properties().items()}
                conf["spark.redaction.regex"] = SPARK_REDACTION
            return conf
        url, properties = jdbc_url(self.url)
        conf = {prefix: _SPARK_CATALOG, f"{prefix}.type": "jdbc", f"{prefix}.uri": url,
                f"{prefix}.jdbc.schema-version": "V1", f"{prefix}.warehouse": self.warehouse}
        conf.update({f"{prefix}.jdbc.{k}": v for k, v in properties.items()})
        return conf


def write_ahead_log(path: str) -> None:
    """A SQLite catalog in write-ahead-log mode (a setting of the database file, kept once set): a reader's open
    transaction (Iceberg's JDBC catalog in a Spark session of the job's own process keeps one) then no longer
    blocks the job's commits, which in SQLite's default rollback-journal mode failed with `database is locked`."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


def jdbc_url(url: str) -> tuple[str, dict[str, str]]:
    """A SQLAlchemy URL as a JDBC URL and its connection properties (user, password)."""
    parts = urlsplit(url)
    kind = _JDBC.get(parts.scheme.split("+")[0])
    if kind is None:
        raise LandError(f"land.iceberg_catalog {redact(url)}: use a sqlite:///, mysql+pymysql:// or "
                        "postgresql:// URL, or a REST catalog's http(s)://")
    if kind == "sqlite":
        return f"jdbc:sqlite:{url.split(':///', 1)[1]}", {}
    host = parts.hostname or "localhost"
    where = f"{host}:{parts.port}" if parts.port else host
    properties = {k: unquote(v) for k, v in (("user", parts.username), ("password", parts.password)) if v}
    return f"jdbc:{kind}://{where}{parts.path}", properties


def landed_batch(table: Table, app_id: str) -> int | None:
    """The last micro-batch of ``app_id`` the table has: the batch id of the newest snapshot it committed."""
    snapshot = table.current_snapshot()
    for _ in range(_ANCESTORS):
        if snapshot is None:
            return None
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if summary.get(APP_ID) == app_id:
            return int(summary[BATCH_ID])
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    return None


def batch_properties(app_id: str, batch_id: int) -> dict[str, str]:
    """A snapshot's summary properties that record the batch."""
    return {APP_ID: app_id, BATCH_ID: str(batch_id)}


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def properties_of(table: Any) -> dict[str, str]:
    return dict(table.metadata.properties)
