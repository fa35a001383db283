"""Memory growth: `binlake run`'s peak resident memory (VmHWM) as one binlog transaction, or a stream of small
ones, grows 1x, 2x, 4x, in every kafka.format (bench/README.md).

A private MariaDB and Kafka broker (and an Apicurio registry for debezium-avro). For each multiple m of
`--rows` and `--transactions`: one transaction inserting m x rows into a table of the bulk workload's shape,
then m x transactions single-row autocommit INSERTs; after each, `binlake run --exit-at-end` reads it from its
first byte in each format, its VmHWM sampled every 0.2 s. Writes bench/results/memory-growth.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from run_daemon import run_daemon
from run_decode import BENCH_DIR, _check, _cpu_model, _git_revision

from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer
from ingester.devstack.registry import SchemaRegistry

RESULTS = BENCH_DIR / "results" / "memory-growth.md"
# (label, kafka.format, provide_transaction_metadata)
FORMATS = {"binlake": ("binlake", False), "debezium-json": ("debezium-json", False),
           "debezium-avro": ("debezium-avro", False), "debezium-json+tx": ("debezium-json", True)}
_OPTIONS = {"sync_binlog": 0, "innodb_flush_log_at_trx_commit": 0, "innodb_buffer_pool_size": "256M",
            "innodb_log_file_size": "512M", "max_binlog_size": "1G", "binlog_annotate_row_events": "OFF"}
_TABLE = """CREATE TABLE bench_mem.{name} (id INT NOT NULL PRIMARY KEY, customer_id BIGINT NOT NULL,
    name VARCHAR(64) NOT NULL, amount DECIMAL(12,2) NOT NULL, created_at DATETIME(6) NOT NULL, score DOUBLE,
    status TINYINT NOT NULL, note TEXT)"""
# a row of the bulk workload's shape from a number n (the rows differ; deterministic)
_ROW = ("{n}, {n} * 7919 % 1000000000000, CONCAT('customer ', {n}), ({n} * 37 % 10000000) / 100, "
        "TIMESTAMP'2026-01-01 00:00:00' + INTERVAL {n} SECOND, {n} / 7, {n} % 8, "
        "REPEAT(CHAR(97 + {n} % 26), 9 + {n} % 7)")


@dataclass
class Run:
    workload: str  # "transaction" (one of `rows` rows) or "transactions" (`rows` single-row ones)
    multiple: int
    rows: int
    binlog_mb: float
    label: str
    seconds: float
    hwm_mib: float


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the 1x transaction")
    parser.add_argument("--transactions", type=int, default=100_000, help="single-row transactions of 1x")
    parser.add_argument("--multiples", default="1,2,4")
    parser.add_argument("--formats", default=",".join(FORMATS), help=f"a comma-separated subset of {list(FORMATS)}")
    parser.add_argument("--no-write", action="store_true", help="print the results instead of writing them")
    args = parser.parse_args()
    multiples = [int(m) for m in args.multiples.split(",")]
    labels = args.formats.split(",")
    _check(all(label in FORMATS for label in labels), f"--formats: one of {list(FORMATS)}")
    runs: list[Run] = []
    with KafkaBroker() as broker, MariaDBServer(options=_OPTIONS) as server, \
            (SchemaRegistry() if "debezium-avro" in labels else _Nothing()) as registry:
        version = server.execute("SELECT VERSION()")[0][0]
        server.execute("CREATE DATABASE bench_mem CHARACTER SET utf8mb4")
        with server.connect("bench_mem") as conn, conn.cursor() as cur:
            cur.execute(_TABLE.format(name="big"))
            cur.execute(_TABLE.format(name="small"))
            cur.execute("CREATE PROCEDURE singles(first INT, n INT) BEGIN DECLARE i INT DEFAULT first; "
                        f"WHILE i < first + n DO INSERT INTO small VALUES ({_ROW.format(n='i')}); SET i = i + 1; "
                        "END WHILE; END")
        next_id = 1
        for m in multiples:
            for workload, count in (("transaction", args.rows * m), ("transactions", args.transactions * m)):
                server.flush_logs()
                start = server.current_binlog_position()
                with server.connect("bench_mem") as conn, conn.cursor() as cur:
                    if workload == "transaction":  # one statement, one transaction
                        cur.execute(f"INSERT INTO big SELECT {_ROW.format(n='seq')} "
                                    f"FROM seq_{next_id}_to_{next_id + count - 1}")
                    else:  # autocommit: each INSERT of the procedure is a transaction
                        cur.execute("CALL singles(%s, %s)", (next_id, count))
                next_id += count
                server.flush_logs()
                binlog = sum(p.stat().st_size for p in server.binlog_files() if p.name >= start.file) / 1e6
                for label in labels:
                    runs.append(_measure(server, broker, registry, workload, m, count, binlog, label, start))
                    print(f"{workload} x{m} ({count:,} rows, {binlog:.0f} MB of binlog) {label}: "
                          f"{runs[-1].hwm_mib:.0f} MiB in {runs[-1].seconds:.1f} s", file=sys.stderr)
    text = render(runs, version)
    if args.no_write:
        print(text)
    else:
        RESULTS.write_text(text)
        print(f"wrote {RESULTS}", file=sys.stderr)
    return 0


class _Nothing:
    url = ""

    def __enter__(self) -> _Nothing:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _measure(server: MariaDBServer, broker: KafkaBroker, registry: SchemaRegistry | _Nothing, workload: str,
             multiple: int, rows: int, binlog_mb: float, label: str, start: object) -> Run:
    kafka_format, transactions = FORMATS[label]
    saved = dict(os.environ)
    os.environ.update(BINLAKE_KAFKA_FORMAT=kafka_format, BINLAKE_FILTERS_INCLUDE="bench_mem.*",
                      BINLAKE_DEBEZIUM_PROVIDE_TRANSACTION_METADATA=str(transactions).lower(),
                      BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL=registry.url or "http://127.0.0.1:1")
    prefix = f"mem{os.getpid()}{workload[-1]}{multiple}{label.replace('-', '').replace('+', '')}"
    try:
        seconds, stats, _, hwm, _ = run_daemon(server, broker, prefix, 300 + len(label) + multiple,
                                               start.file, start.position, sample_rss=True)  # type: ignore[attr-defined]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    _check(stats.get("events", 0) > 0, f"{label}: the daemon read no event of {workload} x{multiple}")
    return Run(workload, multiple, rows, binlog_mb, label, seconds, hwm / 1024)


def render(runs: list[Run], mariadb: str) -> str:
    labels = list(dict.fromkeys(r.label for r in runs))
    lines = [
        "# The daemon's memory as one transaction, or a stream of small ones, grows",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, MariaDB {mariadb}. `bench/run_memory.py`.",
        "",
        "Peak resident memory (VmHWM, MiB) of `binlake run --exit-at-end` reading the workload from its first byte "
        "into a private Kafka broker, by kafka.format (`+tx`: with provide_transaction_metadata); seconds in "
        "brackets. One transaction: a single INSERT ... SELECT of the bulk workload's row shape; transactions: "
        "single-row autocommit INSERTs.",
        "",
        "| workload | rows | binlog MB | " + " | ".join(labels) + " |",
        "|---|---:|---:|" + "---:|" * len(labels),
    ]
    keys = list(dict.fromkeys((r.workload, r.multiple) for r in runs))
    for workload, multiple in keys:
        row = {r.label: r for r in runs if (r.workload, r.multiple) == (workload, multiple)}
        first = next(iter(row.values()))
        name = "one transaction" if workload == "transaction" else "single-row transactions"
        lines.append(f"| {name} x{multiple} | {first.rows:,} | {first.binlog_mb:.0f} | " + " | ".join(
            f"{row[label].hwm_mib:.0f} ({row[label].seconds:.1f} s)" if label in row else "" for label in labels)
            + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
