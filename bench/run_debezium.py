"""Debezium's change events: `binlake run` with kafka.format debezium-json against Debezium's MariaDB connector
(3.5.0.Final, in Kafka Connect standalone), the same binlog into the same broker (bench/README.md).

Each reader streams a cached workload's binlog file (the decode benchmark's bulk and OLTP workloads) from its
first byte to its last row change, on a copy of the datadir that holds it:

- binlake: `binlake run --exit-at-end` from the file's start; total = process start to exit (the last Kafka
  transaction committed), steady = the rows over its streaming time (its stats line);
- Debezium: a connector created stopped, given the file's start (and the GTID state there, which the MariaDB
  connector requires) as its offset, snapshot.mode=recovery (the tables' schema, no rows), then started;
  total = from the start request to the last change event in Kafka (the topics' end offsets, polled every
  50 ms), steady = the rows over the time from its first change event to its last.
  Both with tombstones.on.delete=false, so each side publishes exactly one message per row change: what is
  counted. binlake's debezium-avro (its schemas in an Apicurio registry, started by the benchmark) and binlake's
  own format (one record per many events) are timed beside them.

Needs `pip install -r bench/requirements.txt` (or `bench/run --debezium ...`).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from run_daemon import run_daemon, workload_server
from run_decode import BENCH_DIR, _check, _cpu_model, _git_revision
from workloads import Dataset, load_or_generate

from ingester.devstack.connect import DEBEZIUM_MARIADB, KafkaConnect
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer
from ingester.devstack.registry import SchemaRegistry

RESULTS = BENCH_DIR / "results" / "debezium.md"
SIDES = ("Debezium 3.5.0.Final", "binlake debezium-json", "binlake debezium-avro", "binlake (own format)")
FORMATS = {SIDES[1]: "debezium-json", SIDES[2]: "debezium-avro", SIDES[3]: "binlake"}


@dataclass
class Side:
    total: list[float] = field(default_factory=list)  # seconds, start to the last row change committed
    steady: list[float] = field(default_factory=list)  # seconds of streaming
    hwm: list[int] = field(default_factory=list)  # binlake's peak resident memory, KiB (VmHWM)

    def rate(self, rows: int, which: str) -> float:
        return rows / statistics.median(self.total if which == "total" else self.steady)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dataset", choices=("decode", "growth"), default="decode",
                        help="decode: the bulk and OLTP workloads (debezium.md); growth: ten times the OLTP "
                             "transactions, 300 tables, one 200,000-row transaction (debezium-growth.md)")
    parser.add_argument("--workloads", help="a comma-separated subset of the dataset's workloads")
    parser.add_argument("--no-write", action="store_true", help="print the results instead of writing them")
    parser.add_argument("--broker-dir", help="where the broker keeps its logs (default: a directory in /dev/shm, "
                                             "else the system's temporary directory)")
    args = parser.parse_args()
    dataset = load_or_generate(kind=args.dataset)
    names = args.workloads.split(",") if args.workloads else list(dataset.workloads)
    results = {name: {side: Side() for side in SIDES} for name in names}
    (BENCH_DIR / "data").mkdir(exist_ok=True)  # a fresh clone has none
    with tempfile.TemporaryDirectory(prefix="bl-kafka-", dir=args.broker_dir or _memory_dir()) as logs, \
            KafkaBroker(datadir=logs) as broker, KafkaConnect(broker.bootstrap, [DEBEZIUM_MARIADB]) as connect, \
            SchemaRegistry() as registry, tempfile.TemporaryDirectory(prefix="bl-", dir=BENCH_DIR / "data") as root:
        for name in names:
            with workload_server(dataset, name, Path(root)) as server:
                version = server.execute("SELECT VERSION()")[0][0]
                for run in range(1, args.repeat + 1):
                    tag = f"{name}{run}p{os.getpid()}"
                    rows = dataset.workloads[name].row_changes
                    measure_debezium(connect, broker, server, dataset, name, f"dz{tag}", results[name][SIDES[0]])
                    for i, side in enumerate(SIDES[1:]):
                        measure_binlake(broker, server, dataset, name, f"b{i}{tag}", results[name][side], FORMATS[side],
                                        200 + run * 4 + i, registry.url)
                    print(f"run {run}/{args.repeat} {name} ({rows:,} row changes): " + ", ".join(
                        f"{side} {results[name][side].total[-1]:.2f}s" for side in SIDES), file=sys.stderr)
    text = render(dataset, results, args.repeat, version, args.dataset)
    if args.no_write:
        print(text)
    else:
        out = RESULTS if args.dataset == "decode" else RESULTS.with_name("debezium-growth.md")
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


def _memory_dir() -> str | None:
    """/dev/shm where it is a writable tmpfs with room: the broker's logs off the disk. A new topic's partition is
    led once the broker has written (and fsynced) its files: 300 new partitions took the broker 3-12 s on this
    machine's shared disk (other tenants' I/O) and 0.5-1 s in memory, and both readers wait for it (the first
    messages to each are answered "not leader" until then): the outliers of 300 tables."""
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return "/dev/shm" if stat.f_bavail * stat.f_frsize > 4 << 30 and os.access("/dev/shm", os.W_OK) else None


def _data_offsets(consumer, prefix: str) -> int:
    """Messages in the prefix's table topics (<prefix>.<db>.<table>): their end offsets."""
    from kafka import TopicPartition

    topics = [t for t in consumer.topics() if t.startswith(prefix + ".") and t.count(".") == 2
              and not t.endswith((".history", ".transaction"))]
    parts = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()]
    return sum(consumer.end_offsets(parts).values()) if parts else 0


def measure_debezium(connect: KafkaConnect, broker: KafkaBroker, server: MariaDBServer, dataset: Dataset,
                     name: str, prefix: str, side: Side) -> None:
    from kafka import KafkaConsumer

    first_file = dataset.workloads[name].files[0]
    rows = dataset.workloads[name].row_changes
    gtids = server.execute("SELECT BINLOG_GTID_POS(%s, 4)", (first_file,))[0][0]
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "tasks.max": "1",
        "database.hostname": "127.0.0.1", "database.port": str(server.port), "database.user": "root",
        "database.password": "", "database.server.id": "7301", "topic.prefix": prefix,
        "database.include.list": f"bench_{name}", "snapshot.mode": "recovery", "tombstones.on.delete": "false",
        "schema.history.internal.kafka.bootstrap.servers": broker.bootstrap,
        "schema.history.internal.kafka.topic": f"{prefix}.history",
        "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1"}
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        started = time.perf_counter()
        connect.create_at(prefix, config, {"server": prefix}, {"file": first_file, "pos": 4, "gtids": gtids})
        first = None
        deadline = started + 900
        while True:
            have = _data_offsets(consumer, prefix)
            now = time.perf_counter()
            if have and first is None:
                first = now
            if have >= rows:
                break
            _check(now < deadline, f"Debezium published {have} of {rows} row changes of {name} in 900 s")
            status = connect._get(f"/connectors/{prefix}/status") or {}
            _check(all(t.get("state") != "FAILED" for t in status.get("tasks", ())), f"Debezium failed: {status}")
            time.sleep(0.05)
        _check(have == rows, f"Debezium published {have} messages for {rows} row changes of {name}")
        side.total.append(now - started)
        side.steady.append(now - (first or started))
    finally:
        consumer.close()
        connect.delete(prefix)


def measure_binlake(broker: KafkaBroker, server: MariaDBServer, dataset: Dataset, name: str, prefix: str,
                    side: Side, kafka_format: str, server_id: int, registry: str) -> None:
    saved = dict(os.environ)
    os.environ.update(BINLAKE_KAFKA_FORMAT=kafka_format, BINLAKE_DEBEZIUM_TOMBSTONES_ON_DELETE="false",
                      BINLAKE_FILTERS_INCLUDE=f"bench_{name}.*", BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL=registry)
    try:
        seconds, stats, _, hwm, _ = run_daemon(server, broker, prefix, server_id, dataset.workloads[name].files[0],
                                               sample_rss=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    rows = dataset.workloads[name].row_changes
    if kafka_format != "binlake":
        # a committed transaction's messages become visible to read_committed readers once the broker has written
        # its commit markers into each partition, after the commit returned: a while for 300 partitions
        deadline = time.monotonic() + 60
        while (published := _committed_messages(broker, prefix)) < rows and time.monotonic() < deadline:
            time.sleep(0.5)
        _check(published == rows, f"binlake published {published} change events for {rows} row changes of {name}")
    side.total.append(seconds)
    side.steady.append(stats.get("streaming_ms", 0) / 1000)
    side.hwm.append(hwm)


def _committed_messages(broker: KafkaBroker, prefix: str) -> int:
    """Committed messages of the prefix's table topics (read_committed: transaction markers not counted)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    try:
        topics = [t for t in consumer.topics() if t.startswith(prefix + ".") and t.count(".") == 2
                  and not t.split(".")[1].startswith("_") and not t.endswith(".transaction")]
        deadline = time.monotonic() + 60
        while any(consumer.partitions_for_topic(t) is None for t in topics):  # the client's metadata lags: wait
            _check(time.monotonic() < deadline, f"no partitions known of some of {len(topics)} topics in 60 s")
            consumer.topics()
            time.sleep(0.1)
        parts = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        count = 0
        while any(consumer.position(tp) < end[tp] for tp in parts):
            for batch in consumer.poll(timeout_ms=1000, max_records=100_000).values():
                count += sum(1 for m in batch if m.value is not None)
        return count
    finally:
        consumer.close()


_GROWTH = ("How cost grows with the work: oltp10 is the OLTP workload's single-row transactions ten times over "
           "(450,000), tables 45,000 single-row transactions over 300 tables (a topic each), bigtx one transaction "
           "of 200,000 inserted rows.")


def render(dataset: Dataset, results: dict[str, dict[str, Side]], repeat: int, mariadb: str,
           kind: str = "decode") -> str:
    lines = [
        "# binlake's Debezium format against Debezium" + (": growth" if kind == "growth" else ""),
        "",
        *([_GROWTH, ""] if kind == "growth" else []),
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, {os.cpu_count()} CPUs,"
        f" Python {platform.python_version()}, MariaDB {mariadb}; median of {repeat} run(s). `bench/run_debezium.py`.",
        "",
        "The same binlog file into the same Kafka broker (its logs in /dev/shm, unless --broker-dir said otherwise),"
        " one message per row change on each side "
        "(tombstones.on.delete=false). Total: start to the last row change in Kafka (binlake: to its last "
        "transaction committed); steady: rows over streaming time (binlake: its streaming_ms; Debezium: its first "
        "change event to its last). Peak RSS: binlake's process (VmHWM, largest of the runs); Debezium runs in a "
        "Kafka Connect worker's JVM, not measured apart.",
        "",
        "| workload | row changes | reader | total s | rows/s total | rows/s steady | total vs Debezium | "
        "steady vs Debezium | peak RSS MiB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, sides in results.items():
        rows = dataset.workloads[name].row_changes
        base = sides[SIDES[0]]
        for label, side in sides.items():
            total, steady = side.rate(rows, "total"), side.rate(rows, "steady")
            lines.append(
                f"| {name} | {rows:,} | {label} | {statistics.median(side.total):.2f} | {total:,.0f} | {steady:,.0f} "
                f"| {total / base.rate(rows, 'total'):.2f}x | {steady / base.rate(rows, 'steady'):.2f}x "
                f"| {f'{max(side.hwm) / 1024:.0f}' if side.hwm else 'the Connect worker'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
