"""``binlake snapshot``: ask the running daemon to re-snapshot chosen tables (a signal table row)."""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

from ..config import load_config
from ..sources.errors import ReplicationError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help="re-snapshot chosen tables while the daemon keeps streaming")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/CONFIGURATION.md)")
    p.add_argument("--source", metavar="URL", help="mysql://USER[:PASSWORD]@HOST:PORT")
    p.add_argument("--signal-table", metavar="DB.TABLE", help="the daemon's snapshot_signal_table")
    p.add_argument("--tables", metavar="DB.T1,DB.T2", required=True, help="the tables to read again")
    p.add_argument("--replace", action="store_true",
                   help="replace the tables' rows in the lake: consumers drop them at the signal (a reload entry) and "
                        "the re-snapshot makes them again, so rows the source no longer has go too")
    p.add_argument("--wait", action="store_true",
                   help="show the daemon's progress (rows read / estimated, rate, ETA) until every table is read")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import pymysql

    from ..daemon.resnapshot import EXECUTE, SIGNAL_DDL, quoted, signal
    from ..sources.replication import SourceURL
    from .logs import setup_logging

    overrides: dict = {}
    if args.source:
        overrides["source"] = {"url": args.source}
    if args.signal_table:
        overrides["snapshot_signal_table"] = args.signal_table
    cfg = load_config(args.config, overrides)
    if not cfg.snapshot_signal_table:
        raise ReplicationError("binlake snapshot: no signal table (--signal-table or snapshot_signal_table)")
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if not tables or any(t.count(".") != 1 for t in tables):
        raise ReplicationError(f"binlake snapshot: --tables must list db.table names, got {args.tables!r}")
    try:
        conn = SourceURL.parse(cfg.source_url()).connect(charset="utf8mb4", autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(SIGNAL_DDL.format(quoted(cfg.snapshot_signal_table)))
                seen = {i for i, _, _ in _reports(cur, cfg.snapshot_signal_table)}
                request: dict[str, Any] = {"tables": tables, **({"replace": True} if args.replace else {})}
                signal_id = signal(cur, cfg.snapshot_signal_table, EXECUTE, request)
                print(f"signal {signal_id}: re-snapshot of {', '.join(tables)} requested in "
                      f"{cfg.snapshot_signal_table}", flush=True)
                if args.wait:
                    setup_logging(cfg, "snapshot")
                    wait(cur, cfg.snapshot_signal_table, tables, seen)
        finally:
            conn.close()
    except pymysql.err.MySQLError as exc:
        raise ReplicationError(f"binlake snapshot: {cfg.snapshot_signal_table}: {exc.args[-1]}") from None
    return 0


def _reports(cur: Any, signal_table: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The daemon's reports in the signal table: high watermarks (progress) and skipped tables."""
    from ..daemon.resnapshot import HIGH, SKIPPED, quoted

    cur.execute(f"SELECT id, type, data FROM {quoted(signal_table)} WHERE type IN (%s, %s)", (HIGH, SKIPPED))
    out = []
    for signal_id, kind, data in cur.fetchall():
        try:
            report = json.loads(data)
        except (TypeError, ValueError):
            report = {}
        out.append((signal_id, kind, report if isinstance(report, dict) else {}))
    return out


def wait(cur: Any, signal_table: str, tables: list[str], seen: set[str], poll: float = 0.5) -> None:
    """Follow the daemon's reports on ``tables`` (those not in ``seen``) until each is read or skipped:
    a progress line on a terminal, a log line every 10 s otherwise, and one line per table at its end."""
    from ..daemon.progress import Progress
    from ..daemon.resnapshot import SKIPPED

    log = logging.getLogger("binlake.snapshot")
    left = list(tables)
    rows = dict.fromkeys(tables, 0)
    estimates = dict.fromkeys(tables, 0)
    progress = Progress(0, 0)
    try:
        while left:
            for signal_id, kind, report in _reports(cur, signal_table):
                table = report.get("table")
                if signal_id in seen or table not in left:
                    continue
                seen.add(signal_id)
                if kind == SKIPPED:
                    left.remove(table)
                    log.warning("re-snapshot of %s: skipped, the table %s", table, report.get("reason"))
                    continue
                rows[table] = max(rows[table], int(report.get("rows", 0)))
                estimates[table] = int(report.get("estimate", 0))
                if report.get("last"):
                    left.remove(table)
                    progress.finish()
                    progress.shown = False
                    log.info("re-snapshot of %s: every row read (%s); the daemon publishes the last chunk when its "
                             "stream reaches the chunk's high watermark", table, f"{rows[table]:,}")
            progress.estimate = sum(estimates.values())
            progress.update(sum(rows.values()), "re-snapshot of " + ", ".join(left or tables))
            if left:
                time.sleep(poll)
    finally:
        progress.finish()
    log.info("%s", progress.line(sum(rows.values()), "re-snapshot of " + ", ".join(tables)))
