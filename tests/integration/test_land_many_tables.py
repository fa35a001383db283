"""Issue 20: a micro-batch touching many tables (50), whose tables land side by side on the driver's threads,
with ``kill -9`` of the land driver in the middle of landing it.

Proof, as in test_land: the server's own SELECT of every table (every mirror equals it, as delta-rs reads it,
and as Spark reads one of each kind), the row counts of ``mariadb-binlog --verbose`` (every change log holds
each row change exactly once), and the tables' Delta logs (every table has exactly one commit of each
micro-batch, one of which touched all 50). A table without a primary key (change log only) is covered by
test_land's ``test_every_type_lands_and_mirrors_equal_the_servers_select`` (its ``nopk`` table)."""

from __future__ import annotations

import collections
import datetime
import json
import logging
import os
import random
import re
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, run_daemon
from tests.harness.delta_rs import assert_delta_rs_change_log, assert_delta_rs_mirror, delta_rs_table, plain_value
from tests.harness.land import change_log_rows, committed_batches, kill_group, run_land

pytestmark = pytest.mark.integration

DB = "manytables"
TABLES = [f"t{i:02d}" for i in range(50)]
# Mostly an INT key (mirrors the driver keeps itself); composite keys led by an INT or a VARCHAR (also the
# driver's) and one led by a DOUBLE (the mirror goes through Spark's MERGE, on the JVM, beside the driver's
# tables); one BIGINT key with values beyond 32 bits. Half the INT-keyed tables have a DECIMAL wider than 18 digits
# (Parquet: fixed-length bytes, not int64).
KEYS = {"t07": ("a", "b"), "t23": ("a", "b"), "t41": ("b", "a"), "t45": ("f", "a")}
MERGED = "t45"  # its mirror goes through Spark's MERGE
BIGINT_KEY = "t30"
LINE = re.compile(rf"^\S+ \S+ \w+ binlake\.land (?:batch (\d+): (\d+) records in|{DB}\.(\w+): landed in )", re.M)


def _key(table: str) -> tuple[str, ...]:
    return KEYS.get(table, ("id",))


def _ddl(table: str) -> str:
    amount = "DECIMAL(30,10)" if int(table[1:]) % 2 else "DECIMAL(12,2)"
    values = f"name VARCHAR(40), amount {amount}, at DATETIME(6), data BLOB"
    if table in KEYS:
        a, b = KEYS[table]
        cols = {"a": "a INT NOT NULL", "b": "b VARCHAR(10) NOT NULL", "f": "f DOUBLE NOT NULL"}
        return f"CREATE TABLE {table} ({cols[a]}, {cols[b]}, {values}, PRIMARY KEY ({a}, {b}))"
    key = "BIGINT" if table == BIGINT_KEY else "INT"
    return f"CREATE TABLE {table} (id {key} PRIMARY KEY, {values})"


def _key_values(table: str, n: int) -> tuple[Any, ...]:
    """Row ``n``'s key in ``table``."""
    if table in KEYS:
        parts = {"a": n // 3, "b": f"k{n % 3}", "f": n % 3 + 0.25}
        return tuple(parts[c] for c in KEYS[table])
    return ((n - 20) * 2**33 + 7,) if table == BIGINT_KEY else (n,)


def _values(rnd: random.Random, table: str, n: int) -> tuple[Any, ...]:
    """A row's non-key values: text (not only ASCII), decimals at their scale's edges, microsecond datetimes,
    bytes with NULs; sometimes NULL."""
    scale = 10 if int(table[1:]) % 2 else 2
    amount = Decimal(rnd.randrange(-10**11, 10**11)).scaleb(-scale) if rnd.random() > 0.1 else None
    at = (datetime.datetime(1971, 1, 1) + datetime.timedelta(seconds=rnd.randrange(2 * 10**9),
                                                             microseconds=rnd.randrange(10**6))
          if rnd.random() > 0.1 else None)
    data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40))) + b"\x00" if rnd.random() > 0.1 else None
    return f"{table}/{n} ü€{rnd.randrange(10**6)}", amount, at, data


def _insert(cur, rnd: random.Random, table: str, rows: list[int]) -> None:
    cols = (*_key(table), "name", "amount", "at", "data")
    cur.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
                    [(*_key_values(table, n), *_values(rnd, table, n)) for n in rows])


def _where(table: str, n: int) -> tuple[str, tuple[Any, ...]]:
    return " AND ".join(f"{c} = %s" for c in _key(table)), _key_values(table, n)


def _phase_two(conn, rnd: random.Random, live: dict[str, list[int]], transactions: int) -> None:
    """Multi-table transactions, each touching every table: an update of a row's values, then by the table's
    turn a delete, an insert (of the next key: one deleted earlier may come back), a key moved (UPDATE of
    the key), or a second update of the same row."""
    with conn.cursor() as cur:
        for t in range(transactions):
            conn.begin()
            for table in TABLES:
                rows = live[table]
                n = rnd.choice(rows)
                where, key = _where(table, n)
                cur.execute(f"UPDATE {table} SET name = %s, amount = %s, at = %s, data = %s WHERE {where}",
                            (*_values(rnd, table, n), *key))
                turn = (t + int(table[1:])) % 4
                if turn == 0 and len(rows) > 3:  # a delete
                    gone = rows.pop(rnd.randrange(len(rows)))
                    where, key = _where(table, gone)
                    cur.execute(f"DELETE FROM {table} WHERE {where}", key)
                elif turn == 1:  # an insert
                    rows.append(max(rows) + 1)
                    _insert(cur, rnd, table, [rows[-1]])
                elif turn == 2 and table not in KEYS:  # a key moves
                    old = rows.pop(rnd.randrange(len(rows)))
                    rows.append(max([*rows, old]) + 1)
                    cur.execute(f"UPDATE {table} SET id = %s WHERE id = %s",
                                (*_key_values(table, rows[-1]), *_key_values(table, old)))
                else:  # a second update of the same row in the transaction
                    where, key = _where(table, n)
                    cur.execute(f"UPDATE {table} SET name = CONCAT(name, '+') WHERE {where}", key)
            conn.commit()


def _versions(path: Path) -> int:
    """A Delta table's newest version (-1: none yet)."""
    try:
        return max((int(n[:20]) for n in os.listdir(path / "_delta_log") if re.fullmatch(r"\d{20}\.json", n)),
                   default=-1)
    except FileNotFoundError:
        return -1


def _batch_commits(path: Path) -> collections.Counter:
    """How many of a table's commits carry each micro-batch's id (the Delta transaction, txnVersion)."""
    batches: collections.Counter = collections.Counter()
    for name in os.listdir(path / "_delta_log"):
        if re.fullmatch(r"\d{20}\.json", name):
            for line in (path / "_delta_log" / name).read_text().splitlines():
                txn = json.loads(line).get("txn") if line.strip() else None
                if txn is not None:
                    batches[int(txn["version"])] += 1
    return batches


def _batches_landed(log: str) -> list[tuple[int, int, set[str]]]:
    """(batch id, records in, tables landed) of each micro-batch in a land log (BINLAKE_DEBUG=1): a batch's
    line follows the "landed" lines of its tables."""
    out, tables = [], set()
    for m in LINE.finditer(log):
        if m.group(3) is not None:
            tables.add(m.group(3))
        else:
            out.append((int(m.group(1)), int(m.group(2)), tables))
            tables = set()
    return out


def _server_rows(conn, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        return {tuple(r[names.index(k)] for k in _key(table)): dict(zip(names, r, strict=True))
                for r in cur.fetchall()}


def test_fifty_tables_in_one_batch_survive_kill_minus_nine_of_the_driver_mid_batch(
        make_mariadb, kafka, spark, tmp_path, monkeypatch, capsys) -> None:
    server = make_mariadb()
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    conn = server.connect(DB)
    rnd = random.Random(20)
    with conn.cursor() as cur:
        for table in TABLES:
            cur.execute(_ddl(table))
    prefix, lake = "manytables", tmp_path / "lake"
    checkpoint = lake / "_checkpoint"
    live = {table: list(range(8)) for table in TABLES}
    with conn.cursor() as cur:  # phase 1: a few rows in every table
        for table in TABLES:
            _insert(cur, rnd, table, live[table])
    run_daemon(server, kafka, prefix)
    monkeypatch.setenv("BINLAKE_DEBUG", "1")  # the "<db>.<table>: landed" lines
    level = logging.getLogger("binlake.land").level
    capsys.readouterr()
    try:
        assert run_land(kafka, prefix, lake) == 0
    finally:
        logging.getLogger("binlake.land").setLevel(level)
    first = _batches_landed(capsys.readouterr().err)
    assert [b for b, _, _ in first] == [0], first
    assert first[0][2] == set(TABLES), f"not landed in batch 0: {sorted(set(TABLES) - first[0][2])}"
    mirrors = {table: lake / DB / table for table in TABLES}
    change_logs = {table: lake / DB / f"{table}__changes" for table in TABLES}
    before = {table: _versions(path) for table, path in mirrors.items()}
    assert min(before.values()) >= 0

    # Phase 2: one micro-batch of multi-table transactions, every one touching all 50 tables
    _phase_two(conn, rnd, live, transactions=40)
    run_daemon(server, kafka, prefix)
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_DEBUG": "1"}
    killed_log = tmp_path / "killed.log"
    with open(killed_log, "wb") as err:
        proc = subprocess.Popen([*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake",
                                 str(lake), "--checkpoint", str(checkpoint), "--trigger", "available-now"],
                                env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    # Mid-batch, deterministically enough: the driver lands the batch's tables on a few threads in name
    # order, ~10 ms each (change-log files and commit, the mirror's files read, rewritten, committed), but
    # t45's mirror goes through Spark's MERGE, which takes seconds. The mirrors' _delta_log directories are
    # polled every 5 ms (a listdir of 50 directories takes ~1 ms); once half of the mirrors has a new
    # version, the driver's process group (its JVM, its Python workers) is killed: while other tables are
    # being landed, and seconds before t45's MERGE could end the batch, so a poll late by a second still
    # kills mid-batch. The tables' Delta logs then show which had the batch, asserted below: some, not all.
    try:
        deadline = time.monotonic() + 240
        while sum(_versions(path) > before[t] for t, path in mirrors.items()) < len(TABLES) // 2:
            assert proc.poll() is None, killed_log.read_text()[-3000:]
            assert time.monotonic() < deadline, killed_log.read_text()[-3000:]
            time.sleep(0.005)
    finally:
        kill_group(proc)
    landed = {kind: [t for t in TABLES if _batch_commits(paths[t])[1]]
              for kind, paths in (("mirrors", mirrors), ("change logs", change_logs))}
    assert 0 < len(landed["mirrors"]) < len(TABLES), landed  # mid-batch: some mirrors with the batch, some without
    assert MERGED not in landed["mirrors"], landed
    assert committed_batches(checkpoint) == 1  # batch 0 only: batch 1 runs again

    capsys.readouterr()
    level = logging.getLogger("binlake.land").level
    try:
        assert run_land(kafka, prefix, lake) == 0
    finally:
        logging.getLogger("binlake.land").setLevel(level)
    replayed = _batches_landed(capsys.readouterr().err)
    # The batch ran again, whole: one micro-batch (id 1) in which all 50 tables landed
    assert [b for b, _, _ in replayed] == [1], replayed
    assert replayed[0][2] == set(TABLES), f"not landed in batch 1: {sorted(set(TABLES) - replayed[0][2])}"
    assert replayed[0][1] >= len(TABLES)  # records in: at least one per table's topic
    assert committed_batches(checkpoint) == 2

    # Each table has exactly one commit of each batch: the replay skipped what the killed run committed
    for table in TABLES:
        for path in (mirrors[table], change_logs[table]):
            assert _batch_commits(path) == {0: 1, 1: 1}, path

    # Every mirror equals the server's SELECT as delta-rs reads it; Spark reads one of each kind of table
    # and of each side of the kill (a Spark read costs ~0.2-1 s here: all 50 would add most of a minute)
    unlanded = [t for t in TABLES if t not in landed["mirrors"]]
    by_spark = {"t00", "t01", *KEYS, BIGINT_KEY, landed["mirrors"][-1], unlanded[0], TABLES[-1]}
    for table in TABLES:
        expected = _server_rows(conn, table)
        columns = list(next(iter(expected.values())))
        assert_delta_rs_mirror(mirrors[table], expected, columns, list(_key(table)))
        if table in by_spark:
            rows = spark.read.format("delta").load(str(mirrors[table])).collect()
            got = {tuple(r[k] for k in _key(table)): {c: plain_value(r[c]) for c in columns} for r in rows}
            assert len(got) == len(rows), f"{table}: duplicate keys in the mirror"
            assert sorted(got) == sorted(expected), table
            for key, row in expected.items():
                assert got[key] == row, f"{table} {key}: Spark {got[key]!r}, server {row!r}"

    # Every change log holds exactly the row changes mariadb-binlog --verbose saw, each once
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], DB)
    assert sum(counts.values()) > 50 * (8 + 40), counts
    for table in TABLES:
        # as delta-rs reads it, and Spark (the same rows) for the tables it read above
        changes = delta_rs_table(change_logs[table])
        ops, seqs, indexes, gtids, stamps, dates = (changes.column(c).to_pylist() for c in (
            "op", "seq", "row_index", "gtid", "commit_ts", "commit_date"))
        want = {op: counts[(op, table)] for op in ("insert", "update", "delete") if counts[(op, table)]}
        assert dict(collections.Counter(ops)) == want, table
        assert len(set(zip(seqs, indexes, strict=True))) == len(ops), f"{table}: duplicate changes"
        assert all(ts.date() == d and g for ts, d, g in zip(stamps, dates, gtids, strict=True)), table
        if table in by_spark:
            assert_delta_rs_change_log(change_logs[table], change_log_rows(spark, lake, DB, table))
