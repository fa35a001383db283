"""``binlake devstack up|down|status``: the local MariaDB and Kafka on fixed ports, kept running, and with
``--object-store`` an S3-compatible store (S3Proxy) with a bucket ``lake``.

The same classes the tests use, with persistent data directories under the binlake cache, so a
developer (or the README's demo) gets ``MYSQL_URL``, ``KAFKA_BOOTSTRAP`` and the store's ``AWS_*``
variables (its fixed development credentials) to point tools at.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

MYSQL_PORT = 3307
KAFKA_PORT = 9093
S3_PORT = 9094


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devstack", help="start/stop a local MariaDB and Kafka for development")
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("--dir", type=Path, help="data directory (default: $BINLAKE_CACHE/devstack)")
    p.add_argument("--mysql-port", type=int, default=MYSQL_PORT)
    p.add_argument("--kafka-port", type=int, default=KAFKA_PORT)
    p.add_argument("--object-store", action="store_true",
                   help="up: also an S3-compatible store (S3Proxy) with a bucket 'lake', for s3a:// lakes")
    p.add_argument("--s3-port", type=int, default=S3_PORT)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..devstack.kafka import KafkaBroker
    from ..devstack.mariadb import MariaDBServer
    from ..devstack.objectstore import ObjectStore
    from ..maven import default_cache_dir

    base = args.dir or Path(os.environ.get("BINLAKE_CACHE") or default_cache_dir()) / "devstack"
    base.mkdir(parents=True, exist_ok=True)
    mysql = MariaDBServer(datadir=base / "mariadb", port=args.mysql_port)
    kafka = KafkaBroker(datadir=base / "kafka", port=args.kafka_port)
    store = ObjectStore(datadir=base / "s3", port=args.s3_port)
    if args.action == "up":
        for service in (mysql, kafka, *((store,) if args.object_store else ())):
            if not service.is_running():
                service.start(detach=True)
        if args.object_store:
            store.create_bucket("lake")
    elif args.action == "down":
        for service in (store, kafka, mysql):
            if service.is_running():
                service.stop()
    for name, service, lines in (("mariadb", mysql, [f"MYSQL_URL={mysql.url}"]),
                                 ("kafka", kafka, [f"KAFKA_BOOTSTRAP={kafka.bootstrap}"]),
                                 ("object store", store, [f"{k}={v}" for k, v in store.environment().items()])):
        if service.is_running():
            print("\n".join(lines))
        elif service is not store or args.object_store:
            print(f"# {name}: stopped")
    return 0
