"""The driver's own Delta log reading and writing (streaming_job/lake/delta_log.py), checked against delta-rs (the
`deltalake` package), an implementation of the protocol that is not ours: what we commit it reads, what it
commits (and checkpoints) we read."""

from __future__ import annotations

import os
import threading
import uuid

import deltalake
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming_job.batch.writer import Added
from streaming_job.delta.commit import Removed, file_actions
from streaming_job.lake.delta_log import CommitConflict, TableLog, UnreadableLog, simple_type, table_protocol

SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "v", "type": "string", "nullable": True, "metadata": {}},
    {"name": "d", "type": "decimal(12,2)", "nullable": True, "metadata": {}},
    {"name": "img", "type": {"type": "struct", "fields": [
        {"name": "x", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "f", "type": {"type": "array", "elementType": "float", "containsNull": True}, "nullable": True,
         "metadata": {}}]}, "nullable": True, "metadata": {}}]}
ARROW = pa.schema([("id", pa.int64()), ("v", pa.string()), ("d", pa.decimal128(12, 2)),
                   ("img", pa.struct([("x", pa.int32()), ("f", pa.list_(pa.float32()))]))])


def _file(path: str, ids: list[int]) -> Added:
    name = f"part-{uuid.uuid4()}.parquet"
    os.makedirs(path, exist_ok=True)
    rows = pa.Table.from_pylist([{"id": i, "v": f"v{i}", "d": None, "img": {"x": i, "f": [0.5]}} for i in ids],
                                schema=ARROW)
    pq.write_table(rows, os.path.join(path, name))
    stats = {"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)},
             "nullCount": {"id": 0}}
    return Added(name, {}, os.path.getsize(os.path.join(path, name)), stats)


def _ids(path: str) -> list[int]:
    return sorted(deltalake.DeltaTable(path).to_pyarrow_table().column("id").to_pylist())


def test_commits_read_by_delta_rs_and_its_commits_read_by_us(tmp_path) -> None:
    path = str(tmp_path / "t")
    table = TableLog.read(path)
    assert table.version == -1
    first = _file(path, [1, 2, 3])
    actions = [*table.create_actions(SCHEMA, [], {"delta.checkpointInterval": "1000"}),
               *file_actions([first], "app", 0)]
    assert table.commit(actions, "WRITE", {"mode": "Append"}, blind_append=True) == 0
    second = _file(path, [1, 4])
    table.commit(file_actions([second], "app", 1, removes=[Removed(first[0], first[2])]), "UPDATE", {}, False)
    dt = deltalake.DeltaTable(path)
    assert (dt.version(), _ids(path), dt.transaction_version("app")) == (1, [1, 4], 1)
    assert dt.protocol().min_reader_version == 1 and dt.protocol().min_writer_version == 2
    # delta-rs writes a version of its own: read it incrementally, and from scratch
    deltalake.write_deltalake(path, pa.Table.from_pylist([{"id": 9, "v": "x", "d": None, "img": None}],
                                                         schema=ARROW), mode="append")
    assert table.refresh() and table.version == 2
    assert len(table.files) == 2 and table.txn_version("app") == 1 and table.txn_version("other") == -1
    again = TableLog.read(path)
    assert (again.version, set(again.files), again.txns, again.columns()) == (
        2, set(table.files), {"app": 1}, [("id", "bigint"), ("v", "string"), ("d", "decimal(12,2)"),
                                          ("img", "struct<x:int,f:array<float>>")])


def test_a_checkpoint_written_by_delta_rs_is_read(tmp_path) -> None:
    path = str(tmp_path / "t")
    table = TableLog.read(path)
    table.commit([*table.create_actions(SCHEMA, [], {}), *file_actions([_file(path, [1])], "app", 0)],
                 "WRITE", {}, True)
    for batch in range(1, 5):
        table.commit(file_actions([_file(path, [batch + 1])], "app", batch), "WRITE", {}, True)
    deltalake.DeltaTable(path).create_checkpoint()
    table.commit(file_actions([_file(path, [99])], "app", 5), "WRITE", {}, True)
    for name in os.listdir(os.path.join(path, "_delta_log")):  # only the checkpoint and what follows it
        if name.endswith(".json") and int(name[:20]) < 4:
            os.unlink(os.path.join(path, "_delta_log", name))
    back = TableLog.read(path)
    assert (back.version, set(back.files), back.txns) == (5, set(table.files), {"app": 5})
    assert back.metadata["id"] == table.metadata["id"] and back.columns() == table.columns()
    assert _ids(path) == [1, 2, 3, 4, 5, 99]


def test_a_version_is_written_once_whoever_races_for_it(tmp_path) -> None:
    path = str(tmp_path / "t")
    seed = TableLog.read(path)
    seed.commit([*seed.create_actions(SCHEMA, [], {}), *file_actions([_file(path, [1])], "app", 0)], "WRITE", {},
                True)
    writers = [TableLog.read(path) for _ in range(8)]
    won, lost = [], []

    def write(table: TableLog, n: int) -> None:
        try:
            won.append(table.commit(file_actions([_file(path, [n])], f"w{n}", 0), "WRITE", {}, True))
        except CommitConflict as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=write, args=(t, n)) for n, t in enumerate(writers, start=10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won == [1] and len(lost) == 7 and all(m.startswith("Concurrent commit: version 1") for m in lost)
    assert len(_ids(path)) == 2 and not [n for n in os.listdir(os.path.join(path, "_delta_log")) if "tmp" in n]


def test_protocols_types_and_what_the_driver_may_write(tmp_path) -> None:
    assert table_protocol(SCHEMA) == {"minReaderVersion": 1, "minWriterVersion": 2}
    ntz = {"type": "struct", "fields": [{"name": "t", "type": "timestamp_ntz", "nullable": True, "metadata": {}}]}
    assert table_protocol(ntz)["readerFeatures"] == ["timestampNtz"]
    assert simple_type({"type": "map", "keyType": "string", "valueType": "short"}) == "map<string,smallint>"
    path = str(tmp_path / "t")
    table = TableLog.read(path)
    table.commit([*table.create_actions(SCHEMA, [], {}), *file_actions([_file(path, [1])], "app", 0)], "WRITE", {},
                 True)
    assert table.writable
    table.protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors", "rowTracking"]}
    assert not table.writable  # rows tracked by the JVM's writer: left to it
    table.protocol = {"minReaderVersion": 1, "minWriterVersion": 4}
    table.metadata = {**table.metadata, "configuration": {"delta.enableChangeDataFeed": "true"}}
    assert not table.writable
    table.metadata = {**table.metadata, "configuration": {"delta.appendOnly": "true"}}
    with pytest.raises(ValueError, match="append-only"):
        table.commit(file_actions([], "app", 1, removes=[Removed("x", 1)]), "UPDATE", {}, False)
    os.unlink(os.path.join(path, "_delta_log", f"{0:020d}.json"))
    with open(os.path.join(path, "_delta_log", f"{2:020d}.json"), "wb") as fh:
        fh.write(orjson.dumps({"txn": {"appId": "a", "version": 1}}) + b"\n")
    with pytest.raises(UnreadableLog, match="commit 0 is missing"):
        TableLog.read(path)


def test_the_checkpoint_the_driver_asks_for_is_read_back(tmp_path) -> None:
    from streaming_job.delta.commit import checkpoint

    path = str(tmp_path / "t")
    table = TableLog.read(path)
    table.commit([*table.create_actions(SCHEMA, [], {}), *file_actions([_file(path, [1])], "app", 0)], "WRITE", {},
                 True)
    table.commit(file_actions([_file(path, [2])], "app", 1), "WRITE", {}, True)
    checkpoint(path)
    assert os.path.exists(os.path.join(path, "_delta_log", "_last_checkpoint"))
    back = TableLog.read(path)
    assert (back.version, set(back.files), back.txns) == (1, set(table.files), {"app": 1})
    table.commit(file_actions([_file(path, [3])], "app", 2), "WRITE", {}, True)
    assert back.refresh() and back.version == 2 and not back.refresh()  # the next version, then nothing new


def test_a_blind_append_goes_on_over_another_writers_rows_but_not_over_its_schema_change(tmp_path) -> None:
    from streaming_job.delta.commit import LogCommit

    path = str(tmp_path / "t")
    seed = TableLog.read(path)
    seed.commit([*seed.create_actions(SCHEMA, [], {}), *file_actions([_file(path, [1])], "app", 0)], "WRITE", {},
                True)
    ours = LogCommit(None, TableLog.read(path), {})
    deltalake.write_deltalake(path, pa.Table.from_pylist([{"id": 2, "v": "x", "d": None, "img": None}],
                                                         schema=ARROW), mode="append")  # version 1, theirs
    assert ours.append([_file(path, [3])], "app", 1, []) == 2  # found version 1 taken: made again on top
    assert _ids(path) == [1, 2, 3] and deltalake.DeltaTable(path).transaction_version("app") == 1
    stale = LogCommit(None, TableLog.read(path), {})
    wider = ARROW.append(pa.field("extra", pa.string()))
    deltalake.write_deltalake(path, pa.Table.from_pylist([{"id": 4, "extra": "e"}], schema=wider), mode="append",
                              schema_mode="merge")  # version 3 adds a column
    with pytest.raises(CommitConflict, match=r"changed the metadata or protocol of .* while batch 2"):
        stale.append([_file(path, [5])], "app", 2, [])
    assert _ids(path) == [1, 2, 3, 4] and deltalake.DeltaTable(path).version() == 3
