"""A compaction that batches overtook (iceberg/moved.py), read by Iceberg's Java reader: the rows that position
deletes committed while it ran delete in the files it rewrites are deleted in its new files by a delete file of the
compaction's own, in its ``replace`` snapshot (the new files' sequence number: the spec says a position delete
applies to data files of its sequence number and older). Spark reads the table as pyiceberg does and as the dict
kept aside says, after each of three compactions overtaken by batches of spread updates, deletes and re-inserts."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from streaming_job.batch.small_files import MERGE_SHARE
from streaming_job.iceberg.maintenance import IcebergMaintenance
from streaming_job.iceberg.position_deletes import locate, stage_batch
from streaming_job.iceberg.tables import WantedTable
from streaming_job.iceberg.upkeep import copy_of
from tests.harness.iceberg import local_format
from tests.harness.land import lake_frame

pytestmark = pytest.mark.integration

_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
_ROWS = 3000  # the mirror's first three files' rows each


def _batch(table: Any, rows: dict[int, str], keys: list[int], tag: str, rnd: random.Random) -> None:
    """One merge-on-read batch of ``keys`` (about a third deleted, the rest set to ``tag``), and ``rows`` after it."""
    deleted = {k for k in keys if k in rows and rnd.random() < 0.3}
    upserts = sorted(set(keys) - deleted)
    located = locate(table, pa.table({"id": pa.array(sorted(set(keys)), pa.int64())}), ["id"])
    after = pa.table({"id": pa.array(upserts, pa.int64()), "v": [f"{tag}-{k}" for k in upserts]}, schema=_SCHEMA)
    with table.transaction() as tx:
        stage_batch(tx, table, after, located, {"binlake.batch-id": tag}, ["id"])
    for k in deleted:
        del rows[k]
    rows.update({k: f"{tag}-{k}" for k in upserts})


def test_deletes_a_compaction_followed_onto_its_new_files_read_alike_in_spark(spark, tmp_path: Path) -> None:
    table = local_format(tmp_path).ready(WantedTable("db", "t", _SCHEMA, [], dict))
    for start in range(0, 3 * _ROWS, _ROWS):
        table.append(pa.table({"id": pa.array(range(start, start + _ROWS), pa.int64()),
                               "v": [f"v0-{i}" for i in range(start, start + _ROWS)]}, schema=_SCHEMA))
    rows = {i: f"v0-{i}" for i in range(3 * _ROWS)}
    smallest = min(t.file.file_size_in_bytes for t in table.scan().plan_files())
    compactor = IcebergMaintenance(compact_files=4, small_file_bytes=smallest)._compactor()
    rnd = random.Random(7)
    _batch(table, rows, list(range(int(_ROWS * MERGE_SHARE) + 20)), "b0", rnd)  # the first file: rewritten
    moved = 0
    for n in range(1, 4):
        for i in range(4):
            _batch(table, rows, rnd.sample(range(3 * _ROWS + 500), 30), f"b{n}.{i}", rnd)
        prepared = compactor.prepare(("db", "t"), copy_of(table), ["id"])
        assert prepared is not None and prepared.data
        for i in range(2):  # batches commit while it runs: keys everywhere, those of the files it rewrites too
            _batch(table, rows, [*rnd.sample(sorted(rows), 60), 3 * _ROWS + n], f"c{n}.{i}", rnd)
        assert compactor.finish(("db", "t"), table, prepared, {"binlake.batch-id": f"c{n}.1"})
        assert table.current_snapshot().summary.operation.value == "replace"
        moved += sum(1 for t in table.scan().plan_files()
                     for d in t.delete_files if f"{prepared.write_id}-moved" in d.file_path)
        read = table.scan().to_arrow()
        assert dict(zip(read.column("id").to_pylist(), read.column("v").to_pylist(), strict=True)) == rows
        assert len(read) == len(rows)
        frame = lake_frame(spark, tmp_path, "db", "t", "iceberg")
        assert {r.id: r.v for r in frame.collect()} == rows and frame.count() == len(rows), f"round {n} (Spark)"
    assert moved >= 3  # data files read with a compaction's own delete file of rows deleted while it ran
