"""``binlake devstack up|down|status``: the local MariaDB and Kafka on fixed ports, kept running.

The same classes the tests use, with persistent data directories under the binlake cache, so a
developer (or the README's demo) gets ``MYSQL_URL`` and ``KAFKA_BOOTSTRAP`` to point tools at.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

MYSQL_PORT = 3307
KAFKA_PORT = 9093


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devstack", help="start/stop a local MariaDB and Kafka for development")
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("--dir", type=Path, help="data directory (default: $BINLAKE_CACHE/devstack)")
    p.add_argument("--mysql-port", type=int, default=MYSQL_PORT)
    p.add_argument("--kafka-port", type=int, default=KAFKA_PORT)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..devstack.kafka import KafkaBroker
    from ..devstack.mariadb import MariaDBServer
    from ..devstack.maven import default_cache_dir

    base = args.dir or Path(os.environ.get("BINLAKE_CACHE") or default_cache_dir()) / "devstack"
    base.mkdir(parents=True, exist_ok=True)
    mysql = MariaDBServer(datadir=base / "mariadb", port=args.mysql_port)
    kafka = KafkaBroker(datadir=base / "kafka", port=args.kafka_port)
    if args.action == "up":
        for service in (mysql, kafka):
            if not service.is_running():
                service.start(detach=True)
    elif args.action == "down":
        for service in (kafka, mysql):
            if service.is_running():
                service.stop()
    for name, service, line in (("mariadb", mysql, f"MYSQL_URL={mysql.url}"),
                                ("kafka", kafka, f"KAFKA_BOOTSTRAP={kafka.bootstrap}")):
        state = "running" if service.is_running() else "stopped"
        print(line if state == "running" else f"# {name}: {state}")
    return 0
