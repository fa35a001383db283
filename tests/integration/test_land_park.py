"""A parked table (streaming_job/parking.py; docs/LAND.md, "Parked tables"): a table whose mirror holds more rows than
land.park_rows (1000 here) gets an ALTER that is no safe widening (latin1 text -> VARBINARY, a DECIMAL scale) while
another table takes a steady trickle of writes and a running land job (`--trigger 1s`) lands them.

The mirror's rewrite runs beside the batches. A rewrite of a few thousand rows takes milliseconds, so the job runs
with its parked tables' rewrites held at their start until the test opens a gate (tests/harness/park_gate.py);
everything else is the job as it is. While the rewrite waits: the park file says so, and batches go on landing the
other table (its rows written after the ALTER are in its mirror, as delta-rs reads it) and none of the
parked table's changes made after the ALTER. Then the job is killed with SIGKILL, `binlake status` shows the park,
and the job started again (no gate) rewrites the mirror, catches the table up from Kafka and goes on. At the end
every mirror equals the server's SELECT as delta-rs reads it (not Spark, not binlake), and every row
change of the binlog is once in the change logs (mariadb-binlog --verbose's counts). Delta on local disk, binlake's
Kafka source."""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from streaming_job.generations import change_log_name
from streaming_job.lake_files import LakeFiles
from streaming_job.parking import State, read_parks
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, daemon_running
from tests.harness.delta_rs import delta_rs_table
from tests.harness.land import RunningLand, committed_batches, landed_everything, plain_rows
from tests.harness.park_gate import GATE
from tests.harness.workloads import Trickle

pytestmark = pytest.mark.integration
ROWS = 3000  # above land.park_rows
ALTER = "ALTER TABLE big MODIFY a VARBINARY(40), MODIFY d DECIMAL(10,2)"


def _read(lake: Path, db: str, table: str) -> pa.Table | None:
    """A lake table as delta-rs reads it (None: not there yet)."""
    return delta_rs_table(lake / db / table) if (lake / db / table / "_delta_log").is_dir() else None


def _ids(lake: Path, db: str, table: str) -> set[int]:
    found = _read(lake, db, table)
    return set() if found is None else set(found.column("id").to_pylist())


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


def test_a_parked_table_lands_beside_the_others_across_a_kill(mariadb, kafka, tmp_path) -> None:
    # (Iceberg's parks: the same job, its format's parts in tests/unit/test_parking_iceberg.py; two more starts of
    # the job would double this test's time)
    db, prefix, lake = "park", "park", tmp_path / "lake"
    checkpoint, gate = lake / "_checkpoint", tmp_path / "gate"
    mariadb.execute(f"DROP DATABASE IF EXISTS {db}")
    mariadb.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    where = ["--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake), "--checkpoint",
             str(checkpoint)]
    args = ["land", *where, "--kafka-source", "binlake"]
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_LAND_PARK_ROWS": "1000", GATE: str(gate)}
    conn = mariadb.connect(db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE big (id INT PRIMARY KEY, a VARCHAR(24) CHARACTER SET latin1, d DECIMAL(10,4))")
        cur.execute(f"INSERT INTO big SELECT seq, IF(seq % 7 = 0, NULL, CONCAT('caf\u00e9-', seq)), seq / 10000 "
                    f"FROM seq_1_to_{ROWS}")
        cur.execute("CREATE TABLE o (id INT PRIMARY KEY, n BIGINT)")
    conn.commit()
    timings: dict[str, float] = {}
    started = time.monotonic()
    # the session's server holds other tests' databases: the daemon captures this one alone
    with daemon_running(mariadb, kafka, prefix, 4949, {"BINLAKE_FILTERS_INCLUDE": f"{db}.*"}) as watcher, \
            Trickle(mariadb, db, "o") as workload, contextlib.ExitStack() as jobs:
        workload.start()
        landing = jobs.enter_context(RunningLand([sys.executable, "-m", "tests.harness.park_gate", *args], env,
                                                 tmp_path / "land-1.log"))
        landing.until(lambda: len(_ids(lake, db, "big")) >= ROWS, timeout=180)  # the table's rows landed
        timings["first landed"] = time.monotonic() - started

        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(ALTER)
            altered = workload.written  # the other table's rows from here on were written after the ALTER
            for k in range(1, 4):  # the parked table's changes after it: held back until it catches up
                cur.execute(f"INSERT INTO big VALUES ({ROWS + k}, 0x00ff, 1.5)")
                cur.execute(f"UPDATE big SET d = d + 1 WHERE id = {k * 11}")
                cur.execute(f"DELETE FROM big WHERE id = {k * 13}")
        conn.commit()
        parked = landing.wait_for("parked (park 1)")
        landing.wait_for("park gate: the rewrite waits")

        parks = read_parks(LakeFiles.on_disk(), str(checkpoint))
        assert [(p.state, [t.table for t in p.tables]) for p in parks] == [(State.REWRITING, ["big"])]
        # The rewrite waits; two batches after the one that parked the table commit, landing the other table's rows
        seen = max(_ids(lake, db, "o"), default=0)
        landing.until(lambda: committed_batches(checkpoint) >= parks[0].tables[0].batch + 3, timeout=60)
        assert max(_ids(lake, db, "o")) > max(seen, altered + 1)
        assert [p.state for p in read_parks(LakeFiles.on_disk(), str(checkpoint))] == [State.REWRITING]
        big = _read(lake, db, "big")
        assert big is not None and ROWS + 1 not in big.column("id").to_pylist() and 13 in big.column("id").to_pylist()
        assert pa.types.is_string(big.schema.field("a").type)  # not rewritten yet
        assert not any("rewritten in" in line for line in landing.lines[parked:])
        timings["parked, the other table landing"] = time.monotonic() - started

        os.killpg(landing.proc.pid, 9)  # the job killed while the table is parked
        landing.proc.wait()
        status = subprocess.run([*BINLAKE, "status", *where, "--json"], env=env, capture_output=True, text=True,
                                timeout=120)
        assert status.returncode == 0, status.stderr[-2000:]
        tables = {t["table"]: t for t in orjson.loads(status.stdout)["tables"]}
        assert (tables[f"{db}.big"]["parked"] or "").startswith("rewriting"), tables[f"{db}.big"]
        assert time.time() - 120 < tables[f"{db}.big"]["parked_since"] < time.time()
        assert tables[f"{db}.o"]["parked"] is None

        # The job started again (no gate): the park's rewrite, its catch-up, and the batches after it
        landing = jobs.enter_context(RunningLand([*BINLAKE, *args], env, tmp_path / "land-2.log"))
        landing.wait_for("caught up to batch")
        timings["caught up"] = time.monotonic() - started
        workload.stop.set()
        workload.join()
        watcher.reach(mariadb)
        landing.until(lambda: landed_everything(kafka, prefix, checkpoint), timeout=120)  # the rest landed
        landing.stop()
        timings["all landed"] = time.monotonic() - started
    sys.stderr.write(f"timings: {timings}\n")

    # Every mirror equals the server's SELECT, as delta-rs reads it
    for table in ("big", "o"):
        want = {k[0]: {c: _plain(v) for c, v in r.items()} for k, r in plain_rows(conn, table, "id").items()}
        found = _read(lake, db, table)
        assert found is not None
        names = list(next(iter(want.values())))
        assert {r["id"]: r for r in found.select(names).to_pylist()} == want, table
    rewritten = _read(lake, db, "big")
    assert rewritten is not None and pa.types.is_binary(rewritten.schema.field("a").type)

    # Every row change of the binlog once in its table's change logs (every generation's)
    mariadb.flush_logs()
    counts = verbose_counts(mariadb.binlog_files()[:-1], db)
    for table, generations in (("big", 2), ("o", 1)):
        rows, number = [], 1
        while (found := _read(lake, db, change_log_name(table, number))) is not None:
            rows += found.select(["op", "seq", "row_index"]).to_pylist()
            number += 1
        assert number - 1 == generations, table  # the ALTER's types cannot join big's first change log
        changes = [r for r in rows if r["op"] in ("insert", "update", "delete")]
        got = collections.Counter(r["op"] for r in changes)
        assert dict(got) == {op: counts[(op, table)] for op in ("insert", "update", "delete")
                             if counts[(op, table)]}, table
        assert len({(r["seq"], r["row_index"]) for r in changes}) == len(changes), (table, "twice")
