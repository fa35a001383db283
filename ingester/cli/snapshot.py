"""``binlake snapshot``: ask the running daemon to re-snapshot chosen tables (a signal table row)."""

from __future__ import annotations

import argparse

from ..config import load_config
from ..sources.errors import ReplicationError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help="re-snapshot chosen tables while the daemon keeps streaming")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (see README)")
    p.add_argument("--source", metavar="URL", help="mysql://USER[:PASSWORD]@HOST:PORT")
    p.add_argument("--signal-table", metavar="DB.TABLE", help="the daemon's snapshot_signal_table")
    p.add_argument("--tables", metavar="DB.T1,DB.T2", required=True, help="the tables to read again")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import pymysql

    from ..daemon.resnapshot import SIGNAL_DDL, quoted, request
    from ..sources.replication import SourceURL

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
                signal_id = request(cur, cfg.snapshot_signal_table, tables)
        finally:
            conn.close()
    except pymysql.err.MySQLError as exc:
        raise ReplicationError(f"binlake snapshot: {cfg.snapshot_signal_table}: {exc.args[-1]}") from None
    print(f"signal {signal_id}: re-snapshot of {', '.join(tables)} requested in {cfg.snapshot_signal_table}")
    return 0
