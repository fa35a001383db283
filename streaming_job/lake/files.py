"""The lake's files as the driver and the executors reach them: a local directory, or a bucket of S3 or an
S3-compatible store (s3a://bucket/prefix), through pyarrow's filesystem of that kind. Paths are the lake's
own (a local path, or an s3a:// URI); this module turns them into the filesystem's.

S3 has no rename and (through pyarrow) no put-if-absent: ``create`` checks and writes, which is safe for
one writer per table, the lake's lease (lake/lease.py) making sure that only one job writes a lake.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .object_store import S3_SCHEMES, ObjectStoreSettings
from .paths import scheme


class LakeFiles:
    """Whole-file reads and writes of small files (Delta log entries, leases) and the pyarrow filesystem for
    Parquet, for the lakes of one kind."""

    def __init__(self, filesystem: pafs.FileSystem, local: bool, store: ObjectStoreSettings | None = None) -> None:
        self.filesystem = filesystem
        self.local = local
        self.store = store

    @staticmethod
    def on_disk() -> LakeFiles:
        return LakeFiles(pafs.LocalFileSystem(), True)

    @staticmethod
    def of(lake: str, store: ObjectStoreSettings | None = None) -> LakeFiles | None:
        """The files of ``lake``: local disk for a plain path, S3 for s3a:// (with ``store``); None for a
        lake of another kind (file://, abfss://, hdfs://: Spark's own filesystems only)."""
        kind = scheme(lake)
        if kind is None:
            return LakeFiles.on_disk()
        if kind in S3_SCHEMES and store is not None:
            return LakeFiles(s3_filesystem(store), False, store)
        return None

    def path(self, lake_path: str) -> str:
        """The filesystem's path of a lake path (an s3a:// URI becomes bucket/key, a file:// URI its path)."""
        parsed = urlparse(lake_path)
        if self.local:
            return unquote(parsed.path) if parsed.scheme == "file" else lake_path
        return f"{parsed.netloc}{parsed.path}".rstrip("/")

    def read(self, path: str) -> bytes | None:
        """The file's bytes; None if it does not exist."""
        try:
            if self.local:
                with open(path, "rb") as fh:
                    return fh.read()
            with self.filesystem.open_input_stream(self.path(path)) as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def write(self, path: str, data: bytes) -> None:
        """The whole file at once (readers see the old bytes or the new, never a part)."""
        if not self.local:
            with self.filesystem.open_output_stream(self.path(path)) as fh:  # one PUT: objects appear whole
                fh.write(data)
            return
        temp = _beside(path, data)
        os.replace(temp, path)

    def create(self, path: str, data: bytes) -> bool:
        """Write a file that must not exist yet; False if it does (another commit took that name)."""
        if not self.local:
            if self.filesystem.get_file_info(self.path(path)).type != pafs.FileType.NotFound:
                return False
            self.write(path, data)
            return True
        temp = _beside(path, data)
        try:
            os.link(temp, path)  # fails where the file exists: atomic
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)
        return True

    def delete(self, path: str) -> None:
        try:
            self.filesystem.delete_file(self.path(path))
        except FileNotFoundError:
            pass

    def remove_tree(self, directory: str) -> None:
        """``directory`` and everything in it, if it is there."""
        if self.local:
            import shutil

            shutil.rmtree(self.path(directory), ignore_errors=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_dir(self.path(directory))

    def copy(self, source: str, target: str) -> None:
        """A file of another table copied as a file of its own (a renamed table's mirror: table_statements.py):
        on local disk a hard link (no bytes copied; a copy where the two cannot share one), on S3 a server-side
        copy (CopyObject: no bytes through the job). A target that exists already (a replay) stays."""
        if self.local:
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            try:
                os.link(source, target)
            except FileExistsError:
                pass
            except OSError:  # another file system, or one without hard links
                import shutil

                shutil.copyfile(source, target)
            return
        if self.filesystem.get_file_info(self.path(target)).type == pafs.FileType.NotFound:
            self.filesystem.copy_file(self.path(source), self.path(target))

    def list(self, directory: str) -> list[str]:
        """The names of the files directly in ``directory`` ([] if there is none)."""
        if self.local:
            try:
                return os.listdir(directory)
            except FileNotFoundError:
                return []
        selector = pafs.FileSelector(self.path(directory), allow_not_found=True)
        return [os.path.basename(f.path) for f in self.filesystem.get_file_info(selector)
                if f.type == pafs.FileType.File]

    def read_parquet(self, path: str, columns: Sequence[str] | None = None) -> pa.Table:
        """A Parquet file's rows (``columns``: only these)."""
        return pq.ParquetFile(self.path(path), filesystem=self.filesystem).read(
            columns=None if columns is None else [*columns])

    def write_parquet(self, path: str, rows: pa.Table, **options: Any) -> int:
        """A Parquet file of ``rows``; its size."""
        with self.open_output(path) as sink:
            pq.write_table(rows, sink, **options)
            return sink.tell()

    def open_output(self, path: str) -> pa.NativeFile:
        """A new file to write (its directory made on local disk); on S3 it appears whole when closed."""
        target = self.path(path)
        if self.local:
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        return self.filesystem.open_output_stream(target)

    def storage_options(self) -> dict[str, str]:
        """The same store for delta-rs (deltalake's storage_options)."""
        if self.store is None:
            return {}
        found = self.store.credentials()
        options = {"AWS_REGION": self.store.region or "us-east-1"}
        if self.store.endpoint:
            options |= {"AWS_ENDPOINT_URL": self.store.endpoint,
                        "AWS_ALLOW_HTTP": str(self.store.endpoint.startswith("http://")).lower(),
                        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not self.store.path_style).lower()}
        if found is not None:
            options |= {"AWS_ACCESS_KEY_ID": found.access_key, "AWS_SECRET_ACCESS_KEY": found.secret_key}
            if found.session_token:
                options["AWS_SESSION_TOKEN"] = found.session_token
        return options

    def uri(self, lake_path: str) -> str:
        """The lake path as delta-rs names it (s3:// for s3a://)."""
        return lake_path if self.local else f"s3://{self.path(lake_path)}"



def _beside(path: str, data: bytes) -> str:
    """A temporary file of ``data`` in ``path``'s directory (made if it is missing: a new table's first)."""
    directory = os.path.dirname(path) or "."
    temp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        fh = open(temp, "wb")
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)
        fh = open(temp, "wb")
    with fh:
        fh.write(data)
    return temp


def s3_filesystem(store: ObjectStoreSettings) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem for the lake's store, with the job's credentials (None: AWS's own chain)."""
    found = store.credentials()
    options: dict[str, object] = {}
    if found is not None:
        options.update(access_key=found.access_key, secret_key=found.secret_key,
                       session_token=found.session_token)
    if store.endpoint:
        parsed = urlparse(store.endpoint if "://" in store.endpoint else f"https://{store.endpoint}")
        options.update(endpoint_override=parsed.netloc, scheme=parsed.scheme,
                       force_virtual_addressing=not store.path_style)
    if store.region:
        options["region"] = store.region
    return pafs.S3FileSystem(**options)
