"""The decode benchmark's binlogs: a bulk and an OLTP workload, generated once on a private MariaDB.

The server's datadir is cached under bench/data/decode-v<WORKLOAD_VERSION>/; bump WORKLOAD_VERSION
whenever the generated events change, so stale caches are never measured.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from pymysql.connections import Connection

from ingester.devstack.mariadb import MariaDBServer

WORKLOAD_VERSION = 1
DATA_ROOT = Path(__file__).resolve().parent / "data"

# No Annotate_rows events (MariaDB logs each statement's SQL text by default): replication clients
# only get them on request, so without them both readers see exactly the same events. A binlog size
# limit large enough that each workload stays in a single file; the rest only speeds up generation.
SERVER_OPTIONS: dict[str, object] = {
    "binlog_annotate_row_events": "OFF",
    "max_binlog_size": "1G",
    "sync_binlog": 0,
    "innodb_flush_log_at_trx_commit": 0,
    "innodb_buffer_pool_size": "256M",
}

BULK_INSERTS = 130_000
BULK_UPDATES = 60_000
BULK_DELETES = 40_000
BULK_STATEMENT_ROWS = 1000
OLTP_TRANSACTIONS = 45_000
OLTP_ACCOUNTS = 5000

_WORDS = (
    "alpha", "bravo", "café", "delta", "échelle", "foxtrot", "größe", "hotel", "naïve", "東京",
    "Zürich", "kilo", "lima", "mañana", "oscar", "papa", "québec", "romeo", "sierra", "😀",
)  # fmt: skip
_EPOCH = datetime(2024, 1, 1)


@dataclass(frozen=True, slots=True)
class Workload:
    """One workload's binlog files (names in the server's datadir) and what they contain."""

    name: str
    files: list[str]
    row_changes: int
    transactions: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class Dataset:
    """A cached server datadir holding the workloads, each in binlog files of its own."""

    root: Path
    workloads: dict[str, Workload]

    @property
    def datadir(self) -> Path:
        return self.root / "mariadb"

    def server(self) -> MariaDBServer:
        """The (not yet started) server that owns the binlogs; the competitor streams from it."""
        return MariaDBServer(self.datadir, options=SERVER_OPTIONS)

    def paths(self, workload: str) -> list[Path]:
        return [self.datadir / name for name in self.workloads[workload].files]


def load_or_generate(regenerate: bool = False) -> Dataset:
    """The cached dataset, generating it (about a minute) if it is missing, stale or regenerate is set."""
    root = DATA_ROOT / f"decode-v{WORKLOAD_VERSION}"
    manifest = root / "manifest.json"
    if not regenerate and manifest.exists():
        saved = json.loads(manifest.read_text())
        return Dataset(root, {name: Workload(**w) for name, w in saved["workloads"].items()})
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    dataset = Dataset(root, {})
    with dataset.server() as server:
        with server.connect() as conn:
            _setup(conn)
        server.flush_logs()
        for name, generate in (("bulk", _bulk), ("oltp", _oltp)):
            started = time.monotonic()
            dataset.workloads[name] = _record(server, name, generate)
            w = dataset.workloads[name]
            print(f"generated {name}: {w.row_changes:,} row changes in {w.transactions:,} transactions, "
                  f"{w.size_bytes / 1e6:.1f} MB in {', '.join(w.files)} ({time.monotonic() - started:.0f}s)")
    # Written last: a datadir without a manifest is half-generated and is regenerated on the next run.
    manifest.write_text(json.dumps(
        {"version": WORKLOAD_VERSION, "workloads": {n: asdict(w) for n, w in dataset.workloads.items()}},
        indent=2,
    ))
    return dataset


def _record(server: MariaDBServer, name: str, generate: Any) -> Workload:
    """Run one generator and flush the log, so its events fill binlog files of their own."""
    first = server.current_binlog_position().file
    with server.connect() as conn:
        row_changes, transactions = generate(conn)
    server.flush_logs()
    last = server.current_binlog_position().file
    files = [p.name for p in server.binlog_files() if first <= p.name < last]
    size = sum((server.binlog_dir / f).stat().st_size for f in files)
    return Workload(name, files, row_changes, transactions, size)


def _setup(conn: Connection) -> None:
    """Schemas and the OLTP workload's starting accounts, kept out of the measured binlog files."""
    statements = [
        "CREATE DATABASE bench_bulk CHARACTER SET utf8mb4",
        """CREATE TABLE bench_bulk.orders (
            id INT NOT NULL PRIMARY KEY,
            customer_id BIGINT NOT NULL,
            name VARCHAR(64) NOT NULL,
            amount DECIMAL(12,2) NOT NULL,
            created_at DATETIME(6) NOT NULL,
            score DOUBLE,
            status TINYINT NOT NULL,
            note TEXT
        )""",
        "CREATE DATABASE bench_oltp CHARACTER SET utf8mb4",
        """CREATE TABLE bench_oltp.accounts (
            id INT NOT NULL PRIMARY KEY,
            email VARCHAR(64) NOT NULL,
            balance DECIMAL(12,2) NOT NULL,
            status TINYINT NOT NULL,
            updated_at DATETIME(6) NOT NULL
        )""",
        """CREATE TABLE bench_oltp.orders (
            id BIGINT NOT NULL PRIMARY KEY,
            account_id INT NOT NULL,
            total DECIMAL(12,2) NOT NULL,
            qty INT NOT NULL,
            state VARCHAR(16) NOT NULL,
            created_at DATETIME(6) NOT NULL
        )""",
        """CREATE TABLE bench_oltp.events (
            id BIGINT NOT NULL PRIMARY KEY,
            account_id INT NOT NULL,
            kind VARCHAR(32) NOT NULL,
            payload TEXT,
            created_at DATETIME(6) NOT NULL
        )""",
    ]
    rng = random.Random(0)
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
        cur.executemany(
            "INSERT INTO bench_oltp.accounts VALUES (%s, %s, %s, %s, %s)",
            [(i, f"user{i}@example.com", _money(rng, 5000), 1, _when(rng)) for i in range(1, OLTP_ACCOUNTS + 1)],
        )


def _bulk(conn: Connection) -> tuple[int, int]:
    """Multi-row INSERTs, then UPDATEs and DELETEs of BULK_STATEMENT_ROWS rows per statement."""
    rng = random.Random(1)
    step = BULK_STATEMENT_ROWS
    statements = 0
    with conn.cursor() as cur:
        for start in range(1, BULK_INSERTS + 1, step):
            rows = [
                (
                    i, rng.randrange(1, 10**12), _text(rng, 2, 4), _money(rng, 100_000), _when(rng),
                    rng.random() * 1000, rng.randrange(8), _text(rng, 9, 15),
                )
                for i in range(start, start + step)
            ]
            # pymysql turns the batch into one multi-row INSERT statement.
            cur.executemany("INSERT INTO bench_bulk.orders VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows)
            statements += 1
        for start in range(1, BULK_UPDATES + 1, step):
            cur.execute(
                "UPDATE bench_bulk.orders SET amount = amount + 1.25, score = score * 1.5, "
                "status = MOD(status + 1, 8), note = CONCAT('upd ', note) WHERE id BETWEEN %s AND %s",
                (start, start + step - 1),
            )
            statements += 1
        for start in range(BULK_UPDATES + 1, BULK_UPDATES + BULK_DELETES + 1, step):
            cur.execute("DELETE FROM bench_bulk.orders WHERE id BETWEEN %s AND %s", (start, start + step - 1))
            statements += 1
    return BULK_INSERTS + BULK_UPDATES + BULK_DELETES, statements


def _oltp(conn: Connection) -> tuple[int, int]:
    """OLTP_TRANSACTIONS autocommit statements, each changing exactly one row of one of three tables."""
    rng = random.Random(2)
    orders: list[int] = []
    events: list[int] = []
    next_id = 1
    with conn.cursor() as cur:
        for _ in range(OLTP_TRANSACTIONS):
            account = rng.randrange(1, OLTP_ACCOUNTS + 1)
            op = rng.random()
            if op < 0.25 or not orders:
                cur.execute(
                    "INSERT INTO bench_oltp.orders VALUES (%s, %s, %s, %s, %s, %s)",
                    (next_id, account, _money(rng, 1000), rng.randrange(1, 10), "new", _when(rng)),
                )
                orders.append(next_id)
            elif op < 0.45 or not events:
                cur.execute(
                    "INSERT INTO bench_oltp.events VALUES (%s, %s, %s, %s, %s)",
                    (next_id, account, rng.choice(("login", "view", "click", "logout")), _text(rng, 4, 12),
                     _when(rng)),
                )
                events.append(next_id)
            elif op < 0.70:
                cur.execute(
                    "UPDATE bench_oltp.accounts SET balance = balance + %s, updated_at = %s WHERE id = %s",
                    (_money(rng, 100) + Decimal("0.01"), _when(rng), account),
                )
            elif op < 0.85:
                cur.execute(
                    "UPDATE bench_oltp.orders SET qty = qty + 1, state = %s WHERE id = %s",
                    (rng.choice(("paid", "shipped", "closed")), rng.choice(orders)),
                )
            else:
                table, ids = ("orders", orders) if rng.random() < 0.5 else ("events", events)
                victim = ids.pop(rng.randrange(len(ids)))
                cur.execute(f"DELETE FROM bench_oltp.{table} WHERE id = %s", (victim,))
            if cur.rowcount != 1:
                raise RuntimeError(f"OLTP statement changed {cur.rowcount} rows instead of one")
            next_id += 1
    return OLTP_TRANSACTIONS, OLTP_TRANSACTIONS


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(low, high)))


def _money(rng: random.Random, high: int) -> Decimal:
    return Decimal(rng.randrange(high * 100)).scaleb(-2)


def _when(rng: random.Random) -> datetime:
    return _EPOCH + timedelta(seconds=rng.randrange(10**8), microseconds=rng.randrange(10**6))
