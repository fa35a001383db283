"""What deletion vectors cost the readers of a Delta table (docs/LAND.md, "Deletion vectors"): full scans (count and
sum of a column) by Spark's Delta source and by delta-rs's query engine of one table in several shapes, its files with
no vector, with vectors deleting a small share of their rows, and with small files beside them; the shapes' scans
taken in turns in one warm Spark session (each shape's best turn after a warm-up turn).

The tables are written by Spark (files of consecutive key ranges, as binlake writes a mirror's), their vectors by
Spark's DELETE (what binlake's vectors are: the same descriptors and files, PROTOCOL.md).

    python bench/run_vector_reads.py [--rows 1000000,10000000] [--files 10] [--output bench/results/vector-reads.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from run_decode import _cpu_model, _git_revision

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "vector-reads.md"
TURNS = 5  # each shape's best of these, after a warm-up turn


class Shape(NamedTuple):
    """A table's shape: the share of its rows its vectors delete (0: no vector), and small files beside its own."""

    name: str
    deleted: float
    small_files: int


SHAPES = [Shape("compacted: no vector", 0, 0), Shape("vectors deleting 0.5%", 0.005, 0),
          Shape("vectors deleting 6%", 0.06, 0), Shape("no vector, 30 small files", 0, 30),
          Shape("vectors deleting 6%, 30 small files", 0.06, 30)]


def build(spark, path: Path, rows: int, files: int, shape: Shape) -> None:
    table = spark.range(rows).selectExpr("id", "CAST(id % 100 AS TINYINT) AS w", "id * 3 AS v",
                                         "concat('note', id) AS note")
    (table.repartitionByRange(files, "id").write.format("delta").option("delta.enableDeletionVectors", "true")
     .save(str(path)))
    if shape.deleted:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE abs(hash(id)) % 1000 < {round(shape.deleted * 1000)}")
    for n in range(shape.small_files):  # a batch's new rows each, 2,000 keys above the table's
        (spark.range(2000).selectExpr(f"{rows + n * 2000} + id AS id", "CAST(1 AS TINYINT) AS w", "id AS v",
                                      "'x' AS note")
         .coalesce(1).write.format("delta").mode("append").save(str(path)))


def scan_spark(spark, path: Path) -> float:
    """Seconds of a full scan (count and sum of column ``v``) by Spark's Delta source."""
    began = time.monotonic()
    spark.read.format("delta").load(str(path)).selectExpr("count(*)", "sum(v)").collect()
    return time.monotonic() - began


def scan_delta_rs(path: Path) -> tuple[int, float]:
    """(rows counted, seconds) of the same scan by delta-rs's query engine."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    began = time.monotonic()
    found = QueryBuilder().register("t", DeltaTable(str(path))).execute("SELECT count(*) AS n, sum(v) FROM t")
    rows = pa.table(found.read_all()).column("n")[0].as_py()
    return rows, time.monotonic() - began


def best_scans(spark, paths: list[Path], turns: int) -> dict[Path, tuple[float, float]]:
    """Each table's best (Spark, delta-rs) scan seconds of ``turns`` turns after a warm-up turn, the tables taken in
    turns in one session (a JVM's scans get faster as it warms up: all of one table's before the next's would favour
    the later ones)."""
    times: dict[Path, list[tuple[float, float]]] = {path: [] for path in paths}
    for _ in range(turns + 1):
        for path in paths:
            times[path].append((scan_spark(spark, path), scan_delta_rs(path)[1]))
    return {path: (min(t for t, _ in found[1:]), min(t for _, t in found[1:])) for path, found in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1000000,10000000", help="table sizes, comma-separated")
    parser.add_argument("--files", type=int, default=10, help="the table's own files (consecutive key ranges)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    from streaming_job.land.job import build_session

    spark = build_session("local[2]", 2, "binlake-bench-vector-reads")
    lines = ["# Deletion vectors: what they cost the readers", "",
             f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, "
             f"{os.cpu_count()} CPUs, local disk, Spark local[2] (delta-spark), deltalake (delta-rs). "
             "bench/run_vector_reads.py: a full scan (count and sum of a column) of one table written by Spark as "
             f"{args.files} files of consecutive key ranges, in each shape (vectors by Spark's DELETE of rows spread "
             "over every file; small files of 2,000 rows each); each shape's best of "
             f"{TURNS} turns, the shapes taken in turns in one warm session after a warm-up turn. Cost: against "
             "the compacted shape.", "",
             "| rows | shape | Spark | cost | delta-rs | cost |", "|---|---|---|---|---|---|"]
    try:
        for rows in (int(n) for n in args.rows.split(",")):
            (BENCH_DIR / "data").mkdir(exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="bl-vreads-", dir=BENCH_DIR / "data") as root:
                paths = {shape: Path(root) / f"t{i}" for i, shape in enumerate(SHAPES)}
                for shape, path in paths.items():
                    build(spark, path, rows, args.files, shape)
                best = best_scans(spark, list(paths.values()), TURNS)
                base = best[paths[SHAPES[0]]]
                for shape in SHAPES:
                    spark_s, rs_s = best[paths[shape]]
                    lines.append(f"| {rows:,} | {shape.name} | {spark_s:.3f} s | {spark_s / base[0]:.2f}x | "
                                 f"{rs_s:.3f} s | {rs_s / base[1]:.2f}x |")
                    print(lines[-1], flush=True)
    finally:
        spark.stop()
    report = "\n".join([*lines, ""])
    args.output.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
