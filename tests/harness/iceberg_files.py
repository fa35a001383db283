"""An Iceberg lake's files as the tests see them, without binlake's code or pyiceberg's metadata model: the
catalog's current metadata file read from its SQLite database, metadata files as JSON, manifest lists and
manifests with fastavro. ``named`` gives every file the live metadata names; files on disk beyond them are
orphans."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import fastavro

KINDS = (".parquet", ".avro", ".metadata.json")


def metadata_locations(where: Path) -> dict[tuple[str, str], str]:
    """(namespace, table) -> its current metadata file: from a SQLite catalog's file (Iceberg's JDBC layout), or
    for a lake directory without one, Iceberg's Hadoop catalog on its path: each table's highest
    ``metadata/v<N>.metadata.json`` (Java's HadoopTableOperations: a version exists once committed)."""
    if where.is_dir() and (where / "_iceberg_catalog.db").exists():
        where = where / "_iceberg_catalog.db"
    if where.is_file():
        with sqlite3.connect(where) as conn:
            rows = conn.execute("SELECT table_namespace, table_name, metadata_location FROM iceberg_tables").fetchall()
        return {(ns, name): location for ns, name, location in rows}
    out = {}
    for metadata in where.glob("*/*/metadata"):
        versions = [(int(m.group(1)), p) for p in metadata.iterdir()
                    if (m := re.fullmatch(r"v(\d+)\.metadata\.json", p.name))]
        if versions:
            out[(metadata.parent.parent.name, metadata.parent.name)] = max(versions)[1].as_uri()
    return out


def local_path(uri: str, bucket_root: Path | None = None) -> Path:
    """A file:// URI as a path, or an s3a:// one as the path of its object under ``bucket_root`` (an S3Proxy
    store's data directory: <root>/<bucket>/<key>)."""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    assert bucket_root is not None, uri
    return bucket_root / parts.netloc / parts.path.lstrip("/")


def named(current: str, path: Callable[[str], Path]) -> set[Path]:
    """Every file the live metadata of a table names: the current metadata file (``current``), those of its
    metadata log, and each of their snapshots' manifest lists, the manifests those list and every data file
    those list (whatever the entry's status)."""
    out: set[Path] = set()
    metadata = json.loads(path(current).read_text())
    files = [current, *(e["metadata-file"] for e in metadata.get("metadata-log", []))]
    for uri in files:
        p = path(uri)
        if not p.exists():
            continue
        out.add(p)
        for snapshot in json.loads(p.read_text()).get("snapshots", []):
            listing = path(snapshot["manifest-list"])
            if not listing.exists():
                continue
            out.add(listing)
            for manifest in _records(listing):
                m = path(manifest["manifest_path"])
                if m.exists():
                    out.add(m)
                    out.update(path(e["data_file"]["file_path"]) for e in _records(m))
    return out


def on_disk(location: Path) -> set[Path]:
    """The table's files of the kinds Iceberg writes under its data/ and metadata/."""
    return {p for d in ("data", "metadata") for p in (location / d).rglob("*") if p.name.endswith(KINDS)}


def _records(avro: Path) -> list[dict]:
    with avro.open("rb") as fh:
        return list(fastavro.reader(fh))
