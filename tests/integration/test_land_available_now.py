"""`binlake land --trigger available-now` on binlake's Kafka source after a land job was killed with SIGKILL in the
middle of a micro-batch lands everything Kafka held at its start, not only the batch it replays.

Spark 4.0 runs a query whose source does not support Trigger.AvailableNow (Python data sources) as a single batch
(SPARK-45178), and a restart's single batch is the one a kill left planned but not committed: the records after it
waited for the next run. Both ways it was seen: Spark's source (``--max-offsets-per-trigger``) killed, then
binlake's; binlake's killed, then binlake's again. Proof: every mirror equals the server's SELECT after each run,
and every change log holds mariadb-binlog --verbose's row changes once."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.harness.daemon import run_daemon
from tests.harness.land import kill_group, land_command, mirror_rows, plain_rows, run_land
from tests.harness.workloads import assert_kill_workload_landed, kill_workload

pytestmark = pytest.mark.integration

DB = "avnow"


def _last(checkpoint: Path, log: str) -> int:
    """The last micro-batch id in the checkpoint's ``offsets`` (planned) or ``commits`` (landed) log; -1: none."""
    return max((int(p.name) for p in (checkpoint / log).glob("[0-9]*")), default=-1)


def _killed_mid_batch(cmd: list[str], env: dict[str, str], checkpoint: Path, committed: int) -> None:
    """``cmd --trigger 1s`` started, and its process group killed with SIGKILL as soon as, after ``committed``
    micro-batches of its own landed, it has planned one (written its offsets) that it has not committed."""
    start = _last(checkpoint, "commits")
    proc = subprocess.Popen([*cmd, "--trigger", "1s"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (_last(checkpoint, "commits") >= start + committed
                   and _last(checkpoint, "offsets") > _last(checkpoint, "commits")):
            assert proc.poll() is None and time.monotonic() < deadline, "no micro-batch pending to kill in"
            time.sleep(0.01)
    finally:
        kill_group(proc)
    assert _last(checkpoint, "offsets") > _last(checkpoint, "commits")  # a batch left pending


def _more(conn, step: int) -> None:
    """Row changes after the kill workload's: inserts, updates, a delete, in 40 transactions."""
    with conn.cursor() as cur:
        for i in range(40):
            conn.begin()
            cur.execute("INSERT INTO a VALUES (%s, %s, %s)", (step * 1000 + i, f"s{step}", i))
            cur.execute("INSERT INTO b VALUES (%s, %s) ON DUPLICATE KEY UPDATE n = n + 1", (i * 3, step))
            if i % 5 == 0:
                cur.execute("DELETE FROM a WHERE id = %s", (step * 100 + i,))
            conn.commit()


def _assert_mirrors(spark, lake: Path, conn, when: str) -> None:
    for table in ("a", "b"):
        landed, want = mirror_rows(spark, lake, DB, table)[0], plain_rows(conn, table, "id")
        assert landed == want, f"{when}: {table} holds {len(landed)} rows, the server {len(want)}"


def test_available_now_after_a_kill_lands_all_kafka_held_at_its_start(make_mariadb, kafka, spark, tmp_path,
                                                                      monkeypatch) -> None:
    server = make_mariadb()
    conn = kill_workload(server, DB)
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "2000")  # many small records: many micro-batches
    run_daemon(server, kafka, DB)
    lake = tmp_path / "lake"
    cmd, env = land_command(kafka, DB, lake)
    checkpoint = lake / "_checkpoint"
    binlake = ("--kafka-source", "binlake")

    # Spark's source (bounded batches) killed mid-batch, more rows, then available-now on binlake's
    _killed_mid_batch([*cmd, "--max-offsets-per-trigger", "8"], env, checkpoint, committed=1)
    _more(conn, 1)
    run_daemon(server, kafka, DB)
    assert run_land(kafka, DB, lake, *binlake) == 0
    _assert_mirrors(spark, lake, conn, "after Spark's source was killed")

    # binlake's source killed mid-batch, more rows, then available-now on binlake's again
    _more(conn, 2)
    run_daemon(server, kafka, DB)
    _killed_mid_batch([*cmd, *binlake], env, checkpoint, committed=0)
    _more(conn, 3)
    run_daemon(server, kafka, DB)
    assert run_land(kafka, DB, lake, *binlake) == 0
    assert_kill_workload_landed(spark, lake, server, conn, DB)
