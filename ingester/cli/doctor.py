"""``binlake doctor``: check that a server is ready to be replicated, and say what to change."""

from __future__ import annotations

import argparse

from ..config import load_config
from .run import overrides


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check a server's binlog settings and our privileges")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--source", metavar="URL")
    p.add_argument("--source-hosts", metavar="HOST:PORT,...", help="check these failover servers too")
    p.add_argument("--server-id", type=int)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..daemon.preflight import FAIL, Finding, check_source, worst
    from ..sources.errors import SourceUnreachable

    cfg = load_config(args.config, overrides(args))
    results = []
    for url in cfg.source_candidates():  # the URL's server and every failover server (source.hosts)
        try:
            src, findings = check_source(cfg.source_url(url), cfg.source.server_id)
        except SourceUnreachable as exc:
            src, findings = str(exc).split(": ", 1)[0], [Finding(FAIL, "connect", str(exc).split(": ", 1)[1])]
        for finding in findings:
            print(finding)
        results.append(worst(findings))
        print(f"{'NOT READY' if results[-1] == FAIL else 'ready'}: {src}")
    return 1 if FAIL in results else 0
