"""Fault rounds: kill -9 one part of the running pipeline under a steady workload, then prove that
nothing was lost and nothing landed twice.

    .venv/bin/python -m bench.faults --rounds 50 [--seed N] [--dir DIR] [--victims daemon,land,kafka,mariadb]

A private MariaDB and Kafka broker (the devstack servers, data in DIR, the same ports on every restart),
``binlake run`` and ``binlake land --trigger 1s`` (each its own process) run while a workload commits
mixed transactions (multi-row inserts, updates, key moves, deletes, every transaction touching two or
three tables) and records each commit's GTID from the server (``@@last_gtid``). Each round kill -9s one
victim at a random moment, restarts it, stops the workload and waits until the daemon has committed the
server's last binlog position and the landing query has landed every committed Kafka record. Then:

* every mirror equals the server's ``SELECT *`` (every column, by primary key);
* per GTID and per table and operation the change logs hold exactly the row changes
  ``mariadb-binlog --verbose`` shows in the server's binlogs: none missing, none twice;
* no (seq, row_index) twice, and every GTID the workload saw committed is there.

The seed is printed; the same seed gives the same victims, moments and transactions.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql

from ingester.cli.demo import _committed_position
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer, free_tcp_port

PREFIX = "faults"
DB = "faults"
VICTIMS = ("daemon", "land", "kafka", "mariadb")
BINLAKE = [sys.executable, "-m", "ingester.cli.main"]
SCHEMA = [
    "CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(32) NOT NULL, balance DECIMAL(12,2) NOT NULL, "
    "n BIGINT NOT NULL DEFAULT 0)",
    "CREATE TABLE ledger (id BIGINT PRIMARY KEY, acct INT NOT NULL, amount DECIMAL(12,2) NOT NULL, "
    "note VARCHAR(64))",
    "CREATE TABLE pairs (a INT NOT NULL, b VARCHAR(8) NOT NULL, v BIGINT, PRIMARY KEY (a, b))",
]
KEYS = {"acct": ("id",), "ledger": ("id",), "pairs": ("a", "b")}
CATCH_UP_TIMEOUT = 600.0
# Connection errors of a server that is gone or restarting: the workload reconnects.
_GONE = (pymysql.err.OperationalError, pymysql.err.InterfaceError, ConnectionError, OSError)


class FaultError(RuntimeError):
    """A round found loss, duplication or a part that did not recover; the message says which."""


@dataclass
class Ledger:
    """What the workload committed: GTIDs the server acknowledged, and commits whose outcome the
    crash hid (they count only if the binlog has them)."""

    gtids: list[str] = field(default_factory=list)
    transactions: int = 0
    ambiguous: int = 0
    errors: int = 0


class Workload:
    """Mixed transactions at a steady rate on its own thread, surviving server restarts."""

    def __init__(self, server: MariaDBServer, seed: int, rate: float, key_base: int = 0, record: bool = True) -> None:
        """key_base keeps the keys of parallel workloads apart; record=False keeps no GTIDs (a soak's
        millions of transactions)."""
        self.server, self.rnd, self.rate, self.record = server, random.Random(seed), rate, record
        self.ledger = Ledger()
        self.key_base = key_base
        self.next_acct, self.next_ledger = key_base + 1, key_base + 1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: pymysql.connections.Connection | None = None
        self.failure: BaseException | None = None  # anything but a lost connection stops the workload

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="faults-workload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
        if self.failure is not None:
            raise FaultError(f"the workload stopped: {self.failure}")

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            next_at += interval
            try:
                self._transaction()
            except (pymysql.err.MySQLError, OSError) as exc:
                if not isinstance(exc, _GONE):
                    self.failure = exc
                    return
                self.ledger.errors += 1
                self._conn = None
                self._stop.wait(0.2)
                next_at = time.monotonic()
            if (pause := next_at - time.monotonic()) > 0:
                self._stop.wait(pause)
            elif pause < -1.0:
                next_at = time.monotonic()  # behind by more than a second: drop the backlog, keep the rate

    def _transaction(self) -> None:
        """One transaction of several statements; its GTID recorded once COMMIT is acknowledged."""
        if self._conn is None:
            self._conn = self.server.connect(DB, autocommit=False, connect_timeout=2, read_timeout=10,
                                             write_timeout=10)
        rnd, conn = self.rnd, self._conn
        with conn.cursor() as cur:
            kind = rnd.random()
            lo_key, hi = self.key_base + 1, max(self.next_acct - 1, self.key_base + 1)
            if kind < 0.35 or self.next_acct < self.key_base + 20:  # multi-row insert
                n = rnd.randint(1, 5)
                rows = [(self.next_acct + i, f"owner-{self.next_acct + i}", Decimal(rnd.randint(0, 10**6)) / 100)
                        for i in range(n)]
                self.next_acct += n
                cur.executemany("INSERT INTO acct (id, owner, balance) VALUES (%s, %s, %s)", rows)
                cur.execute("INSERT INTO pairs VALUES (%s, %s, %s)", (rows[0][0], f"k{rnd.randint(0, 9)}", n))
            elif kind < 0.75:  # transfer: two updates
                a, b = rnd.randint(lo_key, hi), rnd.randint(lo_key, hi)
                amount = Decimal(rnd.randint(1, 10000)) / 100
                cur.execute("UPDATE acct SET balance = balance - %s, n = n + 1 WHERE id = %s", (amount, a))
                cur.execute("UPDATE acct SET balance = balance + %s, n = n + 1 WHERE id = %s", (amount, b))
            elif kind < 0.85:  # bulk update of a key range
                lo = rnd.randint(lo_key, hi)
                cur.execute("UPDATE acct SET n = n + 1, owner = CONCAT('bulk-', id) WHERE id BETWEEN %s AND %s",
                            (lo, lo + 20))
                cur.execute("UPDATE pairs SET v = v + 1 WHERE a BETWEEN %s AND %s", (lo, lo + 50))
            elif kind < 0.95:  # deletes
                a = rnd.randint(lo_key, hi)
                cur.execute("DELETE FROM acct WHERE id = %s", (a,))
                cur.execute("DELETE FROM pairs WHERE a = %s", (a,))
            else:  # a key moves
                a = rnd.randint(lo_key, hi)
                cur.execute("UPDATE acct SET id = %s WHERE id = %s", (self.next_acct, a))
                self.next_acct += 1
            cur.execute("INSERT INTO ledger VALUES (%s, %s, %s, %s)",
                        (self.next_ledger, rnd.randint(lo_key, hi), Decimal(rnd.randint(-10**5, 10**5)) / 100,
                         f"tx {self.next_ledger}" if rnd.random() < 0.8 else None))
            self.next_ledger += 1
            try:
                conn.commit()
            except _GONE:
                self.ledger.ambiguous += 1  # committed or not: only the binlog knows
                raise
            if self.record:
                cur.execute("SELECT @@last_gtid")
                self.ledger.gtids.append(cur.fetchone()[0])
        self.ledger.transactions += 1


def _pid_from(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().split()[0])
    return None


class Stack:
    """MariaDB, Kafka, ``binlake run`` and ``binlake land`` with their data and logs in one directory."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.server = MariaDBServer(datadir=base / "mariadb")
        self.broker = KafkaBroker(datadir=base / "kafka")
        self.lake, self.checkpoint = base / "lake", base / "checkpoint"
        self.daemon_port, self.land_port = free_tcp_port(), free_tcp_port()
        self.daemon: subprocess.Popen[bytes] | None = None
        self.land: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.server.start()
        self.broker.start()
        self.server.execute(f"CREATE DATABASE IF NOT EXISTS {DB} CHARACTER SET utf8mb4")
        conn = self.server.connect(DB)
        with conn.cursor() as cur:
            for ddl in SCHEMA:
                cur.execute(ddl)
        conn.close()
        self.start_daemon()
        self.start_land()
        self.wait_daemon_ready(time.monotonic() + CATCH_UP_TIMEOUT)

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
        with (self.base / log_name).open("ab") as log:
            # Own process group: kill -9 takes the Spark driver's JVM and Python workers with it.
            return subprocess.Popen([*BINLAKE, *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)

    def start_daemon(self) -> None:
        self.daemon = self._spawn(["run", "--source", self.server.url, "--kafka", self.broker.bootstrap,
                                   "--topic-prefix", PREFIX, "--server-id", "7007",
                                   "--metrics-port", str(self.daemon_port)], "daemon.log")

    def start_land(self) -> None:
        self.land = self._spawn(["land", "--kafka", self.broker.bootstrap, "--topic-prefix", PREFIX,
                                 "--lake", str(self.lake), "--checkpoint", str(self.checkpoint),
                                 "--trigger", "1s", "--master", "local[1]",
                                 "--metrics-port", str(self.land_port)], "land.log")

    def kill(self, victim: str) -> int:
        """kill -9 the victim (the whole process group of ours) and reap it; returns its pid."""
        if victim in ("daemon", "land"):
            proc = self.daemon if victim == "daemon" else self.land
            assert proc is not None
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return proc.pid
        server: MariaDBServer | KafkaBroker = self.server if victim == "mariadb" else self.broker
        pid_file = server.datadir / ("mariadbd.pid" if victim == "mariadb" else "kafka.pid")
        pid = _pid_from(pid_file)
        if pid is None:
            raise FaultError(f"{victim}: no pid in {pid_file}")
        os.kill(pid, signal.SIGKILL)
        server.stop()  # reaps the killed process; the datadir stays
        return pid

    def restart(self, victim: str) -> None:
        {"daemon": self.start_daemon, "land": self.start_land, "kafka": self.broker.start,
         "mariadb": self.server.start}[victim]()

    def check_alive(self) -> None:
        """Neither may stop on its own: each must ride out the other victims' faults."""
        if self.daemon is not None and self.daemon.poll() is not None:
            raise FaultError(f"binlake run exited with status {self.daemon.returncode}; see {self.base / 'daemon.log'}")
        if self.land is not None and self.land.poll() is not None:
            raise FaultError(f"binlake land exited with status {self.land.returncode}; see {self.base / 'land.log'}")

    def stop(self) -> None:
        for proc in (self.daemon, self.land):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        self.broker.stop()
        self.server.stop()

    # -- catching up -------------------------------------------------------------------------------

    def wait_caught_up(self, deadline: float) -> None:
        """Until the daemon committed the server's binlog end to Kafka and land landed all of Kafka."""
        file, position = self.server.execute("SHOW MASTER STATUS")[0][:2]
        target = (file, int(position))
        while _committed_position(self.daemon_port) < target:
            self._wait_step(deadline, f"binlake run has not committed {file}:{position} to Kafka")
        while (landed := self.landed_offsets()) != (end := self.kafka_end_offsets()):
            self._wait_step(deadline, f"binlake land has not landed everything: at {landed}, Kafka ends at {end}")

    def wait_daemon_ready(self, deadline: float) -> None:
        """Until the daemon is streaming (its /readyz: connected to the source and Kafka): the rounds kill a running
        pipeline. (A source that refuses the daemon's first connection stops it: its preflight exits with one line.)"""
        import urllib.error
        import urllib.request

        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.daemon_port}/readyz", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            self._wait_step(deadline, "binlake run did not become ready")

    def _wait_step(self, deadline: float, what: str) -> None:
        self.check_alive()
        if time.monotonic() > deadline:
            raise FaultError(what)
        time.sleep(0.5)

    def landed_offsets(self) -> dict[str, dict[str, int]]:
        """The Kafka end offsets of the query's last committed micro-batch (Spark's checkpoint)."""
        commits = [int(p.name) for p in (self.checkpoint / "commits").glob("[0-9]*")]
        if not commits:
            return {}
        lines = (self.checkpoint / "offsets" / str(max(commits))).read_text().splitlines()
        return {t: {p: int(o) for p, o in parts.items()} for t, parts in json.loads(lines[2]).items()}

    def kafka_end_offsets(self) -> dict[str, dict[str, int]]:
        """The end offsets of the table topics as a read_committed consumer sees them."""
        from ingester.cli.demo import kafka_end_offsets

        return kafka_end_offsets(self.broker.bootstrap, PREFIX)


# -- the checks ------------------------------------------------------------------------------------

_GTID = re.compile(rb"^#.*\bGTID (\d+-\d+-\d+)\b", re.M)
_ROW = re.compile(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]+)`\.`([^`]+)`", re.M)
_OPS = {b"INSERT INTO": "insert", b"UPDATE": "update", b"DELETE FROM": "delete"}


def binlog_changes(server: MariaDBServer) -> collections.Counter[tuple[str, str, str]]:
    """(gtid, table, op) -> row changes, as ``mariadb-binlog --verbose`` reads the server's binlogs."""
    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for path in server.binlog_files():
        out = subprocess.run(["mariadb-binlog", "--verbose", str(path)], capture_output=True, check=False).stdout
        marks = [(m.start(), m.group(1).decode()) for m in _GTID.finditer(out)]
        i, gtid = 0, ""
        for m in _ROW.finditer(out):
            while i < len(marks) and marks[i][0] < m.start():
                gtid = marks[i][1]
                i += 1
            if m.group(2).decode() == DB:
                counts[(gtid, m.group(3).decode(), _OPS[m.group(1)])] += 1
    return counts


def delta_query(table: Path, sql: str) -> Any:
    """``sql`` over a Delta table named ``t``, as delta-rs's query engine reads it (deletion vectors applied): an
    Arrow table. The checks read the lake with a reader binlake did not write, and without a Spark job."""
    import deltalake
    import pyarrow as pa

    return pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(table))).execute(sql).read_all())


def check_mirrors(stack: Stack) -> tuple[int, list[str]]:
    """Every mirror (read by delta-rs) against the server's SELECT *: (mirror rows, what differs)."""
    problems, mirror_rows = [], 0
    conn = stack.server.connect(DB)
    for table, key in KEYS.items():
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            server_rows = {tuple(r[names.index(k)] for k in key): dict(zip(names, r, strict=True))
                           for r in cur.fetchall()}
        read = delta_query(stack.lake / DB / table, "SELECT * FROM t").to_pylist()
        mirror = {tuple(r[k] for k in key): {n: r[n] for n in names} for r in read}
        mirror_rows += len(mirror)
        if mirror != server_rows:
            missing = server_rows.keys() - mirror.keys()
            extra = mirror.keys() - server_rows.keys()
            wrong = [k for k in server_rows.keys() & mirror.keys() if server_rows[k] != mirror[k]]
            problems.append(f"mirror {table}: {len(missing)} rows missing (e.g. {sorted(missing)[:3]}), "
                            f"{len(extra)} extra (e.g. {sorted(extra)[:3]}), {len(wrong)} differ "
                            f"(e.g. {[(server_rows[k], mirror[k]) for k in sorted(wrong)[:1]]})")
    conn.close()
    return mirror_rows, problems


def check(stack: Stack, acknowledged: list[str]) -> tuple[int, int, int]:
    """Mirrors == SELECT, change logs == the binlog per GTID (both read by delta-rs); returns (mirror rows, row
    changes, GTIDs)."""
    mirror_rows, problems = check_mirrors(stack)
    want = binlog_changes(stack.server)
    got: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for table in KEYS:
        changes = stack.lake / DB / f"{table}__changes"
        for r in delta_query(changes, "SELECT gtid, op, COUNT(*) AS n FROM t GROUP BY gtid, op").to_pylist():
            got[(r["gtid"], table, r["op"])] = r["n"]
        dup = delta_query(changes, "SELECT seq, row_index FROM t GROUP BY seq, row_index HAVING COUNT(*) > 1").num_rows
        if dup:
            problems.append(f"change log {table}: {dup} (seq, row_index) pairs more than once")
    if got != want:
        short = {k: (want[k], got[k]) for k in sorted(want.keys() | got.keys()) if want[k] != got[k]}
        problems.append(f"change logs differ from mariadb-binlog in {len(short)} (gtid, table, op) counts "
                        f"(binlog, lake), e.g. {list(short.items())[:4]}")
    lost = set(acknowledged) - {g for g, _, _ in want}
    if lost:
        problems.append(f"{len(lost)} acknowledged commits are not in the server's binlog, e.g. {sorted(lost)[:3]}")
    if problems:
        raise FaultError("; ".join(problems))
    return mirror_rows, sum(got.values()), len({g for g, _, _ in got})


# -- rounds ----------------------------------------------------------------------------------------


@dataclass
class RoundResult:
    number: int
    victim: str
    ok: bool
    line: str


def victim_order(rnd: random.Random, rounds: int, victims: tuple[str, ...]) -> list[str]:
    """Each victim once per cycle, in a shuffled order: rounds per victim differ by at most one."""
    order: list[str] = []
    while len(order) < rounds:
        cycle = list(victims)
        rnd.shuffle(cycle)
        order += cycle
    return order[:rounds]


def run_rounds(base: Path, rounds: int, seed: int, victims: tuple[str, ...] = VICTIMS, rate: float = 40.0,
               say: Any = print) -> list[RoundResult]:
    """Start the stack in base, run the rounds, stop everything; one line per round through say()."""
    rnd = random.Random(seed)
    say(f"faults: seed {seed}, {rounds} rounds, victims {', '.join(victims)}, workload {rate:g} tx/s, in {base}")
    stack = Stack(base)
    workload = Workload(stack.server, seed, rate)
    results: list[RoundResult] = []
    try:
        stack.start()
        for number, victim in enumerate(victim_order(rnd, rounds, victims), 1):
            before = (workload.ledger.transactions, workload.ledger.ambiguous)
            started = time.monotonic()
            workload.start()
            time.sleep(rnd.uniform(1.0, 6.0))
            stack.check_alive()
            killed_at = time.monotonic() - started
            pid = stack.kill(victim)
            down = rnd.uniform(0.0, 3.0)
            time.sleep(down)
            restarted = time.monotonic()
            stack.restart(victim)
            restart_s = time.monotonic() - restarted
            time.sleep(rnd.uniform(1.0, 3.0))  # the workload goes on after the restart
            workload.stop()
            tx = workload.ledger.transactions - before[0]
            ambiguous = workload.ledger.ambiguous - before[1]
            stop_at = time.monotonic()
            head = (f"round {number}/{rounds} {victim:<7} kill -9 pid {pid} at {killed_at:.1f}s, down {down:.1f}s "
                    f"(+{restart_s:.1f}s restart), {tx} tx ({ambiguous} ambiguous)")
            try:
                stack.wait_caught_up(time.monotonic() + CATCH_UP_TIMEOUT)
                caught = time.monotonic() - stop_at
                mirror_rows, changes, gtids = check(stack, workload.ledger.gtids)
            except FaultError as exc:
                results.append(RoundResult(number, victim, False, f"{head}: FAILED: {exc}"))
                say(results[-1].line)
                break
            results.append(RoundResult(number, victim, True,
                                       f"{head}, caught up in {caught:.1f}s: mirrors == SELECT ({mirror_rows:,} "
                                       f"rows), {changes:,} row changes of {gtids:,} GTIDs exactly once: ok"))
            say(results[-1].line)
    finally:
        workload.stop()
        stack.stop()
    passed = sum(r.ok for r in results)
    per_victim = collections.Counter(r.victim for r in results)
    say(f"faults: seed {seed}: {passed}/{rounds} rounds passed "
        f"({', '.join(f'{v} {per_victim[v]}' for v in victims)})")
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8, help="fault rounds (default 8; the documented long run: 50)")
    p.add_argument("--seed", type=int, help="random seed (default: from the clock, printed)")
    p.add_argument("--dir", type=Path, help="directory for the servers' data, the lake and the logs "
                                            "(default: a new temporary directory, kept)")
    p.add_argument("--victims", default=",".join(VICTIMS), help="comma-separated subset of " + ",".join(VICTIMS))
    p.add_argument("--rate", type=float, default=40.0, help="workload transactions per second (default 40)")
    args = p.parse_args(argv)
    victims = tuple(v.strip() for v in args.victims.split(",") if v.strip())
    if unknown := set(victims) - set(VICTIMS):
        p.error(f"unknown victims: {', '.join(sorted(unknown))}")
    logging.getLogger("kafka").setLevel(logging.ERROR)  # one warning per end-offsets probe otherwise
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    base = (args.dir or Path(tempfile.mkdtemp(prefix="binlake-faults-"))).absolute()
    base.mkdir(parents=True, exist_ok=True)
    results = run_rounds(base, args.rounds, seed, victims, args.rate, say=lambda s: print(s, flush=True))
    return 0 if len(results) == args.rounds and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
