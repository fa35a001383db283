"""Delta's deletion vectors as the driver reads and writes them (streaming_job/delta/deletion_vectors.py,
vector_files.py, and the log's add and remove of a file with its vector): checked against the protocol's own
examples (PROTOCOL.md, "Deletion Vectors") and against delta-rs, which reads what we commit."""

from __future__ import annotations

import os
import uuid
import zlib

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming_job.batch.writer import Added
from streaming_job.delta import deletion_vectors as dv
from streaming_job.delta.commit import LiveFile, LogCommit, Removed, Vectored, file_actions, vectors_enabled
from streaming_job.delta.vector_files import VectorFiles
from streaming_job.lake.delta_log import TableLog, table_protocol
from streaming_job.lake.files import LakeFiles
from tests.harness.delta_rs import delta_rs_rows

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                       {"name": "v", "type": "string", "nullable": True, "metadata": {}}]}
VECTORS = {"delta.enableDeletionVectors": "true"}


def test_the_protocols_examples() -> None:
    # Example 3: an inline vector (Delta's older, big-endian layout) of rows 3, 4, 7, 11, 18, 29
    inline = dv.Descriptor.from_json({"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72l"
                                      "kbi5=-{L", "sizeInBytes": 40, "cardinality": 6})
    assert dv.decode(inline.inline()).tolist() == [3, 4, 7, 11, 18, 29]
    assert inline.file() is None and inline.unique_id.startswith("iwi5b=")
    # Example 1: a file named by a UUID after a random prefix
    stored = dv.Descriptor.from_json({"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4,
                                      "sizeInBytes": 40, "cardinality": 6})
    assert stored.file() == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert stored.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    made = dv.Descriptor.in_file(uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61"), 4, 40, 6)
    assert made.as_json() == {"storageType": "u", "pathOrInlineDv": "^-aqEH.-t@S}K{vb[*k^", "offset": 4,
                              "sizeInBytes": 40, "cardinality": 6}


@pytest.mark.parametrize("rows", [[], [0], [3, 4, 7, 11, 18, 29], list(range(0, 300_000, 3)), list(range(70_000)),
                                  [5, (1 << 32) + 7, 3 << 32]])
def test_vectors_in_the_portable_layout_read_back(rows) -> None:
    data = dv.encode(np.array(rows[::-1], dtype=np.uint64))  # any order in
    assert int.from_bytes(data[:4], "little") == dv.PORTABLE_MAGIC
    assert int.from_bytes(data[4:12], "little") == len({r >> 32 for r in rows})  # buckets of 2^32 rows
    assert dv.decode(data).tolist() == sorted(rows)


def test_a_vector_file_frames_each_vector_with_its_size_and_checksum() -> None:
    first, second = dv.encode([1, 2]), dv.encode([9])
    data, offsets = dv.file_bytes([first, second])
    assert data[0] == 1 and offsets == [1, 1 + 4 + len(first) + 4]
    assert int.from_bytes(data[1:5], "big") == len(first)
    assert int.from_bytes(data[5 + len(first):9 + len(first)], "big") == zlib.crc32(first)
    assert dv.decode(dv.from_file(data, offsets[1], len(second), "f.bin")).tolist() == [9]
    damaged = bytearray(data)
    damaged[offsets[1] + 6] ^= 0xFF
    with pytest.raises(dv.DeletionVectorError, match=rf"^f\.bin: the deletion vector at {offsets[1]} is damaged"):
        dv.from_file(bytes(damaged), offsets[1], len(second), "f.bin")
    with pytest.raises(dv.DeletionVectorError, match="runs past the file's"):
        dv.from_file(data[:-3], offsets[1], len(second), "f.bin")
    with pytest.raises(dv.DeletionVectorError, match="neither Delta's portable nor its native"):
        dv.decode(b"\x00" * 16)
    with pytest.raises(dv.DeletionVectorError, match="names row 9 of a file of 5 rows"):
        dv.keep_mask(5, np.array([1, 9], dtype=np.uint64))


def _data_file(path: str, ids: list[int]) -> tuple[Added, LiveFile]:
    name = f"part-{uuid.uuid4()}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}), os.path.join(path, name))
    size = os.path.getsize(os.path.join(path, name))
    stats = {"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)},
             "nullCount": {"id": 0}}
    return Added(name, {}, size, stats), LiveFile(name, size, orjson.dumps(stats).decode(), None, {}, 0)


def test_delta_rs_reads_the_vectors_the_driver_commits(tmp_path) -> None:
    """A file's rows deleted by a vector, twice (the second vector holds the first's rows too), then the file
    removed with its vector: delta-rs (and a fresh read of our log) sees exactly the live rows each time."""
    path = str(tmp_path / "t")
    os.makedirs(path)
    table = TableLog.read(path)
    added, live = _data_file(path, list(range(10)))
    actions = [*table.create_actions(SCHEMA, [], VECTORS), *file_actions([added], "app", 0)]
    assert actions[0]["protocol"] == {"minReaderVersion": 3, "minWriterVersion": 7,
                                      "readerFeatures": ["deletionVectors"],
                                      "writerFeatures": ["deletionVectors", "appendOnly", "invariants"]}
    table.commit(actions, "WRITE", {}, True)
    commit = LogCommit(None, table, {})
    assert commit.deletion_vectors()
    vectors = VectorFiles(LakeFiles.on_disk())
    first = vectors.write(path, [np.array([2, 5], dtype=np.uint64)])[0]
    commit.append([], "app", 1, [], vectors=[Vectored(live, first)])
    assert sorted(delta_rs_rows(path).column("id").to_pylist()) == [0, 1, 3, 4, 6, 7, 8, 9]
    again = TableLog.read(path)
    assert again.files[live.path]["deletionVector"] == first and again.rows() == 8
    live = commit.files()[0]
    second = vectors.write(path, [np.array([2, 5, 9], dtype=np.uint64)])[0]
    new = _data_file(path, [5])
    commit.append([new[0]], "app", 2, [], vectors=[Vectored(live, second)])
    assert sorted(delta_rs_rows(path).column("id").to_pylist()) == [0, 1, 3, 4, 5, 6, 7, 8]
    assert TableLog.read(path).rows() == 8
    rows = pq.read_table(os.path.join(path, live.path))
    assert vectors.live(rows, path, second).column("id").to_pylist() == [0, 1, 3, 4, 6, 7, 8]
    removed = next(f for f in commit.files() if f.path == live.path).removed()
    assert removed == Removed(live.path, live.size, second)
    commit.append([], "app", 3, [], [removed])
    assert sorted(delta_rs_rows(path).column("id").to_pylist()) == [5]
    assert list(TableLog.read(path).files) == [new[0].path]


def test_a_file_given_a_new_vector_stays_live_whatever_the_order_of_its_add_and_remove(tmp_path) -> None:
    """Spark's Delta writes the add with the new vector before the remove with the old one; the log keys a live
    file by its path and vector."""
    path = str(tmp_path / "t")
    os.makedirs(path)
    table = TableLog.read(path)
    added, live = _data_file(path, [1, 2, 3])
    table.commit([*table.create_actions(SCHEMA, [], VECTORS), *file_actions([added], "app", 0)], "WRITE", {}, True)
    vector = VectorFiles(LakeFiles.on_disk()).write(path, [np.array([1], dtype=np.uint64)])[0]
    add, remove = file_actions([], "app", 1, vectors=[Vectored(live, vector)])[:2]
    assert "deletionVector" not in remove["remove"] and orjson.loads(add["add"]["stats"])["tightBounds"] is False
    table.commit([add, remove], "DELETE", {}, False)
    assert table.files[live.path]["deletionVector"] == vector
    assert TableLog.read(path).files[live.path]["deletionVector"] == vector
    assert sorted(delta_rs_rows(path).column("id").to_pylist()) == [1, 3]


def test_which_tables_take_new_vectors() -> None:
    features = table_protocol(SCHEMA, VECTORS)
    assert vectors_enabled(features, VECTORS) and not vectors_enabled(features, {})
    assert not vectors_enabled(table_protocol(SCHEMA), VECTORS)  # the property alone: not without the feature


def test_a_missing_or_miscounted_vector_is_one_line_naming_it(tmp_path) -> None:
    vectors = VectorFiles(LakeFiles.on_disk())
    gone = dv.Descriptor.in_file(uuid.uuid4(), 1, 10, 1).as_json()
    with pytest.raises(dv.DeletionVectorError, match=r"/t/deletion_vector_[0-9a-f-]{36}\.bin: the deletion vector "
                                                     "file is missing"):
        vectors.deleted(str(tmp_path / "t"), gone)
    os.makedirs(tmp_path / "t")
    written = vectors.write(str(tmp_path / "t"), [np.array([1, 2], dtype=np.uint64)])[0]
    with pytest.raises(dv.DeletionVectorError, match="a deletion vector of 2 rows where its descriptor says 3"):
        vectors.deleted(str(tmp_path / "t"), {**written, "cardinality": 3})
