"""Large mirrors (docs/LAND.md, "Mirrors": deletion vectors): commit-to-mirror latency of random single-row UPDATEs
against Delta mirrors of 1,000,000 rows and more, kept by binlake with deletion vectors (`--deletion-vectors
always`) and with file rewrites (`never`), side by side in one run at each size; the bytes each mode wrote per
changed row, its live files, and the mirror's full-scan time afterwards (delta-rs's query engine and Spark),
beside a copy compacted by Delta itself (its read cost).

Each run: MariaDB -> `binlake run` -> Kafka -> `binlake land --trigger 1s` on this machine's 2 CPUs; the mirror
is landed first through the binlog (land_latency.run_latency's preload), then single-row UPDATEs of distinct keys
spread over the whole table (``--keys hot``: nine in ten on its newest tenth) at ``--rate`` for ``--duration`` s;
a row's latency is the commit time of the first mirror version holding its new value (delta-rs's time travel)
minus the time its UPDATE returned.

    python bench/run_big_tables.py [--rows 1000000,10000000] [--modes vectors,rewrite,merge] [--rate 2000]
        [--duration 60] [--keys spread|hot] [--key-type bigint|text|uuid|datetime]
        [--output bench/results/big-tables.md]

With ``--format iceberg`` the mirrors are Iceberg tables (the lake's default catalog) and ``vectors`` means
position delete files (`--deletion-vectors always`: iceberg/position_deletes.py), ``rewrite`` copy-on-write,
``merge`` Spark's MERGE INTO an Iceberg table in merge-on-read mode (bench/merge_job.py --format iceberg);
latency from pyiceberg's time travel; scans by pyiceberg and Spark (Iceberg's runtime), beside a compacted copy
(the mirror's rows written again as one append: no delete file); results in big-tables-iceberg.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from land_latency import KEY_TYPES, LatencyRun, hot, run_latency, spread
from land_shapes import Shape
from run_decode import _cpu_model, _git_revision
from run_vector_reads import best_scans, scan_delta_rs

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "big-tables.md"
# binlake land's --deletion-vectors of each of its modes; "merge": bench/merge_job.py, Spark's own MERGE of Debezium's
# change events into a Delta table with deletion vectors
MODES = {"vectors": "always", "rewrite": "never", "merge": None}
GOAL_P99_S = 2.0
KEYS = {"spread": spread, "hot": hot}  # which keys the UPDATEs change (land_latency)


@dataclass
class Quiet:
    """A mirror once quiet: its live data files (with delete files or deletion vectors), its full scans (by the
    format's other reader, pyiceberg or delta-rs, and Spark), what else it holds."""

    files: int
    with_deletes: int
    scan_reader: float
    scan_spark: float
    shape: str = ""


@dataclass
class LakeAfter:
    """What a run left in its mirror."""

    written: int  # bytes of data and deletion vector files written since the updates started
    files: int  # live data files
    vectored: int  # ... of them with a deletion vector
    rows: int
    scan_delta_rs: float  # seconds: a full scan (count and sum of a column) by delta-rs's query engine
    scan_spark: float  # ... by Spark (both: bench/run_vector_reads.best_scans, beside the compacted copy's)
    compacted_files: int  # live data files of a copy compacted by Delta itself (REORG ... APPLY (PURGE), OPTIMIZE)
    compacted_delta_rs: float  # seconds: the same scans of that copy
    compacted_spark: float
    shape: str = ""  # more of what the mirror holds (Iceberg: its live delete files and manifests)
    quiet: Quiet | None = None  # the mirror once its quiet compaction ended (run_latency's quiet)

    @property
    def read_cost(self) -> float:
        """The mirror's Spark scan against the compacted copy's (issue 39's goal: within 1.2x)."""
        return self.scan_spark / self.compacted_spark


def inspect_iceberg(lake: Path, started: float, at_end: int | None = None) -> LakeAfter:
    """The Iceberg mirror after a run: bytes of data and delete files written since ``started``, live data files
    (with delete files), and full scans (count and sum of ``v``) by pyiceberg and Spark, beside a compacted copy
    (the rows written again in one append) in the same catalog. ``at_end``: the snapshot the changes ended at, whose
    figures these are (Iceberg's time travel), and the current one's too (``quiet``: after its quiet compaction)."""
    import time

    import pyarrow.compute as pc

    from streaming_job.iceberg.catalog import IcebergCatalog
    from streaming_job.land.job import build_session

    where = IcebergCatalog(str(lake))
    catalog = where.open()
    table = catalog.load_table(("bench_lat", "t"))
    data = lake / "bench_lat" / "t" / "data"
    written = sum(f.stat().st_size for f in data.rglob("*.parquet") if f.stat().st_mtime >= started)
    snapshots = {"t": at_end, "quiet": None} if at_end is not None else {"t": None}

    def shape_of(snapshot_id: int | None) -> tuple[list, str]:
        tasks = list(table.scan(snapshot_id=snapshot_id).plan_files())
        snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
        manifests = snapshot.manifests(table.io) if snapshot is not None else []
        deletes = {d.file_path for t in tasks for d in t.delete_files}
        return tasks, f"{len(deletes)} live delete files, {len(manifests)} manifests in its snapshot"

    shapes = {name: shape_of(snapshot_id) for name, snapshot_id in snapshots.items()}
    rows = table.scan().to_arrow()
    copy = catalog.create_table(("bench_lat", "compacted"), table.schema())
    copy.append(rows)

    def scan_pyiceberg(name: str) -> float:
        begun = time.perf_counter()
        loaded = catalog.load_table(("bench_lat", "compacted" if name == "compacted" else "t"))
        found = loaded.scan(selected_fields=("v",), snapshot_id=snapshots.get(name)).to_arrow()
        assert len(found) == len(rows) and pc.sum(found.column("v")).as_py() is not None
        return time.perf_counter() - begun

    spark = build_session("local[2]", 2, "binlake-bench-big-tables", iceberg=where.spark_conf())

    def scan_spark(name: str) -> float:
        at = snapshots.get(name)
        source = "compacted" if name == "compacted" else "t" + (f" VERSION AS OF {at}" if at is not None else "")
        begun = time.perf_counter()
        found = spark.sql(f"SELECT count(*), sum(v) FROM binlake.bench_lat.{source}").collect()
        assert found[0][0] == len(rows)
        return time.perf_counter() - begun

    try:
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in [*snapshots, "compacted"]}
        for _ in range(_SCAN_TURNS + 1):  # a warm-up turn, the tables taken in turns
            for name in times:
                times[name].append((scan_spark(name), scan_pyiceberg(name)))
    finally:
        spark.stop()
    best = {name: (min(t for t, _ in found[1:]), min(t for _, t in found[1:])) for name, found in times.items()}
    tasks, shape = shapes["t"]
    quiet = None
    if "quiet" in shapes:
        quiet_tasks, quiet_shape = shapes["quiet"]
        quiet = Quiet(len(quiet_tasks), sum(1 for t in quiet_tasks if t.delete_files), best["quiet"][1],
                      best["quiet"][0], quiet_shape)
    return LakeAfter(written, len(tasks), sum(1 for t in tasks if t.delete_files), len(rows), best["t"][1],
                     best["t"][0], 1, best["compacted"][1], best["compacted"][0], shape, quiet)


def inspect(lake: Path, started: float, at_end: Path | None = None) -> LakeAfter:
    """The Delta mirror after a run, as inspect_iceberg's. ``at_end``: a copy of it as the changes ended, whose
    figures these are, and the mirror's current ones too (``quiet``: after its quiet compaction)."""
    from streaming_job.lake.delta_log import TableLog
    from streaming_job.land.job import build_session

    table = lake / "bench_lat" / "t"
    written = sum(f.stat().st_size for f in table.iterdir()
                  if f.is_file() and f.suffix in (".parquet", ".bin") and f.stat().st_mtime >= started)
    ended = at_end or table
    log = TableLog.read(str(ended))
    rows = log.rows()
    compacted = lake / "compacted"  # the mirror as Delta's own maintenance leaves it: no vector, no small file
    shutil.copytree(table, compacted)
    spark = build_session("local[2]", 2, "binlake-bench-big-tables")
    try:
        spark.sql(f"REORG TABLE delta.`{compacted}` APPLY (PURGE)")
        spark.sql(f"OPTIMIZE delta.`{compacted}`")
        for path in (ended, table, compacted):  # delta-rs counts the rows the log's statistics say
            assert scan_delta_rs(path)[0] == rows, (path, rows)
        best = best_scans(spark, list(dict.fromkeys([ended, compacted, table])), _SCAN_TURNS)
    finally:
        spark.stop()
    (scan_spark, scan_rs), (compacted_spark, compacted_rs) = best[ended], best[compacted]
    quiet = None
    if at_end is not None:
        now = TableLog.read(str(table))
        quiet = Quiet(len(now.files), _vectored(now), best[table][1], best[table][0])
    return LakeAfter(written, len(log.files), _vectored(log), rows, scan_rs, scan_spark,
                     len(TableLog.read(str(compacted)).files), compacted_rs, compacted_spark, quiet=quiet)


def _vectored(log: Any) -> int:
    return sum(1 for a in log.files.values() if a.get("deletionVector"))


_SCAN_TURNS = 9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1000000,10000000", help="mirror sizes, comma-separated")
    parser.add_argument("--modes", default="vectors,rewrite,merge", help="of " + ", ".join(MODES))
    parser.add_argument("--rate", type=float, default=2000, help="target UPDATEs a second")
    parser.add_argument("--duration", type=float, default=60, help="seconds of UPDATEs")
    parser.add_argument("--deletes", type=float, default=0.05,
                        help="share of the transactions that DELETE their key instead of updating it (every "
                             "round(1/share)-th; 0: none)")
    parser.add_argument("--keys", choices=sorted(KEYS), default="spread",
                        help="spread: distinct keys over the whole table; hot: nine in ten on its newest tenth")
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta", help="the lake's format")
    parser.add_argument("--key-type", choices=sorted(KEY_TYPES), default="bigint",
                        help="the table's key: BIGINT, an order number as text (16 characters), a UUID's text or a "
                             "DATETIME(6)")
    parser.add_argument("--quiet", type=float, default=45,
                        help="Iceberg: after the changes, the land job runs on until the mirror has no delete file "
                             "and no snapshot came for this many seconds (its quiet compaction: "
                             "land.quiet_compaction, 30 s), then the scans are taken of both (0: not waited)")
    parser.add_argument("--output", type=Path)
    parser.add_argument("--logs", type=Path, help="keep each run's land log here (land-<rows>-<mode>.latency.log)")
    args = parser.parse_args()
    iceberg = args.format == "iceberg"
    args.output = args.output or (RESULTS.with_name("big-tables-iceberg.md") if iceberg else RESULTS)
    sizes = [int(n) for n in args.rows.split(",")]
    modes = args.modes.split(",")
    results: dict[tuple[int, str], LatencyRun] = {}
    for rows in sizes:
        for mode in modes:
            vectors = MODES[mode]
            shape = Shape(land_args=["--deletion-vectors", vectors] if vectors else [])
            print(f"{rows:,} rows, {mode}: ...", flush=True)
            land_log = args.logs / f"land-{rows}-{mode}.log" if args.logs else None
            run = run_latency(args.rate, args.duration, shape, land_log, preload=rows,
                              inspect=inspect_iceberg if iceberg else inspect, merge_job=not vectors,
                              keys=KEYS[args.keys], lake_format=args.format, key_type=args.key_type,
                              deletes=args.deletes, quiet=args.quiet if mode != "merge" else 0.0)
            results[(rows, mode)] = run
            after: LakeAfter = run.inspected
            print(f"{rows:,} rows, {mode}: p50 {run.pct(0.5):.2f} s, p99 {run.pct(0.99):.2f} s, "
                  f"{after.written / run.changed:,.0f} bytes written per changed row", flush=True)
    report = _report(args, sizes, modes, results)
    args.output.write_text(report)
    print(report)
    return 0


_KEY_TYPE_TEXT = {"bigint": "BIGINT", "text": "an order number as text, VARCHAR(20), 16 characters",
                  "uuid": "a UUID's text, CHAR(36)", "datetime": "a DATETIME(6), a millisecond apart"}
_KEYS_TEXT = {"spread": "distinct keys spread over the whole mirror",
              "hot": "keys nine in ten of them in the mirror's newest tenth (the rest spread over all of it)"}


def _deleting(args: argparse.Namespace) -> str:
    if not args.deletes:
        return ""
    return (f" (every {round(1 / args.deletes)}th a DELETE of its key instead: checked by the mirror's rows "
            "against the server's, the latency is the UPDATEs')")


def _report(args: argparse.Namespace, sizes: list[int], modes: list[str],
            results: dict[tuple[int, str], LatencyRun]) -> str:
    if args.format == "iceberg":
        return _report_iceberg(args, sizes, modes, results)
    lines = [
        "# binlake land: large mirrors (deletion vectors against file rewrites)",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, {os.cpu_count()} CPUs, "
        "local lake, Delta.",
        "",
        f"Single-row autocommit UPDATEs of {_KEYS_TEXT[args.keys]} (key: {_KEY_TYPE_TEXT[args.key_type]})"
        f"{_deleting(args)}, target "
        f"{args.rate:,.0f}/s for {args.duration:.0f} s from 3 threads, through `binlake run` and `binlake land "
        "--trigger 1s` on the same 2 "
        "CPUs, after the mirror was landed through the binlog (bench/run_big_tables.py). Latency: the commit of the "
        "first mirror version holding a row's new value (delta-rs's time travel) minus the time its UPDATE "
        "returned. `vectors`: `--deletion-vectors always`; `rewrite`: `never` (the files holding a batch's keys "
        "rewritten, as before); `merge`: what users write instead, Debezium's JSON change events (`binlake run` with "
        "`kafka.format: debezium-json`) landed by a Spark foreachBatch MERGE of each batch's last change per key "
        "into a Delta table with deletion vectors (bench/merge_job.py). Written: data and deletion vector files "
        "since the UPDATEs started, per changed row. Scans: count and sum of a column over the whole mirror "
        "afterwards (each reader's best of five, the mirror's and the copy's scans taken in turns in one warm Spark "
        "session); the compacted copy: the mirror copied and "
        "compacted by Delta itself (`REORG TABLE ... APPLY (PURGE)`, then `OPTIMIZE`); read cost: the mirror's Spark "
        "scan over the copy's (goal: within 1.2x). With `--quiet`, the land job runs on after the changes until the "
        "mirror's quiet compaction (land.quiet_compaction) is done: the table's figures are the mirror's as the "
        "changes ended (a copy of it then), the quiet line's its current version's.",
        "",
        "| mirror rows | mode | achieved/s | p50 | p90 | p99 | max | bytes written per changed row | live files "
        "(with a vector) | scan, delta-rs | scan, Spark | compacted copy: files, scan delta-rs, scan Spark "
        "| read cost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += _table_rows(sizes, modes, results, compacted_files=True)
    lines.append("")
    if "vectors" in modes:
        for rows in sizes:
            vectors = results[(rows, "vectors")]
            line = f"- {rows:,} rows: vectors p99 {vectors.pct(0.99):.2f} s"
            for other in ("rewrite", "merge"):
                if other in modes:
                    found = results[(rows, other)]
                    ratio = found.pct(0.99) / vectors.pct(0.99)
                    line += f"; {other} p99 {found.pct(0.99):.2f} s: vectors {ratio:.1f}x faster"
            line += f"; goal p99 <= {GOAL_P99_S:.0f} s {'met' if vectors.pct(0.99) <= GOAL_P99_S else 'not met'}"
            cost = vectors.inspected.read_cost
            line += f"; read cost {cost:.2f}x a compacted copy's (goal <= 1.2x: {'met' if cost <= 1.2 else 'not met'})."
            lines.append(line)
            lines += _quiet_line(rows, vectors, "live files ({} with a deletion vector)", "delta-rs")
        smallest, largest = results[(sizes[0], "vectors")], results[(sizes[-1], "vectors")]
        if len(sizes) > 1:
            growth = largest.pct(0.99) / smallest.pct(0.99)
            lines.append(f"- Growth: the {sizes[-1]:,}-row mirror's p99 is {growth:.2f}x the {sizes[0]:,}-row one's "
                         f"(goal <= 1.2x: {'met' if growth <= 1.2 else 'not met'}).")
        lines.append("")
    return "\n".join(lines)


def _report_iceberg(args: argparse.Namespace, sizes: list[int], modes: list[str],
                    results: dict[tuple[int, str], LatencyRun]) -> str:
    lines = [
        "# binlake land: large Iceberg mirrors (position deletes against copy-on-write)",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, {os.cpu_count()} CPUs, "
        "local lake, Iceberg (the lake's default catalog: Iceberg's Hadoop catalog), pyiceberg "
        f"{_version('pyiceberg')}.",
        "",
        f"Single-row autocommit UPDATEs of {_KEYS_TEXT[args.keys]}{_deleting(args)}, target {args.rate:,.0f}/s for "
        f"{args.duration:.0f} s from 3 threads, through `binlake run` and `binlake land --format iceberg --trigger 1s` "
        "on the same 2 CPUs, after the mirror was landed through the binlog (bench/run_big_tables.py --format "
        "iceberg). Latency: the commit of the first mirror snapshot holding a row's new value (pyiceberg's time "
        "travel) minus the time its UPDATE returned. `vectors`: `--deletion-vectors always` (a batch's replaced rows "
        "deleted by position in a delete file of its own, iceberg/position_deletes.py); `rewrite`: `never` "
        "(copy-on-write: the data files holding a batch's keys rewritten); `merge`: what users write instead, "
        "Debezium's JSON change events landed by a Spark foreachBatch MERGE INTO of each batch's last change per key "
        "into an Iceberg table in merge-on-read mode (position deletes; bench/merge_job.py --format iceberg). "
        "Written: data and delete files since the "
        "UPDATEs started, per changed row. Scans: count and sum of a column over the whole mirror afterwards "
        f"(each reader's best of {_SCAN_TURNS} after a warm-up, the mirror's and the copy's taken in turns); the "
        "compacted copy: the mirror's rows written again as one append (no delete file); read cost: the mirror's "
        "Spark scan over the copy's (goal: within 1.2x).",
        "",
        "| mirror rows | mode | achieved/s | p50 | p90 | p99 | max | bytes written per changed row | live data files "
        "(with delete files) | scan, pyiceberg | scan, Spark | compacted copy: scan pyiceberg, scan Spark "
        "| read cost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += _table_rows(sizes, modes, results, compacted_files=False)
    lines.append("")
    if "vectors" in modes:
        for rows in sizes:
            vectors = results[(rows, "vectors")]
            line = f"- {rows:,} rows: position deletes p99 {vectors.pct(0.99):.2f} s"
            for other, said in (("rewrite", "copy-on-write"), ("merge", "Spark's MERGE")):
                if other in modes:
                    found = results[(rows, other)]
                    line += (f"; {said} p99 {found.pct(0.99):.2f} s: position deletes "
                             f"{found.pct(0.99) / vectors.pct(0.99):.1f}x faster")
            line += f"; goal p99 <= {GOAL_P99_S:.0f} s {'met' if vectors.pct(0.99) <= GOAL_P99_S else 'not met'}"
            cost = vectors.inspected.read_cost
            line += f"; read cost {cost:.2f}x a compacted copy's (goal <= 1.2x: {'met' if cost <= 1.2 else 'not met'})"
            shape = vectors.inspected.shape
            lines.append(line + (f"; the mirror: {shape}." if shape else "."))
            lines += _quiet_line(rows, vectors, "live data files ({} with delete files)", "pyiceberg")
        lines.append("")
    return "\n".join(lines)


def _quiet_line(rows: int, run: LatencyRun, files: str, reader: str) -> list[str]:
    """The report's line of a run's mirror once quiet (none without it): ``files`` of its live files (the count of
    those with deletes in its braces), scanned by Spark and ``reader``."""
    quiet: Quiet | None = run.inspected.quiet
    if quiet is None:
        return []
    cost = quiet.scan_spark / run.inspected.compacted_spark
    return [f"- {rows:,} rows, quiet: its quiet compaction (land.quiet_compaction) ended {run.tidied:.0f} s after the "
            f"changes: {quiet.files} {files.format(quiet.with_deletes)}{', ' + quiet.shape if quiet.shape else ''}; "
            f"scan {reader} {quiet.scan_reader:.2f} s, Spark {quiet.scan_spark:.2f} s: read cost {cost:.2f}x (goal "
            f"<= 1.2x: {'met' if cost <= 1.2 else 'not met'})."]


def _table_rows(sizes: list[int], modes: list[str], results: dict[tuple[int, str], LatencyRun],
                compacted_files: bool) -> list[str]:
    """The report's table rows, a run each (``compacted_files``: the compacted copy's live files too)."""
    lines = []
    for rows in sizes:
        for mode in modes:
            run = results[(rows, mode)]
            after: LakeAfter = run.inspected
            copy = f"{after.compacted_files}, " if compacted_files else ""
            lines.append(f"| {rows:,} | {mode} | {run.achieved:,.0f} | {run.pct(0.5):.2f} s | {run.pct(0.9):.2f} s | "
                         f"{run.pct(0.99):.2f} s | {run.latencies[-1]:.2f} s | "
                         f"{after.written / run.changed:,.0f} | {after.files} ({after.vectored}) | "
                         f"{after.scan_delta_rs:.2f} s | {after.scan_spark:.2f} s | {copy}"
                         f"{after.compacted_delta_rs:.2f} s, {after.compacted_spark:.2f} s | {after.read_cost:.2f}x |")
    return lines


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    raise SystemExit(main())
