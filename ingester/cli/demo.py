"""``binlake demo``: placeholder until the devstack lands (generates and dumps a binlog)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the pipeline end to end on a local MariaDB")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("binlake demo: not ready yet")
