"""What an Iceberg mirror's rewrite holds in the driver's memory as the mirror grows (streaming_job/iceberg/schema.py,
iceberg_statements.py; docs/LAND.md, "Schema changes"): a mirror of ``--rows`` rows (run_schema_rewrite.py's
table: id INT key, v VARCHAR, d DECIMAL(10,4), n INT, t DATETIME(6) and binlake's columns) rewritten by an ALTER
(``convert``: v to VARBINARY, d to DECIMAL(10,2)) and copied by a RENAME TABLE (Iceberg writes the rows anew), each
in a fresh process of its own: its peak RSS (getrusage) less its RSS once the table is open, and its seconds.

Side by side: ``--code DIR`` runs the same measurement on another checkout's streaming_job (e.g. a worktree of the
commit before the rewrite went by parts), in the same run, sizes interleaved. The report: results/rewrite-memory.md.

    .venv/bin/python bench/run_rewrite_memory.py --rows 1000000 5000000 --code /tmp/before
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "rewrite-memory.md"
PART = 500_000


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def make(lake: str, n: int) -> None:
    """The mirror of ``n`` rows, appended a part at a time (this process's memory is not measured)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from run_schema_rewrite import COLUMNS, rows

    from streaming_job.batch.keys import key_property
    from streaming_job.iceberg.tables import WantedTable, mirror_properties, mirror_schema
    from tests.harness.iceberg import local_format

    fmt = local_format(Path(lake), app_id="bench")
    schema = mirror_schema(COLUMNS)
    table = fmt.create(WantedTable("db", "t", schema, COLUMNS,
                                   lambda: mirror_properties(COLUMNS, key_property(["id"]), ["id"])))
    for start in range(0, n, PART):
        part = rows(min(PART, n - start))
        ids = part.column("id").to_numpy() + start
        import pyarrow as pa

        table.append(part.set_column(0, "id", pa.array(ids, pa.int32())).cast(schema))


def measure(code: str, lake: str, work: str) -> None:
    """One rewrite (``work``: convert, rename) by the streaming_job at ``code``; prints a JSON line."""
    sys.path.insert(0, code)
    import ingester  # noqa: F401  (both packages from ``code``, before run_schema_rewrite puts this checkout first)
    from streaming_job.iceberg.catalog import IcebergCatalog
    from streaming_job.iceberg.format import IcebergFormat
    from streaming_job.iceberg.schema import IcebergMirrorRewrite
    from streaming_job.iceberg.statements import IcebergStatementTables
    from streaming_job.statements.schema_alter import transform

    sys.path.insert(1, str(ROOT / "bench"))
    from run_schema_rewrite import META, plans

    assert Path(sys.modules["streaming_job"].__file__ or "").is_relative_to(code)

    fmt = IcebergFormat(IcebergCatalog(lake), "bench")
    tables = IcebergStatementTables(fmt)
    assert fmt.table("db", "t") is not None
    base = _rss_mib()
    start = time.monotonic()
    if work == "rename":
        tables.copy_mirror(("db", "t"), ("db", "t2"), {"binlake.statement": "00:0"}, 1)
        target = "t2"
    else:
        plan, values = plans()["convert"]
        IcebergMirrorRewrite(tables).rewrite_mirror("db", "t", plan.lake_columns, ["id"],
                                                    transform(plan, values, META), {"binlake.statement": "00:0"}, 1)
        target = "t"
    seconds = time.monotonic() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    fmt.forget("db", target)
    found = fmt.table("db", target)
    assert found is not None
    print(json.dumps({"seconds": seconds, "held_mib": peak - base, "base_mib": base,
                      "rows": int(found.current_snapshot().summary.additional_properties["total-records"])}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--code", help="another checkout to measure beside this one")
    parser.add_argument("--internal", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--make", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make:
        make(args.make[0], int(args.make[1]))
        return 0
    if args.internal:
        measure(*args.internal)
        return 0
    codes = {"this": str(ROOT), **({"before": args.code} if args.code else {})}
    results = []
    for n in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp) / "base"
            subprocess.run([sys.executable, __file__, "--make", str(base), str(n)], check=True)
            for work in ("convert", "rename"):
                for label, code in codes.items():
                    lake = Path(tmp) / f"{label}-{work}"
                    subprocess.run(["cp", "-r", str(base), str(lake)], check=True)
                    out = subprocess.run([sys.executable, __file__, "--internal", code, str(lake), work],
                                         check=True, capture_output=True, text=True).stdout
                    got = json.loads(out.strip().splitlines()[-1])
                    assert got["rows"] == n, got
                    results.append((n, work, label, got))
                    print(n, work, label, got, flush=True)
                    subprocess.run(["rm", "-rf", str(lake)], check=True)
    write_report(results, codes)
    return 0


def write_report(results: list, codes: dict[str, str]) -> None:
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=ROOT).stdout.strip()
    before = ""
    if "before" in codes:
        before = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=codes["before"]).stdout.strip()
    lines = ["# An Iceberg mirror's rewrite: the driver's memory as the mirror grows", "",
             f"`bench/run_rewrite_memory.py` at {revision}" + (f", side by side with {before}" if before else "")
             + " (2 cores, local disk; each rewrite a fresh process: its peak RSS less its RSS with the table open).",
             "", "| rows | statement | code | held MiB | seconds |", "|---:|---|---|---:|---:|"]
    for n, work, label, got in results:
        name = revision if label == "this" else before
        lines.append(f"| {n:,} | {work} | {name} | {got['held_mib']:,.0f} | {got['seconds']:.1f} |")
    RESULTS.write_text("\n".join(lines) + "\n")
    print(RESULTS.read_text())


if __name__ == "__main__":
    sys.exit(main())
