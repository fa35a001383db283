"""The decode benchmark's binlogs: a bulk and an OLTP workload, generated once on a private MariaDB; and the
growth dataset (``kind="growth"``): ten times the OLTP workload, single-row transactions over many tables, and one
large transaction, to see how cost grows with the work.

The server's datadir is cached under bench/data/decode-v<WORKLOAD_VERSION>/ (growth-v<GROWTH_VERSION>/); bump the
version whenever the generated events change, so stale caches are never measured.
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
from typing import Any, Literal

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

GROWTH_VERSION = 1
GROWTH_TRANSACTIONS = 10 * OLTP_TRANSACTIONS  # oltp10: the OLTP workload ten times over
GROWTH_TABLES = 300  # tables: OLTP_TRANSACTIONS single-row transactions spread over this many tables
GROWTH_BIG_ROWS = 200_000  # bigtx: one transaction inserting this many rows

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


def load_or_generate(regenerate: bool = False, kind: Literal["decode", "growth"] = "decode") -> Dataset:
    """The cached dataset, generating it (about a minute; the growth dataset a few) if it is missing, stale or
    regenerate is set."""
    if kind == "decode":
        root, version = DATA_ROOT / f"decode-v{WORKLOAD_VERSION}", WORKLOAD_VERSION
        setup, generators = _setup, (("bulk", _bulk), ("oltp", _oltp))
    else:
        root, version = DATA_ROOT / f"growth-v{GROWTH_VERSION}", GROWTH_VERSION
        setup, generators = _growth_setup, (("oltp10", _oltp10), ("tables", _tables), ("bigtx", _bigtx))
    manifest = root / "manifest.json"
    if not regenerate and manifest.exists():
        saved = json.loads(manifest.read_text())
        return Dataset(root, {name: Workload(**w) for name, w in saved["workloads"].items()})
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    dataset = Dataset(root, {})
    with dataset.server() as server:
        with server.connect() as conn:
            setup(conn)
        server.flush_logs()
        for name, generate in generators:
            started = time.monotonic()
            dataset.workloads[name] = _record(server, name, generate)
            w = dataset.workloads[name]
            print(f"generated {name}: {w.row_changes:,} row changes in {w.transactions:,} transactions, "
                  f"{w.size_bytes / 1e6:.1f} MB in {', '.join(w.files)} ({time.monotonic() - started:.0f}s)")
    # Written last: a datadir without a manifest is half-generated and is regenerated on the next run.
    manifest.write_text(json.dumps(
        {"version": version, "workloads": {n: asdict(w) for n, w in dataset.workloads.items()}}, indent=2))
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


def _oltp_schema(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db} CHARACTER SET utf8mb4",
        f"""CREATE TABLE {db}.accounts (
            id INT NOT NULL PRIMARY KEY,
            email VARCHAR(64) NOT NULL,
            balance DECIMAL(12,2) NOT NULL,
            status TINYINT NOT NULL,
            updated_at DATETIME(6) NOT NULL
        )""",
        f"""CREATE TABLE {db}.orders (
            id BIGINT NOT NULL PRIMARY KEY,
            account_id INT NOT NULL,
            total DECIMAL(12,2) NOT NULL,
            qty INT NOT NULL,
            state VARCHAR(16) NOT NULL,
            created_at DATETIME(6) NOT NULL
        )""",
        f"""CREATE TABLE {db}.events (
            id BIGINT NOT NULL PRIMARY KEY,
            account_id INT NOT NULL,
            kind VARCHAR(32) NOT NULL,
            payload TEXT,
            created_at DATETIME(6) NOT NULL
        )""",
    ]


def _orders_table(db: str) -> list[str]:
    return [
        f"CREATE DATABASE {db} CHARACTER SET utf8mb4",
        f"""CREATE TABLE {db}.orders (
            id INT NOT NULL PRIMARY KEY,
            customer_id BIGINT NOT NULL,
            name VARCHAR(64) NOT NULL,
            amount DECIMAL(12,2) NOT NULL,
            created_at DATETIME(6) NOT NULL,
            score DOUBLE,
            status TINYINT NOT NULL,
            note TEXT
        )""",
    ]


def _accounts(conn: Connection, db: str) -> None:
    rng = random.Random(0)
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {db}.accounts VALUES (%s, %s, %s, %s, %s)",
            [(i, f"user{i}@example.com", _money(rng, 5000), 1, _when(rng)) for i in range(1, OLTP_ACCOUNTS + 1)],
        )


def _setup(conn: Connection) -> None:
    """Schemas and the OLTP workload's starting accounts, kept out of the measured binlog files."""
    with conn.cursor() as cur:
        for sql in _orders_table("bench_bulk") + _oltp_schema("bench_oltp"):
            cur.execute(sql)
    _accounts(conn, "bench_oltp")


def _growth_setup(conn: Connection) -> None:
    """The growth dataset's schemas (GROWTH_TABLES tables in bench_tables) and starting accounts."""
    with conn.cursor() as cur:
        for sql in _oltp_schema("bench_oltp10") + _orders_table("bench_bigtx"):
            cur.execute(sql)
        cur.execute("CREATE DATABASE bench_tables CHARACTER SET utf8mb4")
        for t in range(GROWTH_TABLES):
            cur.execute(f"CREATE TABLE bench_tables.t{t:03d} (id INT NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL, "
                        "amount DECIMAL(12,2) NOT NULL, at DATETIME(6) NOT NULL, note TEXT)")
    _accounts(conn, "bench_oltp10")


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


def _oltp(conn: Connection, db: str = "bench_oltp", transactions: int = OLTP_TRANSACTIONS) -> tuple[int, int]:
    """OLTP_TRANSACTIONS autocommit statements, each changing exactly one row of one of three tables."""
    rng = random.Random(2)
    orders: list[int] = []
    events: list[int] = []
    next_id = 1
    with conn.cursor() as cur:
        for _ in range(transactions):
            account = rng.randrange(1, OLTP_ACCOUNTS + 1)
            op = rng.random()
            if op < 0.25 or not orders:
                cur.execute(
                    f"INSERT INTO {db}.orders VALUES (%s, %s, %s, %s, %s, %s)",
                    (next_id, account, _money(rng, 1000), rng.randrange(1, 10), "new", _when(rng)),
                )
                orders.append(next_id)
            elif op < 0.45 or not events:
                cur.execute(
                    f"INSERT INTO {db}.events VALUES (%s, %s, %s, %s, %s)",
                    (next_id, account, rng.choice(("login", "view", "click", "logout")), _text(rng, 4, 12),
                     _when(rng)),
                )
                events.append(next_id)
            elif op < 0.70:
                cur.execute(
                    f"UPDATE {db}.accounts SET balance = balance + %s, updated_at = %s WHERE id = %s",
                    (_money(rng, 100) + Decimal("0.01"), _when(rng), account),
                )
            elif op < 0.85:
                cur.execute(
                    f"UPDATE {db}.orders SET qty = qty + 1, state = %s WHERE id = %s",
                    (rng.choice(("paid", "shipped", "closed")), rng.choice(orders)),
                )
            else:
                table, ids = ("orders", orders) if rng.random() < 0.5 else ("events", events)
                victim = ids.pop(rng.randrange(len(ids)))
                cur.execute(f"DELETE FROM {db}.{table} WHERE id = %s", (victim,))
            if cur.rowcount != 1:
                raise RuntimeError(f"OLTP statement changed {cur.rowcount} rows instead of one")
            next_id += 1
    return transactions, transactions


def _oltp10(conn: Connection) -> tuple[int, int]:
    return _oltp(conn, "bench_oltp10", GROWTH_TRANSACTIONS)


def _tables(conn: Connection) -> tuple[int, int]:
    """OLTP_TRANSACTIONS autocommit statements over GROWTH_TABLES tables: inserts, updates and deletes of one
    row each, the table picked at random (every table gets some)."""
    rng = random.Random(3)
    live: list[list[int]] = [[] for _ in range(GROWTH_TABLES)]
    with conn.cursor() as cur:
        for i in range(OLTP_TRANSACTIONS):
            t = i if i < GROWTH_TABLES else rng.randrange(GROWTH_TABLES)
            op = rng.random()
            if op < 0.6 or not live[t]:
                cur.execute(f"INSERT INTO bench_tables.t{t:03d} VALUES (%s, %s, %s, %s, %s)",
                            (i, _text(rng, 1, 3)[:32], _money(rng, 1000), _when(rng), _text(rng, 3, 9)))
                live[t].append(i)
            elif op < 0.9:
                cur.execute(f"UPDATE bench_tables.t{t:03d} SET amount = amount + 1, note = %s WHERE id = %s",
                            (_text(rng, 2, 5), rng.choice(live[t])))
            else:
                cur.execute(f"DELETE FROM bench_tables.t{t:03d} WHERE id = %s", (live[t].pop(),))
            if cur.rowcount != 1:
                raise RuntimeError(f"tables statement changed {cur.rowcount} rows instead of one")
    return OLTP_TRANSACTIONS, OLTP_TRANSACTIONS


def _bigtx(conn: Connection) -> tuple[int, int]:
    """One transaction inserting GROWTH_BIG_ROWS rows (multi-row INSERTs of BULK_STATEMENT_ROWS)."""
    rng = random.Random(4)
    step = BULK_STATEMENT_ROWS
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        for start in range(1, GROWTH_BIG_ROWS + 1, step):
            cur.executemany("INSERT INTO bench_bigtx.orders VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", [
                (i, rng.randrange(1, 10**12), _text(rng, 2, 4), _money(rng, 100_000), _when(rng),
                 rng.random() * 1000, rng.randrange(8), _text(rng, 9, 15)) for i in range(start, start + step)])
        cur.execute("COMMIT")
    return GROWTH_BIG_ROWS, 1


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(low, high)))


def _money(rng: random.Random, high: int) -> Decimal:
    return Decimal(rng.randrange(high * 100)).scaleb(-2)


def _when(rng: random.Random) -> datetime:
    return _EPOCH + timedelta(seconds=rng.randrange(10**8), microseconds=rng.randrange(10**6))
