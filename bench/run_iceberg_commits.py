"""The cost of one Iceberg commit as a table's snapshots grow (issue 39): pyiceberg's own transaction and SQL
catalog beside the job's (streaming_job/iceberg/transactions.py: metadata staged without pyiceberg's deep copies;
its SQL and Hadoop catalogs), in one run, without Spark or servers.

Each side appends a one-row table to its own table (SQLite catalog, local files; pyiceberg's fast append, a
manifest more each commit, on both sides), one commit after another; at each ``--at`` count of snapshots the mean
of the last ``--window`` commits. A job landing a table every second keeps about 3,600 snapshots of it at the
default land.iceberg_snapshot_retention (1 hour).

    .venv/bin/python bench/run_iceberg_commits.py [--at 10,250,500,1000] [--window 20] [--output FILE]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from run_decode import _cpu_model, _git_revision

from streaming_job.iceberg.catalog import IcebergCatalog
from streaming_job.iceberg.transactions import transaction

RESULTS = Path(__file__).resolve().parent / "results" / "iceberg-commits.md"
_ROW = pa.table({"id": pa.array([1], pa.int64())})


def _commits(table: Any, begin: Any, at: list[int], window: int) -> dict[int, float]:
    """Seconds per commit (mean of the last ``window``) at each of ``at``'s snapshot counts."""
    out: dict[int, float] = {}
    times: list[float] = []
    for n in range(1, max(at) + 1):
        started = time.perf_counter()
        with begin(table) as tx:
            tx.append(_ROW)
        times.append(time.perf_counter() - started)
        if n in at:
            out[n] = sum(times[-window:]) / len(times[-window:])
            print(f"  {n:,} snapshots: {out[n] * 1000:.0f} ms", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--at", default="10,250,500,1000")
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    at = sorted(int(x) for x in args.at.split(","))
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        plain = SqlCatalog("plain", uri=f"sqlite:///{root}/plain.db", warehouse=(root / "plain").as_uri())
        ours = IcebergCatalog(str(root / "ours"), f"sqlite:///{root}/ours.db").open()
        results = {}
        for name, cat, begin in (("pyiceberg", plain, lambda t: t.transaction()), ("binlake", ours, transaction)):
            print(name, flush=True)
            cat.create_namespace("db")
            table = cat.create_table("db.t", _ROW.schema)
            results[name] = _commits(table, begin, at, args.window)
    lines = ["# One Iceberg commit as a table's snapshots grow", "",
             f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, local files, SQLite "
             "catalog (bench/run_iceberg_commits.py). One-row appends (pyiceberg's fast append: a manifest more "
             f"each), one commit after another; mean of the last {args.window} commits at each count.", "",
             "| snapshots | pyiceberg's transaction and catalog | binlake's (transactions.py) | ratio |",
             "|---|---|---|---|"]
    for n in at:
        theirs, mine = results["pyiceberg"][n], results["binlake"][n]
        lines.append(f"| {n:,} | {theirs * 1000:.0f} ms | {mine * 1000:.0f} ms | **{theirs / mine:.1f}x** |")
    args.output.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
