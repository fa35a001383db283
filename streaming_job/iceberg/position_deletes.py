"""Merge-on-read for an Iceberg mirror (issue 39): a batch's replaced and deleted rows are marked deleted BY POSITION
in a delete file binlake writes itself (the Delta side's deletion vectors, delta/mirror_driver.py), instead of
rewriting every data file that holds one of its keys.

- ``locate``: where the live rows of a batch's keys are, as (data file, positions). The snapshot's data files are
  pruned by their key statistics (the first key column's bounds in the manifests), then only the candidates' key
  columns are read and searched (batch/key_index.py, the Delta side's lookup); positions an existing position
  delete file deletes already are skipped, so a key changed in two batches is deleted at its newest row only.
- ``write_delete_file``: an Iceberg v2 position delete file (Parquet: ``file_path`` string, field id 2147483546,
  and ``pos`` long, 2147483545, required, sorted by path then position) and its manifest entry (content
  POSITION_DELETES, counts and the bounds of both columns). One file per batch and partition: the spec's
  ``referenced_data_file`` (field 143, optional in v2) is not in pyiceberg 0.12's v2 manifest schema, but a file
  whose ``file_path`` bounds are equal is scoped to that data file by both pyiceberg and Java Iceberg.
- ``stage_batch``: the batch's new rows (data files) and its delete files added in ONE snapshot of a transaction,
  with the batch's summary properties. Iceberg names such a commit ``overwrite`` (data and delete files added in a
  logical overwrite: what Spark's merge-on-read MERGE commits), ``delete`` where only deletes are added, ``append``
  where only rows are.

pyiceberg 0.12 writes data manifests only; the snapshot here is pyiceberg's fast append (``_FastAppendFiles``: the
parent's live manifests kept, one data manifest for the added data files) given one more manifest, of content
DELETES (``ManifestWriterV2`` whose content says so), and the delete files counted in its summary."""

from __future__ import annotations

import bisect
import struct
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import _check_pyarrow_schema_compatible, _dataframe_to_data_files
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import EMPTY_DICT
from pyiceberg.types import BinaryType, DecimalType, IntegerType, LongType, PrimitiveType, StringType

from ..batch.key_index import BatchKeys, FileKeys, file_keys
from .planning import ONE_CALL, KeptManifests
from .tables import keys_filter

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import FileScanTask, Table, Transaction

FILE_PATH_ID = 2147483546  # the spec's reserved field ids of a position delete file's columns
POS_ID = 2147483545
_FIELD_ID = b"PARQUET:field_id"
DELETE_SCHEMA = pa.schema([pa.field("file_path", pa.string(), nullable=False, metadata={_FIELD_ID: str(FILE_PATH_ID)}),
                           pa.field("pos", pa.int64(), nullable=False, metadata={_FIELD_ID: str(POS_ID)})])


class KeyCache(Protocol):
    """Files' keys kept between batches, by data file path (delta/mirror_driver.RecentFiles has this shape)."""

    def get(self, path: str) -> FileKeys | None: ...

    def put(self, path: str, keys: FileKeys) -> None: ...


@dataclass(frozen=True)
class FilePositions:
    """A data file's live rows holding one of a batch's keys: their positions (ascending, int64)."""

    data_file: DataFile
    positions: np.ndarray


@dataclass(frozen=True)
class Located:
    """Where a batch's keys are live in a snapshot (``snapshot_id``), each data file holding some once, by path;
    ``candidates``: the data files whose key columns were searched (their statistics could not rule them out)."""

    snapshot_id: int | None
    files: list[FilePositions]
    candidates: int

    @property
    def rows(self) -> int:
        return sum(len(f.positions) for f in self.files)

    def table(self) -> pa.Table:
        """The positions as a position delete file holds them: (file_path, pos), by path then position."""
        files = sorted(self.files, key=lambda f: f.data_file.file_path)
        paths = pa.array([f.data_file.file_path for f in files], pa.string())
        counts = [len(f.positions) for f in files]
        positions = np.concatenate([f.positions for f in files]) if files else np.zeros(0, np.int64)
        return pa.table([paths.take(np.repeat(np.arange(len(files)), counts)), pa.array(positions, pa.int64())],
                        schema=DELETE_SCHEMA)


def locate(table: Table, keys: pa.Table, pk: list[str], pool: Executor | None = None,
           cache: KeyCache | None = None, planned: Iterable[FileScanTask] | None = None,
           manifests: KeptManifests | None = None) -> Located:
    """The live rows of ``keys``' keys (a table of the key columns ``pk``, one row per key: a batch's last change
    per key) in ``table``'s current snapshot. ``pool``: the candidate files read side by side; ``cache``: their
    keys kept for the next batches (a data file never changes once written); ``planned``: the current snapshot's
    scan tasks of the keys' range, where the caller has them already; ``manifests``: the manifests' entries and
    delete files' positions kept between batches (planning.py; None: read for this call alone)."""
    snapshot = table.current_snapshot()
    if snapshot is None or not len(keys):
        return Located(None if snapshot is None else snapshot.snapshot_id, [], 0)
    schema = table.schema()
    kept = manifests if manifests is not None else KeptManifests(ONE_CALL)
    tasks = planned
    if tasks is None:
        bounds = keys_filter(keys, pk[0])
        tasks = kept.plan(table, bounds if bounds is not None else AlwaysTrue())
    first = _FirstKeys.of(keys, pk[0], schema.find_field(pk[0]).field_id, schema.find_type(pk[0]))
    candidates = [t for t in tasks if first.may_hold(t.file)]
    batch = BatchKeys(keys, pk)
    key_ids = [schema.find_field(k).field_id for k in pk]

    def search(task: Any) -> FilePositions:
        path = task.file.file_path
        found = cache.get(path) if cache is not None else None
        if found is None:
            found = file_keys(key_columns(table.io, path, key_ids, keys.select(pk).schema))
            if cache is not None:
                cache.put(path, found)
        hit = found.positions(batch).astype(np.int64)
        if len(hit) and task.delete_files:
            hit = kept.live(table.io, path, task.delete_files, hit)
        return FilePositions(task.file, hit)

    searched = list(pool.map(search, candidates)) if pool is not None else [search(t) for t in candidates]
    return Located(snapshot.snapshot_id, [f for f in searched if len(f.positions)], len(candidates))


class _FirstKeys(NamedTuple):
    """A batch's first key column, sorted and distinct, to tell whether a data file's range of it (its
    statistics) holds one of them; ``values`` None: a type whose bounds are not compared (every file may)."""

    field_id: int
    kind: PrimitiveType
    values: np.ndarray | list[Any] | None

    @classmethod
    def of(cls, keys: pa.Table, name: str, field_id: int, kind: Any) -> _FirstKeys:
        column = keys.column(name).drop_null()
        if isinstance(kind, (IntegerType, LongType)):
            return cls(field_id, kind, BatchKeys(keys, [name]).numbers)
        if isinstance(kind, (DecimalType, StringType, BinaryType)):  # (a decimal's bounds and values: Decimal)
            return cls(field_id, kind, pc.unique(column).sort().to_pylist())
        return cls(field_id, kind, None)

    def may_hold(self, data_file: DataFile) -> bool:
        low, high = (data_file.lower_bounds or {}).get(self.field_id), (data_file.upper_bounds or {}).get(self.field_id)
        if self.values is None or low is None or high is None:
            return True
        lo: Any = from_bytes(self.kind, low)
        hi: Any = from_bytes(self.kind, high)
        if isinstance(self.values, np.ndarray):  # integers
            limits = np.iinfo(self.values.dtype)
            lo, hi = max(int(lo), limits.min), min(int(hi), limits.max)
            return lo <= hi and bool(np.searchsorted(self.values, lo, "left")
                                     < np.searchsorted(self.values, hi, "right"))
        return bisect.bisect_left(self.values, lo) < bisect.bisect_right(self.values, hi)


def key_columns(io: FileIO, path: str, field_ids: list[int], wanted: pa.Schema) -> pa.Table:
    """A data file's key columns in file order, found by their field ids (by name in a file without ids) and
    named and typed as the batch's (an int column promoted to long since: cast)."""
    with io.new_input(path).open() as f:
        parquet = pq.ParquetFile(f)
        by_id = {int(field.metadata[_FIELD_ID]): field.name for field in parquet.schema_arrow
                 if field.metadata and _FIELD_ID in field.metadata}
        names = [by_id.get(i, n) for i, n in zip(field_ids, wanted.names, strict=True)]
        read = parquet.read(columns=names)
    return pa.table([pc.cast(read.column(n), f.type) for n, f in zip(names, wanted, strict=True)], schema=wanted)


def write_delete_file(table: Table, files: Sequence[FilePositions], name: str) -> DataFile:
    """``files``' positions (data files of one partition) as a position delete file ``name`` in the table's data
    location, and its manifest entry."""
    rows = Located(None, list(files), 0).table()
    if not len(rows):
        raise ValueError("a position delete file deletes at least one row")
    first = files[0].data_file
    buffer = pa.BufferOutputStream()
    pq.write_table(rows, buffer, compression="zstd", store_schema=False)
    data = buffer.getvalue()
    path = table.location_provider().new_data_location(name)
    with table.io.new_output(path).create(overwrite=False) as out:
        out.write(data.to_pybytes())
    paths, positions = rows.column("file_path"), rows.column("pos")
    count = len(rows)
    path_bounds, pos_bounds = pc.min_max(paths), pc.min_max(positions)
    delete = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES, file_path=path, file_format=FileFormat.PARQUET,
        partition=first.partition, record_count=count, file_size_in_bytes=data.size,
        value_counts={FILE_PATH_ID: count, POS_ID: count}, null_value_counts={FILE_PATH_ID: 0, POS_ID: 0},
        # full paths, never truncated: equal bounds scope the file to one data file (pyiceberg, Java Iceberg)
        lower_bounds={FILE_PATH_ID: path_bounds["min"].as_py().encode(), POS_ID: _long(pos_bounds["min"].as_py())},
        upper_bounds={FILE_PATH_ID: path_bounds["max"].as_py().encode(), POS_ID: _long(pos_bounds["max"].as_py())},
        sort_order_id=None, equality_ids=None, key_metadata=None)
    delete.spec_id = first.spec_id  # (not a field of the entry's struct: from_args leaves it out)
    return delete


def write_delete_files(table: Table, files: Sequence[FilePositions], name: str) -> list[DataFile]:
    """``files``' positions as one position delete file per partition (``name``-NNNNN.parquet)."""
    groups: dict[tuple[int, tuple[Any, ...]], list[FilePositions]] = {}
    for found in files:
        partition: Any = found.data_file.partition  # a pyiceberg Record: its values
        groups.setdefault((found.data_file.spec_id, tuple(partition)), []).append(found)
    return [write_delete_file(table, found, f"{name}-{n:05d}.parquet") for n, found in enumerate(groups.values())]


def _long(value: int) -> bytes:
    return struct.pack("<q", value)  # the spec's single-value serialization of a long


class BatchCommit(NamedTuple):
    """What ``stage_batch`` staged: the snapshot's operation and its added data and delete files."""

    operation: Operation | None  # None: nothing to commit
    data_files: list[DataFile]
    delete_files: list[DataFile]


def stage_batch(tx: Transaction, table: Table, rows: pa.Table | None, located: Located,
                properties: dict[str, str], key: Sequence[str] = ()) -> BatchCommit:
    """The batch staged in ``tx`` (a transaction of ``table``) as one snapshot with the summary ``properties``:
    ``rows`` (the surviving after-images, in ``key`` order) in new data files, and ``located``'s positions
    deleted in a delete file per partition."""
    metadata = tx.table_metadata
    if located.files and metadata.format_version != 2:
        raise ValueError(f"position deletes written for an Iceberg v2 table only, not v{metadata.format_version}")
    if located.snapshot_id != metadata.current_snapshot_id:
        raise ValueError("the positions were located in another snapshot than the one the batch commits on")
    write_id = uuid.uuid4()
    deletes = write_delete_files(table, located.files, f"{write_id}-deletes")
    data: list[DataFile] = []
    if rows is not None and len(rows):
        _check_pyarrow_schema_compatible(metadata.schema(), provided_schema=rows.schema,
                                         format_version=metadata.format_version)  # (as pyiceberg's append)
        ordered = rows.sort_by([(k, "ascending") for k in key]) if key else rows
        data = list(_dataframe_to_data_files(metadata, ordered, table.io, write_id))
    operation = (Operation.OVERWRITE if data and deletes else Operation.DELETE if deletes
                 else Operation.APPEND if data else None)
    if operation is None:
        return BatchCommit(None, [], [])
    producer = _RowDelta(operation, tx, table.io, deletes, {f.data_file for f in located.files}, properties, write_id)
    for f in data:
        producer.append_data_file(f)
    producer.commit()
    return BatchCommit(operation, data, deletes)


def delete_manifests(producer: Any, files: Iterable[DataFile]) -> list[ManifestFile]:
    """Delete files as manifests of content DELETES, one per partition spec, their entries ADDED by ``producer``'s
    snapshot (a pyiceberg snapshot producer: its snapshot id, specs, schema, compression and manifest paths)."""
    by_spec: dict[int, list[DataFile]] = {}
    for f in files:
        by_spec.setdefault(f.spec_id, []).append(f)
    out = []
    for spec_id, found in by_spec.items():
        with delete_manifest_writer(producer, producer.spec(spec_id)) as writer:
            for f in found:
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED,
                                                         snapshot_id=producer._snapshot_id, sequence_number=None,
                                                         file_sequence_number=None, data_file=f))
        out.append(writer.to_manifest_file())
    return out


def delete_manifest_writer(producer: Any, spec: Any) -> ManifestWriterV2:
    """A writer of a manifest of delete files of the partition spec ``spec``, for ``producer``'s snapshot."""
    return _DeleteManifestWriter(spec, producer.schema(), producer.new_manifest_output(), producer._snapshot_id,
                                 producer._compression)


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer for a manifest of delete files (content DELETES, in the list and its own
    metadata)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _RowDelta(_FastAppendFiles):
    """A fast append (the parent's manifests kept, a data manifest for the added data files) that also adds delete
    files in a delete manifest of their own, under the snapshot ``operation``. On a commit retried after another
    writer's commit, the data files the deletes reference must still be live."""

    def __init__(self, operation: Operation, tx: Transaction, io: FileIO, deletes: list[DataFile],
                 referenced: set[DataFile], properties: dict[str, str], commit_uuid: uuid.UUID) -> None:
        super().__init__(operation=operation, transaction=tx, io=io, commit_uuid=commit_uuid,
                         snapshot_properties=properties)
        self._delete_files = deletes
        self._referenced = referenced

    def _existing_manifests(self) -> list[ManifestFile]:
        return [*delete_manifests(self, self._delete_files), *super()._existing_manifests()]

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        # pyiceberg's summary counts the added files it is given by their content (added-delete-files,
        # added-position-deletes, the totals): the delete files join the data files for it alone
        data = self._added_data_files
        self._added_data_files = [*data, *self._delete_files]
        try:
            return super()._summary(snapshot_properties)
        finally:
            self._added_data_files = data

    def _validate_concurrency(self) -> None:
        from pyiceberg.table.update.validate import _validate_data_files_exist

        window = self._commit_window
        if window is None or window.is_empty() or window.head is None or not self._referenced:
            return
        _validate_data_files_exist(self._transaction._table, window.head, self._referenced, window.base)

