"""Iceberg's Hadoop catalog on a local path, written by pyiceberg (a pyiceberg Catalog of this project's: pyiceberg
has none). The layout is that of Iceberg Java's HadoopCatalog and HadoopTableOperations, so Spark reads it as a
catalog of ``type=hadoop`` with the same warehouse (docs/LAND.md, "Iceberg"):

- a namespace is a directory ``<warehouse>/<level>/...``; a table is ``<warehouse>/<namespace>/<table>`` (its
  location is fixed by its name), a directory holding ``metadata/`` with at least one ``*.metadata.json``;
- the table's versions are ``metadata/v<N>.metadata.json`` (``v<N>.gz.metadata.json`` when the table property
  ``write.metadata.compression-codec`` is gzip; ``v<N>.metadata.json.gz``, Java's older name, is read too), N
  from 1; ``metadata/version-hint.text`` holds the newest N, as text;
- a commit writes ``v<N+1>`` only if it does not exist yet: the metadata goes to a temporary file (fsynced),
  which is hard-linked to its final name (``os.link`` fails when the name exists: of two writers of the same
  version one wins, the other gets pyiceberg's CommitFailedException), then the hint is replaced (a temporary
  file renamed over it). A crash between the two leaves the hint one version behind: loading, like Java's,
  reads the hint (or, without one, lists the metadata directory for the highest version) and then looks for
  newer versions until one is missing.

Local file systems only: the commit needs an atomic create-if-absent, which an object store gives only with
conditional writes (iceberg/catalog.py keeps SQL catalogs for lakes on S3). Not supported, as in Java's
HadoopCatalog: table locations other than the name's, ``write.metadata.path``, namespace properties, renames,
views. Dropping a table deletes its directory (Java's HadoopCatalog does the same: its metadata is its entry).
"""

from __future__ import annotations

import errno
import gzip
import logging
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AssertCreate
from pyiceberg.typedef import EMPTY_DICT
from pyiceberg.utils.config import Config

from .transactions import StagedCommits

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import PropertiesUpdateSummary
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.sorting import SortOrder
    from pyiceberg.table.update import TableRequirement, TableUpdate
    from pyiceberg.typedef import Identifier, Properties
    from pyiceberg.view import View

log = logging.getLogger("binlake.land")
HINT = "version-hint.text"
COMPRESSION = "write.metadata.compression-codec"  # none (default) or gzip, as Java reads it
_NAMES = (".metadata.json", ".gz.metadata.json", ".metadata.json.gz")  # a version's file names, Java's order
_VERSION = re.compile(r"v(\d+)\..*metadata\.json(\.gz)?")


def local_path(where: str) -> Path:
    """A local path given as itself or as a file URI."""
    parts = urlsplit(where)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if parts.scheme and len(parts.scheme) > 1:  # not a Windows drive letter
        raise ValueError(f"the Hadoop catalog's warehouse {where} must be a local path")
    return Path(where).absolute()


class HadoopCatalog(StagedCommits, MetastoreCatalog):
    """Iceberg's Hadoop catalog on the local directory ``warehouse`` (a path or a file URI)."""

    def __init__(self, name: str, warehouse: str, **properties: str) -> None:
        self.root = local_path(warehouse)
        super().__init__(name, warehouse=self.root.as_uri(), **properties)

    # paths

    def _dir(self, *parts: str) -> Path:
        for part in parts:
            if not part or part in (".", "..") or "/" in part or "\\" in part or "\0" in part:
                raise ValueError(f"the Hadoop catalog cannot name a namespace or table {part!r}")
        return self.root.joinpath(*parts)

    def _table_dir(self, identifier: str | Identifier) -> tuple[Identifier, Path]:
        found = self.identifier_to_tuple(identifier)
        if len(found) < 2:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(found)} (no namespace)")
        return found, self._dir(*found)

    def location_of(self, identifier: str | Identifier) -> str:
        """The table's location: its directory in the warehouse, as a file URI."""
        return self._table_dir(identifier)[1].as_uri()

    @staticmethod
    def _is_table(path: Path) -> bool:
        try:
            return any(n.endswith((".metadata.json", ".metadata.json.gz")) for n in os.listdir(path / "metadata"))
        except (FileNotFoundError, NotADirectoryError):
            return False

    # versions

    @staticmethod
    def _file(metadata: Path, version: int) -> Path | None:
        for suffix in _NAMES:
            path = metadata / f"v{version}{suffix}"
            if path.is_file():
                return path
        return None

    @staticmethod
    def _listed(metadata: Path) -> int:
        """The highest version in the metadata directory (0: none)."""
        found = [_VERSION.fullmatch(n) for n in os.listdir(metadata)] if metadata.is_dir() else []
        return max((int(m.group(1)) for m in found if m), default=0)

    def _current(self, table: Path) -> tuple[int, Path] | None:
        """The table's newest version and its file: from the hint (else the listing), then newer ones while
        they exist (a commit that crashed before its hint, or another writer's)."""
        metadata = table / "metadata"
        try:
            version = int((metadata / HINT).read_text().strip())
        except (OSError, ValueError):
            version = self._listed(metadata)
        found = self._file(metadata, version) if version > 0 else None
        if found is None:  # no hint, a garbled one, or one naming a deleted version
            version = self._listed(metadata)
            found = self._file(metadata, version) if version > 0 else None
            if found is None:
                return None
        while (newer := self._file(metadata, version + 1)) is not None:
            version, found = version + 1, newer
        return version, found

    def _read(self, identifier: Identifier, path: Path) -> Table:
        data = path.read_bytes()
        if path.name.endswith((".gz.metadata.json", ".metadata.json.gz")):
            data = gzip.decompress(data)
        metadata = TableMetadataUtil.parse_raw(data.decode())
        location = path.as_uri()
        return Table(identifier=identifier, metadata=metadata, metadata_location=location,
                     io=self._load_file_io(metadata.properties, location), catalog=self)

    # tables

    def load_table(self, identifier: str | Identifier) -> Table:
        found, table = self._table_dir(identifier)
        current = self._current(table)
        if current is None:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(found)}")
        return self._read(found, current[1])

    def create_table(self, identifier: str | Identifier, schema: Schema | pa.Schema, location: str | None = None,
                     partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
                     sort_order: SortOrder = UNSORTED_SORT_ORDER, properties: Properties = EMPTY_DICT) -> Table:
        self.create_table_transaction(identifier, schema, location, partition_spec, sort_order,
                                      properties).commit_transaction()
        return self.load_table(identifier)

    def _resolve_table_location(self, location: str | None, database_name: str, table_name: str) -> str:
        fixed = self._dir(*database_name.split("."), table_name).as_uri()
        if location and local_path(location.rstrip("/")) != local_path(fixed):
            raise ValueError(f"a table of the Hadoop catalog lives at {fixed} (its name's path), not {location}")
        return fixed

    def commit_table(self, table: Table, requirements: tuple[TableRequirement, ...],
                     updates: tuple[TableUpdate, ...]) -> CommitTableResponse:
        identifier, path = self._table_dir(table.name())
        metadata_dir = path / "metadata"
        if not self.namespace_exists(identifier[:-1]):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(identifier[:-1])}")
        found = self._current(path)
        current: Table | None = None
        if found is not None:  # the caller's metadata when it is the newest, else the newest read
            current = table if found[1].as_uri() == table.metadata_location else self._read(identifier, found[1])
        if current is not None and any(isinstance(r, AssertCreate) for r in requirements):
            raise TableAlreadyExistsError(f"Table {'.'.join(identifier)} already exists")
        staged = self._update_and_stage_table(current, identifier, requirements, updates)
        if current is not None and staged.metadata == current.metadata:
            return _response(current.metadata, current.metadata_location)
        if current is not None and staged.metadata.location != current.metadata.location:
            raise ValueError(f"a table of the Hadoop catalog cannot move: {'.'.join(identifier)}")
        if "write.metadata.path" in staged.metadata.properties:
            raise ValueError(f"a table of the Hadoop catalog keeps its metadata in its own directory "
                             f"(write.metadata.path): {'.'.join(identifier)}")
        version = found[0] + 1 if found is not None else 1
        suffix = ".gz.metadata.json" if staged.metadata.properties.get(COMPRESSION, "none").lower() == "gzip" \
            else ".metadata.json"
        final = metadata_dir / f"v{version}{suffix}"
        metadata_dir.mkdir(parents=True, exist_ok=True)
        self._publish(staged.metadata, final, identifier, version, created=current is None)
        try:  # committed: the hint is best effort (as Java's), loading finds the version without it
            _replace(metadata_dir / HINT, str(version).encode())
        except OSError as exc:
            log.warning("committed %s but could not write its %s: %s", final, HINT, exc)
        return _response(staged.metadata, final.as_uri())

    def _publish(self, metadata: TableMetadata, final: Path, identifier: Identifier, version: int,
                 created: bool) -> None:
        """``final`` created with the metadata, only if no version ``version`` (nor a newer one) exists."""
        name = ".".join(identifier)
        taken = (TableAlreadyExistsError(f"Table {name} already exists") if created else
                 CommitFailedException(f"Version {version} of {name} exists already: another writer committed"))
        if self._listed(final.parent) >= version:  # another writer's (also a version deleted since as old)
            raise taken
        data = metadata.model_dump_json(exclude_none=not Config().get_bool("legacy-current-snapshot-id")).encode()
        if final.name.endswith(".gz.metadata.json"):
            data = gzip.compress(data)
        temporary = final.parent / f".{uuid.uuid4()}{final.name}.tmp"
        try:
            _write(temporary, data)
            try:
                os.link(temporary, final)  # the commit: fails where the name exists
            except FileExistsError:
                raise taken from None
            except OSError as exc:  # a file system without hard links: an exclusive create instead
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                    raise
                try:
                    _write(final, data)
                except FileExistsError:
                    raise taken from None
            _sync_dir(final.parent)
        finally:
            temporary.unlink(missing_ok=True)

    def drop_table(self, identifier: str | Identifier) -> None:
        found, path = self._table_dir(identifier)
        if not self._is_table(path):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(found)}")
        shutil.rmtree(path)

    def purge_table(self, identifier: str | Identifier) -> None:
        self.drop_table(identifier)  # the data files are in the table's directory

    def rename_table(self, from_identifier: str | Identifier, to_identifier: str | Identifier) -> Table:
        raise NotImplementedError("the Hadoop catalog cannot rename a table (its location is its name)")

    def register_table(self, identifier: str | Identifier, metadata_location: str, overwrite: bool = False) -> Table:
        raise NotImplementedError("the Hadoop catalog cannot register a table (its location is its name)")

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        found = self.identifier_to_tuple(namespace)
        path = self._namespace_dir(found)
        return sorted((*found, child.name) for child in path.iterdir() if child.is_dir() and self._is_table(child))

    # namespaces: directories that are not tables

    def _namespace_dir(self, namespace: Identifier) -> Path:
        path = self._dir(*namespace) if namespace else self.root
        if namespace and (not path.is_dir() or self._is_table(path)):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(namespace)}")
        return path

    def create_namespace(self, namespace: str | Identifier, properties: Properties = EMPTY_DICT) -> None:
        found = self.identifier_to_tuple(namespace)
        if not found:
            raise ValueError("the Hadoop catalog's root is no namespace to create")
        if properties:
            raise ValueError(f"the Hadoop catalog keeps no namespace properties: {'.'.join(found)}")
        path = self._dir(*found)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir()
        except FileExistsError:
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {'.'.join(found)}") from None

    def drop_namespace(self, namespace: str | Identifier) -> None:
        found = self.identifier_to_tuple(namespace)
        path = self._namespace_dir(found)
        if not found:
            raise ValueError("the Hadoop catalog's root is no namespace to drop")
        if any(path.iterdir()):
            raise NamespaceNotEmptyError(f"Namespace is not empty: {'.'.join(found)}")
        path.rmdir()

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        found = self.identifier_to_tuple(namespace)
        path = self._namespace_dir(found)
        if not path.is_dir():
            return []
        return sorted((*found, child.name) for child in path.iterdir()
                      if child.is_dir() and not child.name.startswith(".") and not self._is_table(child))

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        found = self.identifier_to_tuple(namespace)
        return {"location": self._namespace_dir(found).as_uri()}

    def update_namespace_properties(self, namespace: str | Identifier, removals: set[str] | None = None,
                                    updates: Properties = EMPTY_DICT) -> PropertiesUpdateSummary:
        raise NotImplementedError("the Hadoop catalog keeps no namespace properties")

    # views: none, as in Java's HadoopCatalog

    def list_views(self, namespace: str | Identifier) -> list[Identifier]:
        return []

    def view_exists(self, identifier: str | Identifier) -> bool:
        return False

    def load_view(self, identifier: str | Identifier) -> View:
        raise NoSuchViewError(f"the Hadoop catalog has no views: {identifier}")

    def drop_view(self, identifier: str | Identifier) -> None:
        raise NoSuchViewError(f"the Hadoop catalog has no views: {identifier}")

    def register_view(self, identifier: str | Identifier, metadata_location: str) -> View:
        raise NotImplementedError("the Hadoop catalog has no views")


def _response(metadata: TableMetadata, location: str) -> CommitTableResponse:
    return CommitTableResponse.model_validate({"metadata": metadata, "metadata-location": location})


def _write(path: Path, data: bytes, sync: bool = True) -> None:
    """A new file (never one that exists) with ``data``, on disk when this returns (``sync``)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: Path, data: bytes) -> None:
    """``path`` replaced atomically with a file of ``data`` (not synced: a hint lost to a power cut is one behind,
    which loading passes by)."""
    temporary = path.parent / f".{uuid.uuid4()}-{path.name}.tmp"
    try:
        _write(temporary, data, sync=False)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # not every file system syncs a directory
        pass
    finally:
        os.close(fd)
