"""The driver's Arrow tables handed to Spark through the lake's scratch files (lake/scratch.py), not as local data
inside the tasks: every lake type read back by Spark as the driver had it, a batch's record rows too; the files
gone once let go of, and what a stopped run left removed by the next."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

pytestmark = pytest.mark.integration
UTC = datetime.UTC
COLUMNS = [("t", "tinyint"), ("s", "smallint"), ("i", "int"), ("b", "bigint"), ("f", "float"), ("x", "double"),
           ("d", "date"), ("ts", "timestamp"), ("ntz", "timestamp_ntz"), ("txt", "string"), ("raw", "binary"),
           ("vec", "array<float>"), ("ok", "boolean"), ("dec", "decimal(38,10)")]


def _rows(n: int) -> list[tuple]:
    return [(i % 128 - 64, i % 30000, i, i * 10**9, i / 4, i / 3, datetime.date(1970 + i % 500, 1 + i % 12, 1 + i % 28),
             datetime.datetime(2026, 1, 1, tzinfo=UTC) + datetime.timedelta(microseconds=i * 7919),
             datetime.datetime(1, 1, 1) + datetime.timedelta(days=i % 700000, microseconds=i),
             f"ключ {i} 😀" * (i % 3), bytes([i % 256, 0, 255]) * (i % 4), [float(i), -0.5] if i % 5 else None,
             i % 2 == 0, Decimal(f"{i}.{i:010d}") if i % 7 else None)
            for i in range(n)]


def test_every_lake_type_reaches_spark_through_files_as_the_driver_had_it(spark, tmp_path, monkeypatch) -> None:
    from streaming_job.batch.mirror import candidate_schema, candidates_ddl
    from streaming_job.lake import scratch as scratch_module
    from streaming_job.lake.files import LakeFiles

    lake = tmp_path / "lake"
    scratch = scratch_module.Scratch(spark, str(lake), LakeFiles.on_disk())
    monkeypatch.setattr(scratch_module, "_FILE_BYTES", 64 << 10)  # several files
    schema = candidate_schema(COLUMNS)
    when = datetime.datetime(2026, 2, 3, tzinfo=UTC)
    rows = [(*r, i % 9 == 0, i.to_bytes(8, "big"), i, 1, when) for i, r in enumerate(_rows(20_000))]
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    assert table.nbytes >= scratch_module.LOCAL_BYTES  # files, not local data
    frame, directory = scratch.put(table, candidates_ddl(COLUMNS))
    assert directory is not None and len(list(Path(directory).iterdir())) > 2
    read = frame.toArrow()
    assert read.schema == table.schema
    assert read.sort_by("i").equals(table)
    scratch.remove(directory)
    assert not Path(directory).exists()
    # a small table goes as local data
    small, none = scratch.put(table.slice(0, 10), candidates_ddl(COLUMNS))
    assert none is None and small.toArrow().equals(table.slice(0, 10))
    # a run's scratch directory, left by a crash, is cleared by the next
    frame, directory = scratch.put(table, candidates_ddl(COLUMNS))
    scratch.clear()
    assert not (lake / scratch_module.SCRATCH).exists()


def test_a_batchs_record_rows_reach_spark_through_files(spark, tmp_path, monkeypatch) -> None:
    """A driver batch's table rows in Spark (DriverRows.frame: Spark's landing of a table past land.driver_rows),
    their files removed when the batch is released."""
    from streaming_job.batch.batch_rows import DriverBatch
    from streaming_job.decode.decode import RECORD_ARROW, RECORD_FIELDS
    from streaming_job.lake import scratch as scratch_module
    from streaming_job.lake.files import LakeFiles

    lake = tmp_path / "lake"
    scratch = scratch_module.Scratch(spark, str(lake), LakeFiles.on_disk())
    empty = {n: None for n, _, _ in RECORD_FIELDS}
    records = [{**empty, "kind": "row", "topic": "p.db.t", "partition": 0, "offset": i, "db": "db", "tbl": "t",
                "first_seq": i.to_bytes(8, "big"), "rows": 1, "data": bytes(range(i % 200))} for i in range(500)]
    for local in (True, False):  # 50 KB: local data; then through files
        if not local:
            monkeypatch.setattr(scratch_module, "LOCAL_BYTES", 0)
        batch = DriverBatch(scratch, pa.Table.from_pylist(records, schema=RECORD_ARROW))
        got = batch.table("db", "t").frame().orderBy("offset").toArrow()
        assert got.column("data").to_pylist() == [r["data"] for r in records]
        assert got.column("first_seq").to_pylist() == [r["first_seq"] for r in records]
        assert (lake / scratch_module.SCRATCH).exists() is not local
        batch.release()
        assert not any((lake / scratch_module.SCRATCH).glob("*"))
