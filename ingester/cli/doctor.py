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
    from ..daemon.preflight import FAIL, check_source, worst

    cfg = load_config(args.config, overrides(args))
    src, findings = check_source(cfg.source_url(), cfg.source.server_id)
    for finding in findings:
        print(finding)
    result = worst(findings)
    print(f"{'NOT READY' if result == FAIL else 'ready'}: {src}")
    return 1 if result == FAIL else 0
