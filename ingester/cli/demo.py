"""``binlake demo``: the pipeline end to end on a private local MariaDB and Kafka broker.

Starts both (no Docker), runs a small shop workload (common column types, updates, deletes, a DDL
and a 20,000-row transaction), streams the binlog into Kafka with the daemon (exactly once), reads
it back with the consumer, and shows that the changes, replayed, are exactly the server's rows.
The Spark/Delta landing joins this when it exists.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..codec import events as E
from ..dump.jsonl import event_json, json_default

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
if TYPE_CHECKING:
    from ..devstack.mariadb import MariaDBServer

NAMES = ["Ada", "Grace", "Linus", "Zoë", "Ñandú", "Øyvind", "José", "李雷", "Мария", "😀 emoji"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the pipeline end to end on a private local MariaDB")
    p.add_argument("--customers", type=int, default=2000, help="rows in the sample customers table")
    p.add_argument("--orders", type=int, default=20000, help="rows in the sample orders table")
    p.add_argument("--jsonl", type=Path, metavar="FILE", help="also write every decoded event to FILE")
    p.add_argument("--keep", action="store_true", help="leave the MariaDB running (prints its URL)")
    p.set_defaults(run=run)


def _say(msg: str) -> None:
    print(msg, flush=True)


def _workload(server: MariaDBServer, customers: int, orders: int) -> None:
    rnd = random.Random(7)
    server.execute("CREATE DATABASE shop CHARACTER SET utf8mb4")
    conn = server.connect("shop")
    with conn.cursor() as cur:
        for ddl in SCHEMA:
            cur.execute(ddl)
        rows = [(i, f"{rnd.choice(NAMES)} {i}", f"user{i}@example.com" if i % 7 else None,
                 rnd.choice(["DE", "FR", "JP", "BR", None]), f"{rnd.uniform(-50, 5000):.2f}", i % 11 == 0,
                 f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00.{i:06d}"[:26],
                 rnd.choice(["new", "returning", "new,wholesale", ""]), "x" * (i % 50) or None)
                for i in range(1, customers + 1)]
        cur.executemany("INSERT INTO customers VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows)
        conn.begin()  # one large transaction
        batch = []
        for i in range(1, orders + 1):
            batch.append((i, rnd.randint(1, customers), rnd.choice(["new", "paid", "shipped"]),
                          f"{rnd.uniform(1, 999):.2f}", rnd.random() * 30 if i % 3 else None,
                          f"2025-0{1 + i % 9}-1{i % 9}" if i % 4 else None,
                          f'{{"sku": "S{i}", "qty": {i % 5 + 1}, "gift": {str(i % 2 == 0).lower()}}}',
                          bytes(rnd.getrandbits(8) for _ in range(i % 16)) or None))
            if len(batch) == 1000:
                cur.executemany("INSERT INTO orders (id, customer_id, status, total, weight_kg, ship_date,"
                                " payload, receipt) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", batch)
                batch.clear()
        if batch:
            cur.executemany("INSERT INTO orders (id, customer_id, status, total, weight_kg, ship_date,"
                            " payload, receipt) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)", batch)
        conn.commit()
        for i in range(1, 501):  # single-row OLTP transactions
            cur.execute("UPDATE orders SET status = 'shipped', ship_date = CURDATE() WHERE id = %s", (i * 7,))
        cur.execute("UPDATE customers SET balance = balance * 1.1, vip = 1 WHERE country = 'JP'")
        cur.execute("DELETE FROM orders WHERE status = 'new' AND id % 10 = 0")
        cur.execute("ALTER TABLE customers ADD COLUMN loyalty_points INT NOT NULL DEFAULT 0")
        cur.execute("UPDATE customers SET loyalty_points = id % 100 WHERE id <= 300")
        cur.execute("DELETE FROM customers WHERE id > %s", (customers - 50,))
    conn.close()


def _server_rows(server: MariaDBServer, table: str) -> int:
    return int(server.execute(f"SELECT COUNT(*) FROM shop.{table}")[0][0])


def run(args: argparse.Namespace) -> int:
    from ..devstack.kafka import KafkaBroker  # imported on use: keeps other commands quick to start
    from ..devstack.mariadb import MariaDBServer

    started = time.monotonic()
    _say("binlake demo: starting a private MariaDB (row-based binlog, FULL row metadata) and Kafka (KRaft) ...")
    server = MariaDBServer()
    broker = KafkaBroker()
    summary: dict[str, Any] = {"mismatches": 1}
    server.start()
    try:
        broker.start()
        _say(f"  MYSQL_URL={server.url}")
        _say(f"  KAFKA_BOOTSTRAP={broker.bootstrap}")
        _say(f"binlake demo: workload: {args.customers} customers, {args.orders} orders in one transaction, "
             "500 single-row updates, bulk update/delete, ALTER TABLE ...")
        _workload(server, args.customers, args.orders)
        summary = _pipeline(server, broker.bootstrap, args.jsonl)
        _report(server, summary, time.monotonic() - started)
        if args.keep:
            _say("binlake demo: leaving MariaDB and Kafka running (--keep)")
    finally:
        if not args.keep:
            broker.close()
            server.close()
    return 0 if summary["mismatches"] == 0 else 1


def _pipeline(server: MariaDBServer, bootstrap: str, jsonl: Path | None) -> dict[str, Any]:
    from ..config import load_config
    from ..daemon.runner import Runner
    from .consume import committed_events

    cfg = load_config(None, {"source": {"url": server.url, "server_id": 999}, "exit_at_end": True,
                             "kafka": {"bootstrap": bootstrap, "topic_prefix": "demo"}})
    _say("binlake demo: binlake run: binlog -> Kafka (transactional, checkpointed) ...")
    t0 = time.perf_counter()
    stats = Runner(cfg).run()
    seconds = time.perf_counter() - t0
    _say(f"  {stats['events']} events, {stats['records']} records, {stats['transactions']} transactions "
         f"in {seconds:.2f} s ({stats['events'] / max(seconds, 1e-9):,.0f} events/s)")
    _say("binlake demo: binlake consume: Kafka -> decoded rows (read_committed, in source order) ...")
    return _replay(committed_events(bootstrap, "demo"), jsonl)


def _replay(events: Iterable[E.Event], jsonl: Path | None) -> dict[str, Any]:
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    state: dict[str, dict[Any, dict[str, Any]]] = collections.defaultdict(dict)
    samples: list[str] = []
    n = 0
    out = jsonl.open("wb") if jsonl else None
    t0 = time.perf_counter()
    try:
        for ev in events:
            n += 1
            if out:
                out.write(event_json(ev))
            if isinstance(ev, E.RowsEvent) and ev.database == "shop":
                table = state[ev.table]
                for row in ev.row_dicts():
                    counts[(ev.table, ev.kind)] += 1
                    current = table.pop(row["before"]["id"]) if "before" in row else {}
                    if "after" in row:
                        current.update(row["after"])
                        table[current["id"]] = current
                    if len(samples) < 3 and ev.kind == "update" and ev.table == "orders":
                        changed = {k: v for k, v in row["after"].items() if row["before"].get(k) != v}
                        samples.append(f"    orders id={row['before']['id']}: {_json(changed)}")
    finally:
        if out:
            out.close()
    seconds = time.perf_counter() - t0
    return {"counts": counts, "state": state, "samples": samples, "events": n, "seconds": seconds,
            "mismatches": 0}


def _json(value: Any) -> str:
    return orjson.dumps(value, default=json_default).decode()


def _report(server: MariaDBServer, summary: dict[str, Any], elapsed: float) -> None:
    counts = summary["counts"]
    rows = sum(counts.values())
    _say(f"  consumed {summary['events']} events, {rows} row changes in {summary['seconds']:.2f} s")
    _say("  table       inserts  updates  deletes   rows: from Kafka  server")
    for table in ("customers", "orders"):
        replayed = len(summary["state"][table])
        actual = _server_rows(server, table)
        ok = "ok" if replayed == actual else "MISMATCH"
        if replayed != actual:
            summary["mismatches"] += 1
        _say(f"  {table:<10} {counts[(table, 'write')]:>8} {counts[(table, 'update')]:>8} "
             f"{counts[(table, 'delete')]:>8}   {replayed:>14} {actual:>7}  {ok}")
    _say("  a few decoded updates (changed columns):")
    for sample in summary["samples"]:
        _say(sample)
    _say(f"binlake demo: done in {elapsed:.1f} s" + ("" if summary["mismatches"] == 0 else
                                                     " -- row counts differ from the server!"))
    sys.stdout.flush()
