"""The land job's decoding step alone, in one process: records -> typed Arrow row changes.

The decode benchmark's workloads (bench/workloads.py) are cut into records as `binlake run` publishes
them (RecordBuilder, 900 kB records), then every record goes through `streaming_job.decode.decode.decode_record`
(what each Spark task runs): once with the C column walker (ingester/codec/_columns.c) and once with
the Python decoder it falls back to (the walker switched off, as BINLAKE_PURE_PYTHON=1 does), in the
same run. Reported: row changes per second and microseconds per row change, median of --repeat runs.

    .venv/bin/python bench/run_land_decode.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from workloads import load_or_generate

from ingester.codec import BinlogDecoder
from ingester.records import format as record_format
from ingester.records.builder import Record, RecordBuilder
from ingester.sources.binlog_file import binlog_frames
from streaming_job.decode import arrow_rows
from streaming_job.decode import decode as land_decode

RESULTS = Path(__file__).resolve().parent / "results" / "land-decode.md"


def records_of(path: Path) -> list[tuple[str, dict[str, bytes], bytes]]:
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(file=path.name, max_record_bytes=900_000)
    out = []
    for pos, raw in binlog_frames(path, dec):
        out += [r for r in builder.feed(dec, raw, pos) if isinstance(r, Record)]
    out += [r for r in builder.flush() if isinstance(r, Record)]
    return [(r.topic, dict(r.headers), r.value) for r in out]


def decode_all(records: list[tuple[str, dict[str, bytes], bytes]], walker: object) -> tuple[int, float]:
    """(row changes, seconds) of decoding every record, from cold caches (table maps, plans, shapes)."""
    arrow_rows.native = walker
    record_format._decoders.clear()
    land_decode._shapes.clear()
    started = time.perf_counter()
    rows = 0
    for offset, (topic, headers, value) in enumerate(records):
        out = land_decode._Out()
        land_decode.decode_record(out, topic, 0, offset, headers, value)
        assert all(r.kind == "row" for r in out.rows), out.rows[0].error
        rows += sum(r.rows or 0 for r in out.rows)
    return rows, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    walker = arrow_rows.native
    if walker is None:
        raise SystemExit("bench: the C column walker is not built (pip install -e . compiles it)")
    dataset = load_or_generate()
    lines = ["# Land decoding: C column walker vs the Python decoder", "",
             "| workload | row changes | records | C walker | Python | speed-up |", "|---|---|---|---|---|---|"]
    for name in ("bulk", "oltp"):
        workload = dataset.workloads[name]
        records = [r for f in dataset.paths(name) for r in records_of(f)]
        times: dict[str, list[float]] = {"walker": [], "python": []}
        for _ in range(args.repeat):
            for mode in ("walker", "python"):  # alternated, so both see the same machine
                rows, seconds = decode_all(records, walker if mode == "walker" else None)
                assert rows == workload.row_changes, (name, rows, workload.row_changes)
                times[mode].append(seconds)
        arrow_rows.native = walker
        c, py = statistics.median(times["walker"]), statistics.median(times["python"])
        n = workload.row_changes

        def cell(seconds: float, n: int = n) -> str:
            return f"{n / seconds:,.0f} rows/s ({seconds * 1e6 / n:.1f} us/row)"

        lines.append(f"| {name} | {n:,} | {len(records)} | {cell(c)} | {cell(py)} | **{py / c:.2f}x** |")
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip()
    lines += ["", f"Median of {args.repeat} runs each, alternated. Row changes decoded by `decode_record` "
              "(codec, lake conversions, the IPC stream each Spark task returns) in one process; bulk: 1,000-row "
              "statements on one table, oltp: single-row transactions on three tables (per-event costs dominate).",
              "", f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, revision {revision}",
              f"- machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, load average "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}",
              f"- Python {platform.python_version()}", "",
              "```sh", ".venv/bin/python bench/run_land_decode.py", "```", ""]
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
