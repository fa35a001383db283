"""Iceberg mirrors: copy-on-write by pyiceberg from the driver (binlake's path) against Spark's MERGE INTO in
merge-on-read and in copy-on-write, for batches of updates of random existing keys of a large mirror.

Why: issue 25 asks for mirrors kept "merge-on-read (position or equality deletes) or copy-on-write, whichever
gives the better latency and read cost". pyiceberg 0.12 writes no delete files (its delete falls back to
copy-on-write), so merge-on-read means Spark's MERGE INTO with ``write.merge.mode=merge-on-read`` (position
delete files); this measures all three on the same rows, side by side in one run:

- a mirror of ``--rows`` rows (id BIGINT key, v BIGINT, note STRING, amount DECIMAL(12,2), ts TIMESTAMP), loaded
  in ten appends of key-ordered rows (as a mirror that landed in batches: ten data files);
- ``--batches`` batches of K distinct random existing keys each (K from ``--keys``), every key's row replaced
  (v = the batch's number): pyiceberg's delete of the keys (key_filter, the job's own) and append of the new
  rows in one transaction, as streaming_job/iceberg/format.py does; Spark's ``MERGE INTO ... WHEN MATCHED THEN
  UPDATE SET * WHEN NOT MATCHED THEN INSERT *`` from a cached source, per table property;
- then the read cost: a full scan of each table by Spark (count and sum of v) and by pyiceberg (to Arrow), and
  its data and delete files; every table's rows checked against the expected count and sum of v.

Spark's tables are in a Hadoop catalog of their own (pyiceberg reads them from their newest metadata file),
pyiceberg's in a SQLite catalog; local disk, Spark local[2].

    .venv/bin/python bench/run_iceberg_modes.py [--rows N] [--keys K ...] [--batches B]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from run_decode import _check, _cpu_model, _git_revision

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "iceberg-modes.md"
LOADS = 10
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64()), ("note", pa.string()),
                    ("amount", pa.decimal128(12, 2)), ("ts", pa.timestamp("us"))])
MODES = ("pyiceberg copy-on-write (binlake)", "Spark MERGE copy-on-write", "Spark MERGE merge-on-read")


@dataclass
class Outcome:
    mode: str
    keys: int
    batch_s: list[float]
    spark_scan_s: float
    pyiceberg_scan_s: float
    data_files: int
    delete_files: int


def rows(ids: pa.Array, v: int) -> pa.Table:
    """The mirror's rows of ``ids`` with ``v``: the same values on every side (the note and amount follow the id)."""
    n = len(ids)
    return pa.table({
        "id": ids,
        "v": pa.array([v] * n, pa.int64()),
        "note": pc.binary_join_element_wise("row ", pc.cast(ids, pa.string()), ""),
        "amount": pc.cast(pc.divide(pc.cast(pc.multiply(ids, 7), pa.float64()), 100.0), pa.decimal128(12, 2)),
        "ts": pa.array([datetime(2026, 1, 1)] * n, pa.timestamp("us")),
    }, schema=SCHEMA)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, nargs="+", default=[200, 2_000, 20_000])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    (BENCH_DIR / "data").mkdir(exist_ok=True)
    from streaming_job.land.job import build_session

    with tempfile.TemporaryDirectory(prefix="bl-icemodes-", dir=BENCH_DIR / "data") as root:
        warehouse = Path(root) / "spark"
        conf = {"spark.sql.catalog.bench": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.bench.type": "hadoop", "spark.sql.catalog.bench.warehouse": warehouse.as_uri(),
                "spark.sql.execution.arrow.pyspark.enabled": "true"}
        spark = build_session("local[2]", 2, "binlake-iceberg-modes", iceberg=conf)
        load = os.getloadavg()
        outcomes: list[Outcome] = []
        try:
            # Warm-up, not reported: the JVM compiles Spark's and Iceberg's paths on the first MERGEs and scans
            for mode in MODES[1:]:
                spark_run(spark, warehouse, mode, 20_000, batches(20_000, 100, 2), "warm")
            pyiceberg_run(Path(root) / "warm", 20_000, batches(20_000, 100, 2))
            for keys in args.keys:
                plan = batches(args.rows, keys, args.batches)
                outcomes.append(pyiceberg_run(Path(root) / f"py{keys}", args.rows, plan))
                for mode in MODES[1:]:
                    outcomes.append(spark_run(spark, warehouse, mode, args.rows, plan))
                print(f"{keys} keys a batch: " + ", ".join(f"{o.mode} {statistics.median(o.batch_s):.2f} s"
                                                            for o in outcomes[-3:]), file=sys.stderr, flush=True)
        finally:
            spark.stop()
    report = render(args, outcomes, load, os.getloadavg())
    args.output.write_text(report)
    print(report)
    return 0


def batches(n: int, keys: int, count: int) -> list[pa.Array]:
    """``count`` batches of ``keys`` distinct random existing keys (seeded: the same for every mode)."""
    rng = random.Random(keys)
    return [pa.array(sorted(rng.sample(range(n), keys)), pa.int64()) for _ in range(count)]


def expectation(n: int, plan: list[pa.Array]) -> tuple[int, int]:
    """Rows and sum of v after the batches: computed from the plan alone, not read from any table."""
    last: dict[int, int] = {}
    for number, ids in enumerate(plan, 1):
        for i in ids.to_pylist():
            last[i] = number
    return n, sum(last.values())


def pyiceberg_run(root: Path, n: int, plan: list[pa.Array]) -> Outcome:
    from pyiceberg.catalog.sql import SqlCatalog

    from streaming_job.iceberg.tables import key_filter

    root.mkdir()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=root.as_uri())
    catalog.create_namespace("b")
    table = catalog.create_table(("b", "t"), SCHEMA)
    for part in range(LOADS):
        table.append(rows(pa.array(range(part * n // LOADS, (part + 1) * n // LOADS), pa.int64()), 0))
    times = []
    for number, ids in enumerate(plan, 1):
        started = time.perf_counter()
        new = rows(ids, number)
        with table.transaction() as tx:
            tx.delete(key_filter(new.select(["id"]), ["id"]))
            tx.append(new)
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    scanned = table.scan().to_arrow()
    py_scan = time.perf_counter() - started
    expect(scanned, n, plan, "pyiceberg's table")
    data, deletes = files(table)
    spark_scan = spark_scan_of_metadata(table.metadata_location, n, plan)
    return Outcome(MODES[0], len(plan[0]), times, spark_scan, py_scan, data, deletes)


def spark_scan_of_metadata(location: str, n: int, plan: list[pa.Array]) -> float:
    """Spark's full scan of a pyiceberg table, through its metadata file (Iceberg's path-based load)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    assert spark is not None
    started = time.perf_counter()
    count, total = spark.read.format("iceberg").load(location).selectExpr("count(*)", "sum(v)").first()
    elapsed = time.perf_counter() - started
    _check((count, total) == expectation(n, plan), f"Spark read {count}, {total} of pyiceberg's table")
    return elapsed


def spark_run(spark: Any, warehouse: Path, mode: str, n: int, plan: list[pa.Array], tag: str = "") -> Outcome:
    from pyiceberg.table import StaticTable

    way = "merge-on-read" if mode.endswith("merge-on-read") else "copy-on-write"
    name = f"bench.b.t{tag}{len(plan[0])}_{way.replace('-', '_')}"
    spark.sql(f"CREATE TABLE {name} (id BIGINT NOT NULL, v BIGINT, note STRING, amount DECIMAL(12,2), "
              f"ts TIMESTAMP_NTZ) USING iceberg TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='{way}', "
              f"'write.update.mode'='{way}', 'write.delete.mode'='{way}')")
    for part in range(LOADS):
        ids = pa.array(range(part * n // LOADS, (part + 1) * n // LOADS), pa.int64())
        spark.createDataFrame(rows(ids, 0).to_pandas()).writeTo(name).append()
    times = []
    for number, ids in enumerate(plan, 1):
        source = spark.createDataFrame(rows(ids, number).to_pandas()).localCheckpoint()  # decoded, not timed
        source.createOrReplaceTempView("batch")
        started = time.perf_counter()
        spark.sql(f"MERGE INTO {name} t USING batch s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    count, total = spark.table(name).selectExpr("count(*)", "sum(v)").first()
    spark_scan = time.perf_counter() - started
    _check((count, total) == expectation(n, plan), f"{mode}: Spark read {count}, {total}")
    metadata = sorted((warehouse / "b" / name.rsplit(".", 1)[1] / "metadata").glob("v*.metadata.json"),
                      key=lambda p: int(p.name[1:].split(".")[0]))[-1]
    table = StaticTable.from_metadata(metadata.as_uri())
    started = time.perf_counter()
    scanned = table.scan().to_arrow()
    py_scan = time.perf_counter() - started
    expect(scanned, n, plan, f"{mode}, read by pyiceberg")
    data, deletes = files(table)
    return Outcome(mode, len(plan[0]), times, spark_scan, py_scan, data, deletes)


def expect(scanned: pa.Table, n: int, plan: list[pa.Array], what: str) -> None:
    got = (len(scanned), pc.sum(scanned.column("v")).as_py())
    _check(got == expectation(n, plan), f"{what}: {got} rows/sum(v), expected {expectation(n, plan)}")
    _check(len(pc.unique(scanned.column("id"))) == n, f"{what}: a key twice")
    sample = scanned.filter(pc.equal(scanned.column("id"), 12345))
    if len(sample):
        _check(sample.column("amount")[0].as_py() == Decimal("864.15"), f"{what}: amount of key 12345")


def files(table: Any) -> tuple[int, int]:
    """Data files and delete files the table's current snapshot reads."""
    tasks = list(table.scan().plan_files())
    return len(tasks), len({d.file_path for t in tasks for d in t.delete_files})


def render(args: argparse.Namespace, outcomes: list[Outcome], before: tuple[float, ...],
           after: tuple[float, ...]) -> str:
    import pyiceberg
    import pyspark

    from streaming_job.runtime.versions import ICEBERG_VERSION as ICEBERG

    lines = [
        "# Iceberg mirrors: copy-on-write (pyiceberg, binlake's path) and Spark's MERGE, copy-on-write and "
        "merge-on-read",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, {os.cpu_count()} CPUs, "
        f"Spark local[2] (pyspark {pyspark.__version__}, Iceberg {ICEBERG}), pyiceberg {pyiceberg.__version__}, "
        f"local disk. `bench/run_iceberg_modes.py --rows {args.rows} --batches {args.batches}`. Load average "
        f"before/after: {before[0]:.1f} / {after[0]:.1f}.",
        "",
        f"A mirror of {args.rows:,} rows (ten key-ordered data files), then {args.batches} batches, each replacing "
        "the rows of K distinct random existing keys. Batch time: pyiceberg's delete + append in one commit (the "
        "job's mirror write), or Spark's MERGE INTO (its source cached, not timed). Read: a full scan after the "
        "batches, by Spark (count, sum) and by pyiceberg (to Arrow). Every table's rows checked against the "
        "count and sum(v) the batches imply.",
        "",
        "| K keys a batch | mode | batch p50 | batch max | Spark scan | pyiceberg scan | data files | delete files |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for o in outcomes:
        lines.append(f"| {o.keys:,} | {o.mode} | {statistics.median(o.batch_s):.2f} s | {max(o.batch_s):.2f} s | "
                     f"{o.spark_scan_s:.2f} s | {o.pyiceberg_scan_s:.2f} s | {o.data_files} | {o.delete_files} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
