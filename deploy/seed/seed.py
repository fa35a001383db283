"""A steady shop workload for the docker compose stack: creates a schema, then keeps writing.

Inserts, updates and deletes in small transactions at about SEED_RATE transactions per second, with
now and then an ALTER TABLE, so every part of the pipeline (rows, schema changes, mirrors) has work.
Settings come from SEED_HOST, SEED_PORT, SEED_USER, SEED_PASSWORD, SEED_DATABASE, SEED_RATE,
SEED_TRANSACTIONS (0, the default: forever) and SEED_ALTER_EVERY (transactions between two ALTER
TABLEs, 5000). Runs on the daemon's image (Python + PyMySQL).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from typing import Any

import pymysql

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS customers (
         id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(100) NOT NULL, email VARCHAR(200),
         created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) CHARACTER SET utf8mb4""",
    """CREATE TABLE IF NOT EXISTS orders (
         id BIGINT PRIMARY KEY AUTO_INCREMENT, customer_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL,
         status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new', note JSON,
         updated_at DATETIME(3) NOT NULL) CHARACTER SET utf8mb4""",
]
NAMES = ["Ada", "Grace", "Linus", "Margaret", "Dennis", "Barbara", "Ken", "Frances", "Edsger", "Radia"]


def connect(retries: int = 60) -> Any:
    """The database may still be starting (or restarting): retry for a minute before giving up."""
    for attempt in range(retries):
        try:
            return pymysql.connect(host=os.environ.get("SEED_HOST", "127.0.0.1"),
                                   port=int(os.environ.get("SEED_PORT", "3306")),
                                   user=os.environ.get("SEED_USER", "seed"),
                                   password=os.environ.get("SEED_PASSWORD", "seed"),
                                   database=os.environ.get("SEED_DATABASE", "shop"), autocommit=False)
        except pymysql.err.OperationalError as exc:
            if attempt == retries - 1:
                raise
            print(f"seed: waiting for the database: {exc}", file=sys.stderr)
            time.sleep(1)
    raise AssertionError("unreachable")


def one_transaction(cur: Any, n: int, rng: random.Random) -> None:
    """A mix like a small shop's: new customers and orders, status changes, the odd cancellation."""
    if n % 10 == 0 or rng.random() < 0.1:
        name = rng.choice(NAMES)
        cur.execute("INSERT INTO customers (name, email) VALUES (%s, %s)", (name, f"{name.lower()}{n}@example.com"))
    cur.execute("SELECT COALESCE(MAX(id), 0) FROM customers")
    customers = cur.fetchone()[0]
    if customers:
        cur.execute("INSERT INTO orders (customer_id, amount, note, updated_at) VALUES (%s, %s, %s, NOW(3))",
                    (rng.randint(1, customers), round(rng.uniform(1, 500), 2), f'{{"n": {n}}}'))
    cur.execute("UPDATE orders SET status = %s, updated_at = NOW(3) WHERE id = %s",
                (rng.choice(["paid", "shipped"]), rng.randint(1, max(1, n))))
    if rng.random() < 0.05:
        cur.execute("DELETE FROM orders WHERE id = %s", (rng.randint(1, max(1, n)),))


def add_column(cur: Any, name: str) -> None:
    """ALTER TABLE customers ADD COLUMN, unless a restarted seed added it already (MySQL has no IF NOT EXISTS)."""
    cur.execute("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() "
                "AND table_name = 'customers' AND column_name = %s", (name,))
    if not cur.fetchone()[0]:
        cur.execute(f"ALTER TABLE customers ADD COLUMN {name} TINYINT")


def main() -> int:
    rate = float(os.environ.get("SEED_RATE", "20"))
    total = int(os.environ.get("SEED_TRANSACTIONS", "0"))
    alter_every = int(os.environ.get("SEED_ALTER_EVERY", "5000"))
    stop = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    rng = random.Random(42)
    conn = connect()
    with conn.cursor() as cur:
        for statement in SCHEMA:
            cur.execute(statement)
    conn.commit()
    n = 0
    while not stop and (total == 0 or n < total):
        n += 1
        try:
            with conn.cursor() as cur:
                one_transaction(cur, n, rng)
                if alter_every and n % alter_every == 0:  # a schema change now and then: the lake must follow
                    add_column(cur, f"tier{n // alter_every}")
            conn.commit()
        except pymysql.err.OperationalError as exc:  # server restarted: reconnect and go on
            print(f"seed: {exc}; reconnecting", file=sys.stderr)
            conn = connect()
        if n % 1000 == 0:
            print(f"seed: {n} transactions", flush=True)
        time.sleep(1 / rate if rate > 0 else 0)
    conn.close()
    print(f"seed: stopped after {n} transactions", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
