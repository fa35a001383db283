"""iceberg/planning.py: a mirror's plan with its manifests' entries and delete files' positions kept between batches
is pyiceberg's own plan (the same data files, each with the same delete files, whole table and a key range), a
plan reads only the manifests committed since the last one, and batches located with what is kept read back
(pyiceberg's scan, applying the position deletes) as a dict kept aside, with a budget that keeps all and one that
keeps nothing."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.manifest import ManifestFile

from streaming_job.iceberg.planning import KeptManifests
from streaming_job.iceberg.position_deletes import locate, stage_batch
from streaming_job.iceberg.tables import WantedTable
from tests.harness.iceberg import local_format

_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}-{i}" for i in ids]}, schema=_SCHEMA)


def _plan(tasks: Any) -> dict[str, list[str]]:
    return {t.file.file_path: sorted(d.file_path for d in t.delete_files) for t in tasks}


@pytest.mark.parametrize("budget", [1 << 30, 1], ids=["kept", "nothing-kept"])
def test_kept_plans_are_pyicebergs_and_read_only_new_manifests(tmp_path: Any, monkeypatch: Any, budget: int) -> None:
    table = local_format(tmp_path).ready(WantedTable("db", "t", _SCHEMA, [], dict))
    for start in range(0, 1200, 300):
        table.append(_rows(list(range(start, start + 300)), "v0"))
    expected = {r["id"]: r["v"] for r in table.scan().to_arrow().to_pylist()}
    read: list[str] = []
    fetch = ManifestFile.fetch_manifest_entry

    def counted(self: ManifestFile, io: Any, discard_deleted: bool = True) -> Any:
        read.append(self.manifest_path)
        return fetch(self, io, discard_deleted)

    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", counted)
    kept, seen = KeptManifests(budget), set()
    rnd = random.Random(41)
    for batch_id in range(1, 6):
        manifests = {m.manifest_path for m in table.current_snapshot().manifests(table.io)}
        read.clear()
        plan = kept.plan(table, AlwaysTrue())
        if budget > 1:  # the manifests committed since the last plan, each once
            assert sorted(read) == sorted(manifests - seen)
        else:
            assert sorted(read) == sorted(manifests)
        seen = manifests
        assert _plan(plan) == _plan(table.scan().plan_files())
        ranged = And(GreaterThanOrEqual("id", 250), LessThanOrEqual("id", 640))
        assert _plan(kept.plan(table, ranged)) == _plan(table.scan(row_filter=ranged).plan_files())

        keys = sorted({5, 650} | set(rnd.sample(range(0, 1300), 60)))
        deleted = [k for k in keys if k in expected and k != 5 and rnd.random() < 0.3]
        upserts = _rows([k for k in keys if k not in deleted], f"b{batch_id}")
        located = locate(table, pa.table({"id": pa.array(keys, pa.int64())}), ["id"], manifests=kept)
        assert located.rows == len([k for k in keys if k in expected])  # each live key once, at its newest row
        with table.transaction() as tx:
            stage_batch(tx, table, upserts, located, {"binlake.batch-id": str(batch_id)}, ["id"])
        for k in deleted:
            del expected[k]
        expected.update(zip(upserts.column("id").to_pylist(), upserts.column("v").to_pylist(), strict=True))
        assert {r["id"]: r["v"] for r in table.scan().to_arrow().to_pylist()} == expected
    # a file's live positions, searched delete file by delete file: the rows pyiceberg's read of it gives
    from pyiceberg.io.pyarrow import ArrowScan

    for task in kept.plan(table, AlwaysTrue()):
        every = np.arange(task.file.record_count, dtype=np.int64)
        live = kept.live(table.io, task.file.file_path, task.delete_files, every)
        rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table([task])
        assert len(live) == len(rows)
        assert live.tolist() == np.setdiff1d(every, kept.deleted(table.io, task.file.file_path,
                                                                 task.delete_files)).tolist()
    assert any(t.delete_files for t in kept.plan(table, AlwaysTrue()))
