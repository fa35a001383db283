"""``binlake verify``: ask the running daemon to compare chosen tables' mirrors with the source, chunk by
chunk at the same point of the stream on both sides (a signal table row; the land job records each
chunk's result in ``<lake>/_verify``). ``--wait`` follows the run to its end and sums it up; the exit
status is 1 when a chunk differs."""

from __future__ import annotations

import argparse
import json
import logging
import time
import uuid
from typing import Any

from ..config import Config, load_config
from ..sources.errors import ReplicationError
from .land import add_lake_arguments, verify_results

log = logging.getLogger("binlake.verify")
_SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="compare mirrors with the source, online, chunk by chunk")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/CONFIGURATION.md)")
    p.add_argument("--source", metavar="URL", help="mysql://USER[:PASSWORD]@HOST:PORT")
    p.add_argument("--signal-table", metavar="DB.TABLE", help="the daemon's snapshot_signal_table")
    p.add_argument("--tables", metavar="DB.T1,DB.T2",
                   help="the tables to verify (default: every table of the source the filters accept)")
    add_lake_arguments(p)
    p.add_argument("--wait", action="store_true",
                   help="follow the run until every chunk's result has landed; exit 1 if any differs")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="with --wait: give up (exit 2) after this long")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import pymysql

    from ..daemon.resnapshot import SIGNAL_DDL, VERIFY, quoted, signal
    from ..sources.replication import SourceURL
    from .logs import setup_logging

    overrides: dict[str, Any] = {}
    if args.source:
        overrides["source"] = {"url": args.source}
    if args.signal_table:
        overrides["snapshot_signal_table"] = args.signal_table
    land = {k: getattr(args, k) for k in ("lake", "checkpoint", "s3_endpoint", "s3_path_style", "format",
                                          "iceberg_catalog") if getattr(args, k, None) is not None}
    if land:
        overrides["land"] = land
    cfg = load_config(args.config, overrides)
    if not cfg.snapshot_signal_table:
        raise ReplicationError("binlake verify: no signal table (--signal-table or snapshot_signal_table)")
    run_id = uuid.uuid4().hex[:12]
    try:
        conn = SourceURL.parse(cfg.source_url()).connect(charset="utf8mb4", autocommit=True)
        try:
            with conn.cursor() as cur:
                tables = _tables(cur, cfg, args.tables)
                cur.execute(SIGNAL_DDL.format(quoted(cfg.snapshot_signal_table)))
                skipped_before = set(_skip_reports(cur, cfg))
                estimate = _estimate(cur, tables)
                signal(cur, cfg.snapshot_signal_table, VERIFY, {"run": run_id, "tables": tables})
        finally:
            conn.close()
    except pymysql.err.MySQLError as exc:
        raise ReplicationError(f"binlake verify: {cfg.snapshot_signal_table}: {exc.args[-1]}") from None
    print(f"verify run {run_id} of {', '.join(tables)} requested in {cfg.snapshot_signal_table}", flush=True)
    if not args.wait:
        return 0
    setup_logging(cfg, "verify")
    return wait(cfg, run_id, tables, args.timeout, skipped_before, estimate)


def _tables(cur: Any, cfg: Config, listed: str | None) -> list[str]:
    if listed is not None:
        tables = [t.strip() for t in listed.split(",") if t.strip()]
        if not tables or any(t.count(".") != 1 for t in tables):
            raise ReplicationError(f"binlake verify: --tables must list db.table names, got {listed!r}")
        return tables
    cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' "
                "ORDER BY 1, 2")
    tables = [f"{db}.{t}" for db, t in cur.fetchall() if db.lower() not in _SYSTEM and cfg.filters.accepts(db, t)
              and f"{db}.{t}" != cfg.snapshot_signal_table]
    if not tables:
        raise ReplicationError("binlake verify: the source has no table the filters accept")
    return tables


def wait(cfg: Config, run_id: str, tables: list[str], timeout: float | None, seen: set[str], estimate: int = 0,
         poll: float = 1.0) -> int:
    """Follow the run's results in the lake (``<lake>/_verify``; an Iceberg lake's ``_binlake.verify``) until
    each table's last chunk has one: a progress line, a line per differing chunk, and a summary. 1 if any chunk
    differs, 2 on timeout."""
    from ..daemon.progress import Progress

    if not cfg.land.lake:
        raise ReplicationError("binlake verify --wait: the results are in the lake: give --lake (or land.lake)")
    found = verify_results(cfg)
    deadline = None if timeout is None else time.monotonic() + timeout
    left = set(tables)
    shown: set[tuple[str, int]] = set()
    results: list[dict[str, Any]] = []
    progress = Progress(estimate, 0, what="verify")
    try:
        while left:
            results = found.read(run_id)
            for r in results:
                if (r["table"], r["chunk"]) in shown:
                    continue
                shown.add((r["table"], r["chunk"]))
                if not r["match"]:
                    progress.finish()
                    progress.shown = False
                    log.warning("%s", describe(r))
                if r["high"] is None:
                    left.discard(r["table"])
            left -= _skipped(cfg, left, seen)
            progress.update(sum(r["source_rows"] for r in results), _waiting_for(left))
            if left:
                if deadline is not None and time.monotonic() > deadline:
                    progress.finish()
                    log.error("verify run %s: no result yet for the rest of %s after %.0f s (is `binlake land` "
                              "running on %s, and is its format %s, as --format says?)", run_id,
                              ", ".join(sorted(left)), timeout, cfg.land.lake, cfg.land.format)
                    return 2
                time.sleep(poll)
    finally:
        progress.finish()
    differ = [r for r in results if not r["match"]]
    rows = sum(r["source_rows"] for r in results)
    log.info("verify run %s: %d chunks of %d tables, %s rows compared: %s", run_id, len(results), len(tables),
             f"{rows:,}", "every chunk matches" if not differ else
             f"{len(differ)} chunks differ ({', '.join(sorted({r['table'] for r in differ}))}); `binlake snapshot "
             "--tables` reads them again")
    return 1 if differ else 0


def _waiting_for(left: set[str], named: int = 3) -> str:
    """The tables whose results are still to come, for the progress line: a few names, then how many more."""
    names = sorted(left)
    if len(names) <= named:
        return ", ".join(names) or "done"
    return f"{', '.join(names[:named])} and {len(names) - named} more tables"


def _estimate(cur: Any, tables: list[str]) -> int:
    """The server's estimate of the tables' rows (information_schema), for the progress line."""
    total = 0
    for name in tables:
        db, _, table = name.partition(".")
        cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (db, table))
        row = cur.fetchone()
        total += int(row[0] or 0) if row else 0
    return total


def describe(r: dict[str, Any]) -> str:
    """One line for a differing chunk: its table, key range, counts and first keys."""
    return (f"{r['table']} keys ({r['low'] or 'start'} .. {r['high'] or 'end'}]: {r['missing']} missing, "
            f"{r['extra']} extra, {r['different']} different in the lake; first: {r['keys']}")


def _skip_reports(cur: Any, cfg: Config) -> dict[str, dict[str, Any]]:
    """The daemon's reports of tables it cannot read, by id (the signal table's skipped rows)."""
    from ..daemon.resnapshot import SKIPPED, quoted

    cur.execute(f"SELECT id, data FROM {quoted(cfg.snapshot_signal_table or '')} WHERE type = %s", (SKIPPED,))
    return {i: json.loads(data) for i, data in cur.fetchall()}


def _skipped(cfg: Config, tables: set[str], seen: set[str]) -> set[str]:
    """Tables of ``tables`` the daemon reported it cannot read since the run was asked for."""
    if not tables:
        return set()
    from ..sources.replication import SourceURL

    conn = SourceURL.parse(cfg.source_url()).connect(charset="utf8mb4", autocommit=True)
    try:
        with conn.cursor() as cur:
            reports = _skip_reports(cur, cfg)
    finally:
        conn.close()
    found = set()
    for i, report in reports.items():
        if i not in seen and report.get("table") in tables:
            seen.add(i)
            log.warning("verify of %s: skipped, the table %s", report["table"], report.get("reason"))
            found.add(report["table"])
    return found
