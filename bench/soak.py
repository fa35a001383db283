"""Soak: the whole pipeline under a steady mixed workload for N minutes, sampled every few seconds.

    .venv/bin/python -m bench.soak [--minutes 30] [--rate 1000] [--every 5] [--dir DIR] [--out docs/soak]

MariaDB, Kafka, ``binlake run`` and ``binlake land --trigger 1s`` as in bench/faults.py (no faults); the
workload of the fault rounds from several processes, paced to --rate transactions per second. Every
--every seconds a sample: the daemon's and the landing job's RSS (their whole process groups: the
landing job's JVM and Python workers included), the daemon's lag (``binlake_lag_seconds``: now minus the
newest binlog event read) and the landing job's (``binlake_land_lag_seconds``: now minus the newest
commit landed in the mirrors as of the last micro-batch, plus the time since that batch ended), and the
throughput of the source, the daemon (transactions committed to Kafka) and the landing job (row changes
landed). Writes OUT.csv and OUT.svg (a plot by our own few lines, no plotting library), prints a
summary; at the end waits until everything has landed and compares every mirror with the server's
SELECT."""

from __future__ import annotations

import argparse
import csv
import logging
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.faults import CATCH_UP_TIMEOUT, DB, FaultError, Stack, Workload, check_mirrors
from ingester.cli.demo import _metrics
from ingester.devstack.mariadb import MariaDBServer

PER_WORKER = 250.0  # transactions/s one workload process paces reliably
FIELDS = ("t_s", "source_tps", "daemon_tps", "land_rows_per_s", "daemon_rss_mib", "land_rss_mib", "daemon_lag_s",
          "land_lag_s")


def _worker(port: int, datadir: str, seed: int, rate: float, key_base: int, stop: Any, done: Any) -> None:
    """One workload process (spawned): its own key range, its count of committed transactions in done."""
    workload = Workload(MariaDBServer(datadir=datadir, port=port), seed, rate, key_base, record=False)
    workload.start()
    while not stop.wait(1.0):
        done.value = workload.ledger.transactions
    workload.stop()
    done.value = workload.ledger.transactions


def group_rss_mib(pgid: int) -> float:
    """Resident memory of every process in a process group (ours start their own), in MiB."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # fields after the command: state, ppid, pgrp, ..., rss is the 22nd
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total / 2**20


@dataclass
class Verdict:
    """The soak's figures and whether they pass the bounds."""

    summary: str
    problems: list[str]


def judge(rows: list[dict[str, float]], max_rss_growth: float, max_daemon_lag: float, max_land_lag: float) -> Verdict:
    """Memory must not grow over the second half (the mean of its last quarter against its first quarter's,
    within max_rss_growth as a fraction) and the lags must stay bounded over the second half."""
    n = len(rows)
    q2, q4 = rows[n // 2 : 3 * n // 4], rows[3 * n // 4 :]
    second = rows[n // 2 :]
    problems, parts = [], []
    for who in ("daemon", "land"):
        mid = statistics.fmean(r[f"{who}_rss_mib"] for r in q2)
        end = statistics.fmean(r[f"{who}_rss_mib"] for r in q4)
        parts.append(f"{who} RSS {mid:,.0f} -> {end:,.0f} MiB")
        if end > mid * (1 + max_rss_growth):
            problems.append(f"{who} RSS grew {end / mid - 1:.0%} over the second half (bound {max_rss_growth:.0%})")
    for who, bound in (("daemon", max_daemon_lag), ("land", max_land_lag)):
        worst = max(r[f"{who}_lag_s"] for r in second)
        parts.append(f"{who} lag max {worst:.1f} s")
        if worst > bound:
            problems.append(f"{who} lag reached {worst:.1f} s in the second half (bound {bound:g} s)")
    rates = ", ".join(f"{k} {statistics.fmean(r[k] for r in rows[1:]):,.0f}/s"
                      for k in ("source_tps", "daemon_tps", "land_rows_per_s"))
    return Verdict(f"{n} samples: {', '.join(parts)} (second half); mean {rates}", problems)


def write_svg(rows: list[dict[str, float]], path: Path, title: str) -> None:
    """Three panels sharing the time axis: RSS, lag, throughput."""
    panels = [("RSS (MiB)", ("daemon_rss_mib", "land_rss_mib")), ("lag (s)", ("daemon_lag_s", "land_lag_s")),
              ("throughput (/s)", ("source_tps", "daemon_tps", "land_rows_per_s"))]
    colors = ("#1f77b4", "#d62728", "#2ca02c")
    width, height, left, right, top, gap = 900, 190, 70, 20, 40, 40
    total = top + len(panels) * (height + gap)
    t_max = max((r["t_s"] for r in rows), default=1.0) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" font-family="sans-serif" '
           'font-size="12">', f'<rect width="{width}" height="{total}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="15">{title}</text>']
    for i, (label, keys) in enumerate(panels):
        y0 = top + i * (height + gap)
        y_max = _nice(max((r[k] for r in rows for k in keys), default=1.0))
        plot_w = width - left - right

        def xy(t: float, v: float, y0: int = y0, y_max: float = y_max, plot_w: int = plot_w) -> str:
            return f"{left + plot_w * t / t_max:.1f},{y0 + height - height * v / y_max:.1f}"

        out.append(f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{height}" fill="none" stroke="#999"/>')
        for frac in (0, 0.5, 1):
            y = y0 + height - height * frac
            out.append(f'<text x="{left - 6}" y="{y + 4:.0f}" text-anchor="end">{y_max * frac:,.0f}</text>')
            out.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.0f}" y2="{y:.0f}" stroke="#eee"/>')
        out.append(f'<text x="{left}" y="{y0 - 6}">{label}</text>')
        for j, key in enumerate(keys):
            points = " ".join(xy(r["t_s"], r[key]) for r in rows)
            out.append(f'<polyline fill="none" stroke="{colors[j]}" stroke-width="1.5" points="{points}"/>')
            out.append(f'<text x="{left + 160 + 170 * j}" y="{y0 - 6}" fill="{colors[j]}">{key}</text>')
    y_axis = top + len(panels) * (height + gap) - gap + 16
    for frac in (0, 0.25, 0.5, 0.75, 1):
        out.append(f'<text x="{left + (width - left - right) * frac:.0f}" y="{y_axis}" text-anchor="middle">'
                   f'{t_max * frac / 60:.1f} min</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def _nice(v: float) -> float:
    """The next 1, 2 or 5 times a power of ten at or above v: round axis maxima."""
    if v <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(v))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= v)


def run_soak(base: Path, minutes: float, rate: float, every: float = 5.0, out: Path | None = None,
             seed: int = 1, say: Any = print) -> tuple[list[dict[str, float]], str]:
    """Run the soak in base; returns the samples and the mirror check's result ('' when equal; the mirrors read
    by delta-rs: bench/faults.check_mirrors)."""
    stack = Stack(base)
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    workers: list[tuple[Any, Any]] = []
    rows: list[dict[str, float]] = []
    try:
        stack.start()
        say(f"soak: {minutes:g} min at {rate:g} tx/s, a sample every {every:g} s, in {base}; waiting for the "
            "landing query's first batch ...")
        # A first row in each table, so the query has topics and its first (slow) batch is behind us.
        for sql in ("INSERT INTO acct VALUES (1, 'warm-up', 0, 0)", "INSERT INTO ledger VALUES (1, 1, 0, NULL)",
                    "INSERT INTO pairs VALUES (1, 'w', 0)"):
            stack.server.execute(sql.replace("INTO ", f"INTO {DB}.", 1))
        deadline = time.monotonic() + CATCH_UP_TIMEOUT
        while not (stack.checkpoint / "commits").is_dir() or not any((stack.checkpoint / "commits").iterdir()):
            stack._wait_step(deadline, "binlake land did not start")
        n = max(1, math.ceil(rate / PER_WORKER))
        for k in range(n):
            done = ctx.Value("q", 0)
            proc = ctx.Process(target=_worker, args=(stack.server.port, str(stack.server.datadir), seed + k, rate / n,
                                                     (k + 1) * 10**8, stop, done), daemon=True)
            proc.start()
            workers.append((proc, done))
        started = last_t = time.monotonic()
        last = (0, 0.0, 0.0)
        # The landing job's lag gauge is set when a micro-batch ends: between batches the real lag grows
        # by the time since, which a sample adds (a batch seen ending between two samples counts from
        # the second); before the first batch after the warm-up, it is the time since the first commit.
        last_batches, batch_seen = _metrics(stack.land_port).get("binlake_land_batches_total", 0.0), started
        while (now := time.monotonic()) - started < minutes * 60:
            time.sleep(max(0.0, every - (time.monotonic() - last_t)))
            stack.check_alive()
            now = time.monotonic()
            d, land = _metrics(stack.daemon_port), _metrics(stack.land_port)
            counts = (sum(done.value for _, done in workers), d.get("binlake_transactions_total", 0.0),
                      land.get("binlake_land_rows_total", 0.0))
            dt = now - last_t
            if (batches := land.get("binlake_land_batches_total", 0.0)) != last_batches:
                last_batches, batch_seen = batches, now
            assert stack.daemon is not None and stack.land is not None
            row = {"t_s": now - started, "source_tps": (counts[0] - last[0]) / dt,
                   "daemon_tps": (counts[1] - last[1]) / dt, "land_rows_per_s": (counts[2] - last[2]) / dt,
                   "daemon_rss_mib": group_rss_mib(stack.daemon.pid), "land_rss_mib": group_rss_mib(stack.land.pid),
                   "daemon_lag_s": d.get("binlake_lag_seconds", 0.0),
                   "land_lag_s": (land.get("binlake_land_lag_seconds", 0.0) if batch_seen > started else 0.0)
                   + now - batch_seen}
            rows.append(row)
            last, last_t = counts, now
            say("  " + ", ".join(f"{k} {v:,.1f}" for k, v in row.items()))
        stop.set()
        for proc, _ in workers:
            proc.join(60)
        say("soak: workload stopped; waiting until everything has landed ...")
        stack.wait_caught_up(time.monotonic() + CATCH_UP_TIMEOUT)
        mirror_rows, problems = check_mirrors(stack)
        mirrors = "; ".join(problems)
        say(f"soak: mirrors == SELECT ({mirror_rows:,} rows)" if not problems else f"soak: MIRRORS DIFFER: {mirrors}")
    finally:
        stop.set()
        for proc, _ in workers:
            if proc.is_alive():
                proc.terminate()
        stack.stop()
        if out is not None and rows:
            with out.with_suffix(".csv").open("w", newline="") as f:
                writer = csv.DictWriter(f, FIELDS)
                writer.writeheader()
                writer.writerows({k: f"{v:.2f}" for k, v in r.items()} for r in rows)
            write_svg(rows, out.with_suffix(".svg"), f"binlake soak: {minutes:g} min at {rate:g} tx/s")
    return rows, mirrors


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="how long the workload runs (default 30)")
    p.add_argument("--rate", type=float, default=1000.0, help="workload transactions per second (default 1000)")
    p.add_argument("--every", type=float, default=5.0, help="seconds between samples (default 5)")
    p.add_argument("--dir", type=Path, help="servers' data, lake and logs (default: a new temporary directory)")
    p.add_argument("--out", type=Path, default=Path("docs/soak"), help="writes OUT.csv and OUT.svg (default docs/soak)")
    p.add_argument("--max-rss-growth", type=float, default=0.2, help="bound of RSS growth over the second half")
    p.add_argument("--max-daemon-lag", type=float, default=10.0, help="bound of the daemon's lag (s)")
    p.add_argument("--max-land-lag", type=float, default=120.0, help="bound of the landing job's lag (s)")
    args = p.parse_args(argv)
    logging.getLogger("kafka").setLevel(logging.ERROR)
    base = (args.dir or Path(tempfile.mkdtemp(prefix="binlake-soak-"))).absolute()
    base.mkdir(parents=True, exist_ok=True)
    try:
        rows, mirrors = run_soak(base, args.minutes, args.rate, args.every, args.out,
                                 say=lambda s: print(s, flush=True))
    except FaultError as exc:
        print(f"soak: error: {exc}", file=sys.stderr)
        return 1
    verdict = judge(rows, args.max_rss_growth, args.max_daemon_lag, args.max_land_lag)
    print(f"soak: {verdict.summary}")
    for problem in verdict.problems + ([mirrors] if mirrors else []):
        print(f"soak: FAILED: {problem}")
    print(f"soak: wrote {args.out.with_suffix('.csv')} and {args.out.with_suffix('.svg')}")
    return 1 if verdict.problems or mirrors else 0


if __name__ == "__main__":
    sys.exit(main())
