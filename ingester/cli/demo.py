"""``binlake demo``: the whole pipeline on this machine, without Docker.

Starts a private MariaDB and Kafka broker (the servers of ``binlake devstack``), runs a shop workload
(inserts, single-row updates, bulk updates and deletes, an ``ALTER TABLE``, one large transaction)
while ``binlake run`` streams the binlog into Kafka and ``binlake land`` (Spark, local mode) lands it
in Delta Lake, with a progress line every few seconds; then shows what landed: per table the
server's rows against the mirror's, a few changed rows from the change log, throughput and lag.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .logs import libraries_to_file

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..devstack.mariadb import MariaDBServer
    from ..devstack.objectstore import ObjectStore

PREFIX = "demo"  # topic prefix
TABLES = ("customers", "orders")
SCHEMA = [
    """CREATE TABLE customers (
        id INT UNSIGNED PRIMARY KEY, name VARCHAR(100) NOT NULL, email VARCHAR(200),
        country CHAR(2), balance DECIMAL(12,2) NOT NULL DEFAULT 0, vip BOOLEAN NOT NULL DEFAULT 0,
        signed_up DATETIME(6) NOT NULL, tags SET('new','returning','wholesale'), notes TEXT)""",
    """CREATE TABLE orders (
        id BIGINT UNSIGNED PRIMARY KEY, customer_id INT UNSIGNED NOT NULL,
        status ENUM('new','paid','shipped','cancelled') NOT NULL, total DECIMAL(12,2) NOT NULL,
        weight_kg DOUBLE, placed_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
        ship_date DATE, payload JSON, receipt BLOB)""",
]
NAMES = ["Ada", "Grace", "Linus", "Zoë", "Ñandú", "Øyvind", "José", "李雷", "Мария", "😀 emoji"]
CATCH_UP_TIMEOUT = 600.0  # seconds the daemon and the landing job get to land everything after the workload


class DemoError(RuntimeError):
    """A step of the demo failed; the message says which and where its log is."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the whole pipeline locally: MariaDB -> run -> Kafka -> land -> Delta")
    p.add_argument("--customers", type=int, default=2000, help="rows in the sample customers table")
    p.add_argument("--orders", type=int, default=20000, help="rows of orders, inserted in one large transaction")
    p.add_argument("--updates", type=int, default=500, help="single-row update transactions on orders")
    p.add_argument("--dir", type=Path, help="new or empty directory for the servers' data, the lake and the logs "
                                            "(default: a temporary directory, removed unless --keep)")
    p.add_argument("--object-store", action="store_true",
                   help="land into a bucket of a private S3-compatible store (S3Proxy) through s3a, not a directory")
    p.add_argument("--keep", action="store_true",
                   help="leave MariaDB, Kafka and the lake running/in place (stop: binlake devstack down --dir DIR)")
    p.add_argument("--verbose", action="store_true",
                   help="Spark's and the Kafka client's own log lines here too (default: files in --dir)")
    p.set_defaults(run=run)


def _say(msg: str) -> None:
    print(msg, flush=True)


class _Progress:
    """What the workload has committed so far; read by the progress thread."""

    def __init__(self) -> None:
        self.rows = 0
        self.transactions = 0

    def add(self, rows: int, transactions: int = 1) -> None:
        self.rows += max(rows, 0)
        self.transactions += transactions


def _position(server: MariaDBServer) -> tuple[str, int]:
    file, position = server.execute("SHOW MASTER STATUS")[0][:2]
    return str(file), int(position)


def _first_rows(server: MariaDBServer, done: _Progress) -> None:
    """Customer 0 and their order 0: the tables' first rows, landed before the workload."""
    with server.connect("shop") as conn, conn.cursor() as cur:
        done.add(cur.execute("INSERT INTO customers (id, name, signed_up, tags) VALUES (0, 'First', NOW(6), 'new')"))
        done.add(cur.execute("INSERT INTO orders (id, customer_id, status, total, payload) VALUES "
                             "(0, 0, 'paid', 9.99, '{\"sku\": \"S0\", \"qty\": 1}')"))


def _workload(server: MariaDBServer, args: argparse.Namespace, done: _Progress) -> None:
    """Shop traffic with every kind of change a mirror must follow (seeded: the same on every run)."""
    rnd = random.Random(7)
    conn = server.connect("shop")
    insert_orders = ("INSERT INTO orders (id, customer_id, status, total, weight_kg, ship_date, payload, receipt)"
                     " VALUES (%s,%s,%s,%s,%s,%s,%s,%s)")
    with conn.cursor() as cur:
        rows = [(i, f"{rnd.choice(NAMES)} {i}", f"user{i}@example.com" if i % 7 else None,
                 rnd.choice(["DE", "FR", "JP", "BR", None]), f"{rnd.uniform(-50, 5000):.2f}", i % 11 == 0,
                 f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00.{i:06d}"[:26],
                 rnd.choice(["new", "returning", "new,wholesale", ""]), "x" * (i % 50) or None)
                for i in range(1, args.customers + 1)]
        for start in range(0, len(rows), 100):  # autocommit: one transaction per 100 customers
            done.add(cur.executemany("INSERT INTO customers VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                                     rows[start:start + 100]))
        _say(f"  {args.customers:,} customers inserted (transactions of 100 rows)")
        conn.begin()  # one large transaction
        batch, inserted = [], 0
        for i in range(1, args.orders + 1):
            batch.append((i, rnd.randint(1, args.customers), rnd.choice(["new", "paid", "shipped"]),
                          f"{rnd.uniform(1, 999):.2f}", rnd.random() * 30 if i % 3 else None,
                          f"2025-0{1 + i % 9}-1{i % 9}" if i % 4 else None,
                          f'{{"sku": "S{i}", "qty": {i % 5 + 1}, "gift": {str(i % 2 == 0).lower()}}}',
                          bytes(rnd.getrandbits(8) for _ in range(i % 16)) or None))
            if len(batch) == 1000 or i == args.orders:
                inserted += cur.executemany(insert_orders, batch)
                batch.clear()
        conn.commit()
        done.add(inserted)
        _say(f"  {args.orders:,} orders inserted in one transaction")
        for i in range(1, args.updates + 1):  # single-row OLTP transactions
            done.add(cur.execute("UPDATE orders SET status = 'shipped', ship_date = CURDATE() WHERE id = %s",
                                 (1 + (i * 7) % args.orders,)))
        _say(f"  {args.updates:,} single-row updates")
        done.add(cur.execute("UPDATE customers SET balance = balance * 1.1, vip = 1 WHERE country = 'JP'"))
        done.add(cur.execute("DELETE FROM orders WHERE status = 'new' AND id % 10 = 0"))
        # Nullable: a mirror gives rows written before an added column null there, not the DEFAULT (the
        # binlog has no default to give; docs/LAND.md, "Added columns").
        cur.execute("ALTER TABLE customers ADD COLUMN loyalty_points INT")
        done.add(cur.execute("UPDATE customers SET loyalty_points = id % 100 WHERE id <= 300"))
        done.add(cur.execute("DELETE FROM customers WHERE id > %s", (args.customers - 50,)))
        _say("  bulk update, bulk delete, ALTER TABLE customers ADD COLUMN loyalty_points, update, delete")
    conn.close()


def _samples(port: int) -> list[Any]:
    """The samples a Prometheus endpoint serves now; none while it is not up (yet)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return []
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _metrics(port: int) -> dict[str, float]:
    """Samples by name (labels dropped: the last sample of a name wins)."""
    return {s.name: s.value for s in _samples(port)}


def _committed_position(port: int) -> tuple[str, int]:
    """The daemon's last committed binlog (file, position), from its metrics; ("", 0) before the first."""
    positions = [(s.labels["file"], int(s.value)) for s in _samples(port) if s.name == "binlake_committed_position"]
    return max(positions, default=("", 0))


class _Pipeline:
    """``binlake run`` as a child process and ``binlake land`` on a thread of this process."""

    def __init__(self, server: MariaDBServer, bootstrap: str, base: Path, store: ObjectStore | None = None,
                 verbose: bool = False) -> None:
        from ..devstack.process import free_tcp_port

        self.server, self.bootstrap, self.base, self.store = server, bootstrap, base, store
        if store is None:
            self.lake, self.checkpoint = str(base / "lake"), str(base / "checkpoint")
        else:  # the bucket "lake" of the store (its credentials are in this process's environment)
            self.lake, self.checkpoint = "s3a://lake/demo", "s3a://lake/demo/_checkpoint"
        self.daemon_log = base / "daemon.log"
        # the land job's libraries (Spark's JVM, the Kafka client) log to files here unless verbose
        self.jvm_log = None if verbose or not libraries_to_file(base / "land.log") else str(base / "land-spark.log")
        self.daemon_port, self.land_port = free_tcp_port(), free_tcp_port()
        self.daemon: subprocess.Popen[bytes] | None = None
        self.spark: SparkSession | None = None
        self.land_error: BaseException | None = None
        self._land_thread = threading.Thread(target=self._land, name="binlake-land", daemon=True)

    def start(self) -> None:
        with self.daemon_log.open("wb") as log:
            self.daemon = subprocess.Popen(
                [sys.executable, "-m", "ingester.cli.main", "run", "--source", self.server.url,
                 "--kafka", self.bootstrap, "--topic-prefix", PREFIX, "--server-id", "999",
                 "--metrics-port", str(self.daemon_port)], stdout=log, stderr=subprocess.STDOUT)
        self._land_thread.start()

    def _land(self) -> None:
        """Start Spark (the slow part: ~20 s) and run the query until stop() stops it."""
        from streaming_job.lake.object_store import ObjectStoreSettings
        from streaming_job.land.job import LandSettings, build_session
        from streaming_job.land.job import run as run_job

        from ..config import LandConfig

        logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per callback otherwise
        try:
            store = ObjectStoreSettings(self.store.endpoint, path_style=True) if self.store is not None else None
            self.spark = build_session("local[2]", 2, "binlake-demo", store=store, jvm_log=self.jvm_log)
            run_job(LandSettings(self.bootstrap, PREFIX, LandConfig(lake=self.lake, checkpoint=self.checkpoint,
                                                                   trigger="1s"),
                                 metrics_port=self.land_port, store=store or ObjectStoreSettings()), self.spark)
        except BaseException as exc:
            self.land_error = exc

    def check(self) -> None:
        """Raise if the daemon or the landing job has stopped on its own."""
        if self.daemon is not None and self.daemon.poll() is not None:
            raise DemoError(f"binlake run exited with status {self.daemon.returncode}; see {self.daemon_log}:\n"
                            + _tail(self.daemon_log))
        if self.land_error is not None:
            raise DemoError(f"binlake land stopped: {str(self.land_error).splitlines()[0]}")

    def status(self, done: _Progress) -> tuple[str, tuple[float, ...]]:
        """The progress line, and what it counts (heartbeats aside): a line that says nothing new is skipped."""
        d, land = _metrics(self.daemon_port), _metrics(self.land_port)
        line = f"  .. source: {done.rows:,} row changes, {done.transactions:,} transactions"
        if d:
            line += (f" | binlake run: {d.get('binlake_events_total', 0):,.0f} events, "
                     f"{d.get('binlake_transactions_total', 0):,.0f} transactions in Kafka, "
                     f"lag {d.get('binlake_lag_seconds', 0):.1f} s")
        if land:
            line += (f" | binlake land: {land.get('binlake_land_rows_total', 0):,.0f} row changes in "
                     f"{land.get('binlake_land_batches_total', 0):,.0f} batches, "
                     f"lag {land.get('binlake_land_lag_seconds', 0):.1f} s")
        else:
            line += " | binlake land: starting Spark"
        counts = (done.rows, d.get("binlake_transactions_total", 0), land.get("binlake_land_rows_total", -1),
                  land.get("binlake_land_batches_total", -1))
        return line, counts

    def wait_started(self, deadline: float) -> None:
        """Until the landing query runs: Spark's start is the slow part, the daemon is up long before."""
        while self.spark is None or not self.spark.streams.active:
            self.check()
            if time.monotonic() > deadline:
                raise DemoError("binlake land did not start")
            time.sleep(0.2)

    def wait_daemon(self, target: tuple[str, int], deadline: float) -> None:
        """Until the daemon has committed the server's current binlog position to Kafka."""
        while _committed_position(self.daemon_port) < target:
            self.check()
            if time.monotonic() > deadline:
                raise DemoError(f"binlake run has not reached {target[0]}:{target[1]}; see {self.daemon_log}")
            time.sleep(0.2)

    def wait_land(self, deadline: float) -> None:
        """Until the query has landed every committed Kafka record of the table topics, then stop it."""
        self.wait_started(deadline)
        assert self.spark is not None
        query = self.spark.streams.active[0]
        while True:
            query.processAllAvailable()
            if _query_offsets(query) == kafka_end_offsets(self.bootstrap, PREFIX):
                break
            self.check()
            if time.monotonic() > deadline:
                raise DemoError("binlake land has not landed every committed record")
            time.sleep(1)  # a new table's topic is found by the next metadata refresh

    def stop(self) -> None:
        """SIGTERM the daemon (it commits and exits 0), stop the query; stopping twice is harmless."""
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(30)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        if self.spark is not None:
            for query in self.spark.streams.active:
                with contextlib.suppress(Exception):
                    query.stop()
        if self._land_thread.is_alive():
            self._land_thread.join(60)


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _query_offsets(query: Any) -> dict[str, dict[str, int]]:
    """The Kafka offsets the query's last batch reached, per topic and partition."""
    progress = query.lastProgress
    if not progress or not progress["sources"]:
        return {}
    end = progress["sources"][0]["endOffset"]
    end = json.loads(end) if isinstance(end, str) else end
    return {topic: {str(p): int(o) for p, o in parts.items()} for topic, parts in (end or {}).items()}


def kafka_end_offsets(bootstrap: str, prefix: str) -> dict[str, dict[str, int]]:
    """The end offsets of the table topics of ``prefix`` as a read_committed consumer sees them (what a
    landing job has read all of once its query's offsets equal them)."""
    from kafka import KafkaConsumer, TopicPartition

    from streaming_job.source.source_formats import topic_pattern

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    try:
        pattern = re.compile(topic_pattern(prefix))
        parts = [TopicPartition(t, p) for t in consumer.topics() if pattern.fullmatch(t)
                 for p in consumer.partitions_for_topic(t) or ()]
        out: dict[str, dict[str, int]] = {}
        for tp, offset in consumer.end_offsets(parts).items():
            out.setdefault(tp.topic, {})[str(tp.partition)] = offset
        return out
    finally:
        consumer.close()


def _report(server: MariaDBServer, pipeline: _Pipeline) -> int:
    """Per table the server's rows against the mirror's, the change log's counts, a few changed rows;
    returns how many tables differ."""
    spark, lake = pipeline.spark, f"{pipeline.lake}/shop"
    assert spark is not None
    _say(f"binlake demo: [5/5] what landed in Delta Lake ({pipeline.lake}):")
    _say("  table        server rows  mirror rows  same keys  | change log: inserts   updates   deletes")
    mismatches = 0
    for table in TABLES:
        source = {int(r[0]) for r in server.execute(f"SELECT id FROM shop.{table}")}
        mirror = {int(r[0]) for r in spark.read.format("delta").load(f"{lake}/{table}").select("id").collect()}
        changes = spark.read.format("delta").load(f"{lake}/{table}__changes")
        ops = {r["op"]: r["count"] for r in changes.groupBy("op").count().collect()}
        same = source == mirror
        mismatches += not same
        _say(f"  {table:<12} {len(source):>11,} {len(mirror):>12,}  {'yes' if same else 'NO':<9} | "
             f"{ops.get('insert', 0):>20,} {ops.get('update', 0):>9,} {ops.get('delete', 0):>9,}")
    _say("  a few changed rows (from the change logs, changed columns before -> after):")
    for table in TABLES:
        updates = (spark.read.format("delta").load(f"{lake}/{table}__changes").where("op = 'update'")
                   .orderBy("seq", "row_index").limit(2).collect())
        for row in updates:
            before, after = row["before"].asDict(), row["after"].asDict()
            diff = ", ".join(f"{k}: {_short(before[k])} -> {_short(v)}" for k, v in after.items() if before[k] != v)
            _say(f"    {table} id={_short(after['id'])} (commit {row['commit_ts']:%H:%M:%S}): {diff}")
    return mismatches


def _short(value: Any) -> str:
    text = value.hex() if isinstance(value, bytes | bytearray) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _ticker(pipeline: _Pipeline, done: _Progress, stop: threading.Event, every: float = 3.0,
            quiet_for: float = 15.0) -> None:
    """A progress line every few seconds while something moves, every quiet_for seconds otherwise."""
    last, printed = None, 0.0
    while not stop.wait(every):
        line, counts = pipeline.status(done)
        if counts != last or time.monotonic() - printed >= quiet_for:
            _say(line)
            last, printed = counts, time.monotonic()


def run(args: argparse.Namespace) -> int:
    from ..devstack.kafka import KafkaBroker
    from ..devstack.mariadb import MariaDBServer
    from ..devstack.objectstore import ObjectStore

    if args.dir is not None and args.dir.exists() and any(args.dir.iterdir()):
        print(f"binlake: error: demo: {args.dir} is not empty (the demo starts from nothing)", file=sys.stderr)
        return 2
    base = (args.dir or Path(tempfile.mkdtemp(prefix="binlake-demo-"))).absolute()
    base.mkdir(parents=True, exist_ok=True)
    server, broker = MariaDBServer(datadir=base / "mariadb"), KafkaBroker(datadir=base / "kafka")
    store = ObjectStore(datadir=base / "s3") if args.object_store else None
    pipeline: _Pipeline | None = None
    started = time.monotonic()
    try:
        _say(f"binlake demo: [1/5] starting a private MariaDB and Kafka broker (KRaft) in {base} ...")
        server.start(detach=args.keep)
        broker.start(detach=args.keep)
        _say(f"  MYSQL_URL={server.url}\n  KAFKA_BOOTSTRAP={broker.bootstrap}")
        if store is not None:
            store.start(detach=args.keep)
            store.create_bucket("lake")
            os.environ.update(store.environment())  # the land job's credentials for the store
            _say(f"  an S3-compatible store (S3Proxy) at {store.endpoint}, bucket lake")
        _say("binlake demo: [2/5] schema shop, then binlake run (binlog -> Kafka) and binlake land "
             "(Kafka -> Delta Lake, Spark local[2]) ...")
        server.execute("CREATE DATABASE shop CHARACTER SET utf8mb4")
        for ddl in SCHEMA:
            server.execute(ddl.replace("CREATE TABLE ", "CREATE TABLE shop.", 1))
        pipeline = _Pipeline(server, broker.bootstrap, base, store, args.verbose)
        pipeline.start()
        done, ticking = _Progress(), threading.Event()
        ticker = threading.Thread(target=_ticker, args=(pipeline, done, ticking), daemon=True)
        ticker.start()
        try:
            pipeline.wait_started(time.monotonic() + CATCH_UP_TIMEOUT)
            # A running job's tables exist and its JVM is warm: the first rows create them (the slow part of
            # a first micro-batch), before the workload whose landing the demo times
            started_land = time.monotonic()
            _first_rows(server, done)
            pipeline.wait_daemon(_position(server), started_land + CATCH_UP_TIMEOUT)
            pipeline.wait_land(started_land + CATCH_UP_TIMEOUT)
            _say(f"  a first customer and order landed in {time.monotonic() - started_land:.1f} s (their change "
                 "logs and mirrors created)")
            _say("binlake demo: [3/5] workload, while both run ...")
            workload_started = time.monotonic()
            _workload(server, args, done)
            workload_end = time.monotonic()
            file, position = _position(server)
            _say(f"binlake demo: [4/5] waiting for binlake run to commit {file}:{position} to Kafka and for "
                 "binlake land to land it ...")
            deadline = workload_end + CATCH_UP_TIMEOUT
            pipeline.wait_daemon((file, position), deadline)
            daemon_done = time.monotonic()
            pipeline.wait_land(deadline)
            landed = time.monotonic()
        finally:
            ticking.set()
            ticker.join()
        daemon_stats, land_stats = _metrics(pipeline.daemon_port), _metrics(pipeline.land_port)
        pipeline.stop()
        if pipeline.daemon is not None and pipeline.daemon.returncode != 0:
            raise DemoError(f"binlake run exited with status {pipeline.daemon.returncode} on SIGTERM; see "
                            f"{pipeline.daemon_log}")
        mismatches = _report(server, pipeline)
        _say(f"  binlake run: {daemon_stats.get('binlake_events_total', 0):,.0f} events, "
             f"{daemon_stats.get('binlake_transactions_total', 0):,.0f} transactions committed to Kafka, "
             f"caught up {daemon_done - workload_end:.1f} s after the workload's last commit "
             f"(workload {workload_end - workload_started:.1f} s)")
        rows = land_stats.get("binlake_land_rows_total", 0)
        busy = land_stats.get("binlake_land_batch_seconds_sum", 0)
        _say(f"  binlake land: {rows:,.0f} row changes in {land_stats.get('binlake_land_batches_total', 0):,.0f} "
             f"micro-batches ({busy:.1f} s, {rows / max(busy, 1e-9):,.0f} rows/s while landing); the mirrors had "
             f"everything {landed - workload_end:.1f} s after the workload's last commit")
        _say(f"binlake demo: done in {time.monotonic() - started:.0f} s"
             + ("" if not mismatches else f"; {mismatches} table(s) differ from the server!"))
        if args.keep:
            _say(f"binlake demo: left running (--keep); lake in {pipeline.lake}; stop with: "
                 f"binlake devstack down --dir {base}")
        return 0 if not mismatches else 1
    except DemoError as exc:
        print(f"binlake: error: demo: {exc}", file=sys.stderr)
        return 1
    finally:
        if pipeline is not None:
            pipeline.stop()
        if not args.keep:
            broker.stop()
            server.stop()
            if store is not None:
                store.stop()
            if args.dir is None:
                shutil.rmtree(base, ignore_errors=True)
