"""Merge-on-read batches on a local Iceberg mirror (streaming_job/iceberg/position_deletes.py), without Spark: random
updates, deletes and re-inserts of the same keys over a table of several data files (in key order, shuffled,
with gaps), each batch one snapshot of an appended file and a position delete file; after each, pyiceberg's scan
(which applies position deletes) equals a dict kept aside, also from the catalog anew. The delete files are the
spec's (field ids in the Parquet schema, sorted, bounds); a row is never deleted twice, so a key changed in two
batches is deleted at its newest position only."""

from __future__ import annotations

import random
import struct
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming_job.iceberg.position_deletes import (
    DELETE_SCHEMA,
    FILE_PATH_ID,
    POS_ID,
    Located,
    locate,
    stage_batch,
)
from streaming_job.iceberg.tables import WantedTable
from tests.harness.iceberg import catalog, local_format

_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
_APP = {"binlake.app-id": "app-1"}


def _rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}-{i}" for i in ids]}, schema=_SCHEMA)


def _scan(table: Any) -> dict[int, str]:
    rows = table.scan().to_arrow().to_pylist()
    found = {r["id"]: r["v"] for r in rows}
    assert len(found) == len(rows), "a key live twice"
    return found


def _delete_files(table: Any) -> list[Any]:
    from pyiceberg.manifest import DataFileContent, ManifestContent

    out = []
    for manifest in table.current_snapshot().manifests(table.io):
        entries = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        kinds = {e.data_file.content for e in entries}
        if manifest.content == ManifestContent.DELETES:
            assert kinds == {DataFileContent.POSITION_DELETES}
            out += [e.data_file for e in entries]
        else:
            assert kinds <= {DataFileContent.DATA}
    return out


def _read(table: Any, path: str, columns: list[str] | None = None) -> pa.Table:
    with table.io.new_input(path).open() as f:
        return pq.read_table(f, columns=columns)


def _batch(table: Any, upserts: pa.Table, deleted: list[int], batch_id: int) -> Located:
    keys = pa.table({"id": pa.array(sorted([*upserts.column("id").to_pylist(), *deleted]), pa.int64())})
    located = locate(table, keys, ["id"])
    properties = {**_APP, "binlake.batch-id": str(batch_id)}
    with table.transaction() as tx:
        stage_batch(tx, table, upserts, located, properties, ["id"])
    return located


@pytest.fixture
def mirror(tmp_path: Any) -> Any:
    fmt = local_format(tmp_path)
    table = fmt.ready(WantedTable("db", "t", _SCHEMA, [], dict))
    shuffled = list(range(600, 900))
    random.Random(7).shuffle(shuffled)
    for part in (list(range(0, 300)), list(range(300, 600)), shuffled, list(range(900, 1500, 2))):
        table.append(_rows(part, "v0"))  # four data files: in key order, shuffled, with gaps
    return table


def test_batches_of_updates_deletes_and_reinserts_read_as_the_expected_rows(mirror: Any, tmp_path: Any) -> None:
    expected = _scan(mirror)
    assert len(mirror.current_snapshot().manifests(mirror.io)) == 4
    rnd = random.Random(39)
    deleted_before: set[tuple[str, int]] = set()
    for batch_id in range(1, 7):
        keys = {5, 650, 1200} | set(rnd.sample(range(0, 1600), 80))  # 5, 650, 1200: changed in every batch
        upserts, deletes = [], []
        for k in sorted(keys):
            if k in expected and k not in (5, 650) and rnd.random() < 0.35:
                deletes.append(k)
            else:
                upserts.append(k)  # an update, an insert, or the re-insert of a key deleted before
        before = len(mirror.snapshots())
        rows = _rows(upserts, f"b{batch_id}")
        located = _batch(mirror, rows, deletes, batch_id)
        live_keys = [k for k in keys if k in expected]
        assert located.rows == len(live_keys)  # each live key once, at its newest row
        for k in deletes:
            del expected[k]
        expected.update(zip(upserts, rows.column("v").to_pylist(), strict=True))

        assert _scan(mirror) == expected
        assert len(mirror.snapshots()) == before + 1  # one snapshot per batch
        summary = mirror.current_snapshot().summary
        assert summary["binlake.batch-id"] == str(batch_id) and summary["binlake.app-id"] == "app-1"
        assert summary.operation.value == "overwrite"  # data and delete files added
        assert int(summary["added-position-deletes"]) == located.rows
        assert int(summary["added-delete-files"]) == 1
        assert int(summary["total-position-deletes"]) == len(deleted_before) + located.rows

        # every delete row names a live row of one of the batch's keys, none deleted before (newest position only)
        added = [f for f in _delete_files(mirror)
                 if not {(p, q) for p, q in _positions(mirror, f)} <= deleted_before]
        assert len(added) == 1
        rows_deleted = _positions(mirror, added[0])
        assert not set(rows_deleted) & deleted_before
        assert len(set(rows_deleted)) == len(rows_deleted)
        named = Counter(_read(mirror, p, ["id"]).column("id")[q].as_py() for p, q in rows_deleted)
        assert named == Counter(live_keys)  # 5 and 650 once each, though changed in every batch
        deleted_before |= set(rows_deleted)

    reread = catalog(tmp_path).load_table(("db", "t"))
    assert _scan(reread) == expected


def _positions(table: Any, delete_file: Any) -> list[tuple[str, int]]:
    rows = _read(table, delete_file.file_path)
    return list(zip(rows.column("file_path").to_pylist(), rows.column("pos").to_pylist(), strict=True))


def test_the_delete_file_is_the_specs(mirror: Any) -> None:
    from pyiceberg.manifest import DataFileContent

    upserts, deletes = _rows([10, 11, 12, 700, 701, 2000], "b1"), [20, 21, 902, 904]
    located = _batch(mirror, upserts, deletes, 1)
    assert located.candidates == 3 and located.rows == 9  # 300..599 ruled out by its key range; 2000 is new
    (delete,) = _delete_files(mirror)
    assert delete.content == DataFileContent.POSITION_DELETES and delete.record_count == 9
    rows = _read(mirror, delete.file_path)
    assert delete.file_size_in_bytes == len(mirror.io.new_input(delete.file_path))
    # the field ids in the Parquet schema itself (no Arrow schema stored beside it), both columns required
    with mirror.io.new_input(delete.file_path).open() as f:
        parquet = pq.ParquetFile(f)
        assert b"ARROW:schema" not in (parquet.metadata.metadata or {})
        fields = {field.name: field for field in parquet.schema_arrow}
    assert fields["file_path"].metadata[b"PARQUET:field_id"] == str(FILE_PATH_ID).encode()
    assert fields["pos"].metadata[b"PARQUET:field_id"] == str(POS_ID).encode()
    assert not fields["file_path"].nullable and fields["pos"].type == pa.int64() and not fields["pos"].nullable
    assert rows.schema.equals(DELETE_SCHEMA, check_metadata=False)
    pairs = list(zip(rows.column("file_path").to_pylist(), rows.column("pos").to_pylist(), strict=True))
    assert pairs == sorted(pairs)  # by file_path, then pos
    paths = [p for p, _ in pairs]
    assert delete.lower_bounds[FILE_PATH_ID] == min(paths).encode()
    assert delete.upper_bounds[FILE_PATH_ID] == max(paths).encode()
    assert struct.unpack("<q", delete.lower_bounds[POS_ID])[0] == min(q for _, q in pairs)
    assert struct.unpack("<q", delete.upper_bounds[POS_ID])[0] == max(q for _, q in pairs)
    data_files = {t.file.file_path for t in mirror.scan().plan_files()}
    assert set(paths) <= data_files  # the data files' paths as the manifests name them


def test_a_batch_of_deletes_only_is_a_delete_and_of_new_keys_only_an_append(mirror: Any) -> None:
    _batch(mirror, _rows([], "b1"), [1, 2, 3], 1)
    assert mirror.current_snapshot().summary.operation.value == "delete"
    assert 1 not in _scan(mirror) and 4 in _scan(mirror)
    located = _batch(mirror, _rows([5000, 5001], "b2"), [], 2)
    assert located.candidates == 0 and not located.files  # the key statistics rule every file out
    assert mirror.current_snapshot().summary.operation.value == "append"
    assert _scan(mirror)[5001] == "b2-5001"


def test_the_orphan_removal_keeps_the_delete_files(mirror: Any) -> None:
    from streaming_job.iceberg.orphans import live_files
    from streaming_job.lake.files import LakeFiles

    _batch(mirror, _rows([7], "b1"), [8], 1)
    files = LakeFiles.on_disk()
    live = live_files(mirror, files)
    assert all(files.path(f.file_path) in live for f in _delete_files(mirror))


def test_a_key_of_two_columns(tmp_path: Any) -> None:
    schema = pa.schema([("a", pa.int32()), ("b", pa.string()), ("v", pa.int64())])
    table = local_format(tmp_path).ready(WantedTable("db", "k2", schema, [], dict))
    table.append(pa.table({"a": [1, 1, 2, 2, 3], "b": ["x", "y", "x", "y", "x"], "v": [0, 0, 0, 0, 0]}, schema=schema))
    keys = pa.table({"a": pa.array([1, 2, 9], pa.int32()), "b": ["y", "x", "x"]})
    located = locate(table, keys, ["a", "b"])
    assert [f.positions.tolist() for f in located.files] == [[1, 2]]
    with table.transaction() as tx:
        stage_batch(tx, table, pa.table({"a": pa.array([1], pa.int32()), "b": ["y"], "v": [1]}, schema=schema),
                    located, {**_APP, "binlake.batch-id": "1"}, ["a", "b"])
    found = {(r["a"], r["b"]): r["v"] for r in table.scan().to_arrow().to_pylist()}
    assert found == {(1, "x"): 0, (1, "y"): 1, (2, "y"): 0, (3, "x"): 0}


def test_positions_located_on_another_snapshot_are_refused(mirror: Any) -> None:
    keys = pa.table({"id": pa.array([1], pa.int64())})
    located = locate(mirror, keys, ["id"])
    mirror.append(_rows([3000], "other"))
    with pytest.raises(ValueError, match="another snapshot"), mirror.transaction() as tx:
        stage_batch(tx, mirror, None, located, _APP)


def test_the_delete_manifest_says_deletes(mirror: Any) -> None:
    import fastavro
    from pyiceberg.manifest import ManifestContent

    _batch(mirror, _rows([1], "b1"), [], 1)
    manifests = mirror.current_snapshot().manifests(mirror.io)
    contents = Counter(m.content for m in manifests)
    assert contents == {ManifestContent.DATA: 5, ManifestContent.DELETES: 1}  # 4 kept, the batch's 2 added
    (deletes,) = [m for m in manifests if m.content == ManifestContent.DELETES]
    assert deletes.added_files_count == 1 and deletes.added_rows_count == 1
    with mirror.io.new_input(deletes.manifest_path).open() as f:
        assert fastavro.reader(f).metadata["content"] == "deletes"


def test_a_retry_after_another_commit_removed_a_referenced_file_fails(mirror: Any, tmp_path: Any) -> None:
    from pyiceberg.exceptions import ValidationException
    from pyiceberg.expressions import EqualTo

    other = catalog(tmp_path).load_table(("db", "t"))
    located = locate(mirror, pa.table({"id": pa.array([1], pa.int64())}), ["id"])
    with pytest.raises(ValidationException, match="concurrently deleted"), mirror.transaction() as tx:
        stage_batch(tx, mirror, _rows([1], "b1"), located, {**_APP, "binlake.batch-id": "1"}, ["id"])
        other.delete(EqualTo("id", 2))  # rewrites the file holding key 1 before the batch's commit
    assert _scan(catalog(tmp_path).load_table(("db", "t")))[1] == "v0-1"


@pytest.mark.parametrize("kind", ["string", "decimal"])
def test_string_and_unsigned_bigint_keys_are_pruned_by_their_bounds(tmp_path: Any, kind: str) -> None:
    from decimal import Decimal

    def value(i: int) -> Any:
        return f"k{i:04d}" if kind == "string" else Decimal(2**63 + i)  # beyond a signed BIGINT

    arrow = pa.string() if kind == "string" else pa.decimal128(20, 0)
    schema = pa.schema([("k", arrow), ("v", pa.int64())])
    table = local_format(tmp_path).ready(WantedTable("db", "t", schema, [], dict))
    for part in (range(0, 100), range(100, 200), range(200, 300)):
        table.append(pa.table({"k": pa.array([value(i) for i in part], arrow), "v": list(part)}, schema=schema))
    keys = pa.table({"k": pa.array([value(i) for i in (5, 250, 260, 999)], arrow)})
    located = locate(table, keys, ["k"])
    assert located.candidates == 2  # 100..199 ruled out
    assert sorted(int(p) for f in located.files for p in f.positions) == [5, 50, 60]
    with table.transaction() as tx:
        stage_batch(tx, table, None, located, {**_APP, "binlake.batch-id": "1"})
    assert sorted(r["v"] for r in table.scan().to_arrow().to_pylist()) == sorted(set(range(300)) - {5, 250, 260})
