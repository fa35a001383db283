"""``binlake doctor``: check that a server is ready to be replicated, and say what to change."""

from __future__ import annotations

import argparse

from ..config import load_config
from .run import overrides


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check a server's binlog settings and our privileges")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--source", metavar="URL")
    p.add_argument("--server-id", type=int)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import pymysql

    from ..daemon.preflight import FAIL, run_checks, worst
    from ..sources.replication import ReplicationError, SourceURL

    cfg = load_config(args.config, overrides(args))
    src = SourceURL.parse(cfg.source_url())
    try:
        conn = pymysql.connect(host=src.host, port=src.port, user=src.user, password=src.password,
                               connect_timeout=10)
    except pymysql.err.MySQLError as exc:
        raise ReplicationError(f"{src}: cannot connect: {exc.args[-1] if exc.args else exc}") from None
    with conn:
        findings = run_checks(conn, cfg.source.server_id)
    for finding in findings:
        print(finding)
    result = worst(findings)
    print(f"{'NOT READY' if result == FAIL else 'ready'}: {src}")
    return 1 if result == FAIL else 0
