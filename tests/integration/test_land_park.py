"""A parked table (streaming_job/parking.py; docs/LAND.md, "Parked tables"): a table of a few hundred thousand rows
gets an ALTER that is no safe widening (latin1 text -> VARBINARY, a DECIMAL scale) while another table takes a steady
trickle of writes and a running land job (`--trigger 1s`) lands them. The mirror's rewrite runs beside the batches:
the other table's changes made after the ALTER are in its change log as of the rewrite's commit (batches committed
before it), the parked table's changes after the ALTER are not (they land after it, caught up from Kafka). The job
is killed with SIGKILL while the table is parked (the rewrite under way), `binlake status` shows the park, and the
job started again finishes it. At the end every mirror equals the server's SELECT (Spark, and delta-rs or
pyiceberg), and every row change of the binlog is once in the change logs (mariadb-binlog --verbose's counts).
Delta in a bucket landed by the Spark standalone cluster with Spark's Kafka source; Iceberg on local disk with
binlake's Kafka source."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming_job.generations import change_log_name
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, CheckpointWatcher
from tests.harness.delta_rs import delta_rs_table
from tests.harness.iceberg import catalog, pyiceberg_table
from tests.harness.land import RunningLand, committed_batches, kill_group, lake_frame, plain_rows, store_land_command
from tests.harness.workloads import Trickle

pytestmark = pytest.mark.integration
DB = "pk"
ROWS = 300_000
TEXT = ", ".join(f"{c} VARCHAR(24) CHARACTER SET latin1" for c in "abc")
ALTER = "ALTER TABLE big MODIFY a VARBINARY(40), MODIFY b VARBINARY(40), MODIFY c VARBINARY(40), MODIFY d DECIMAL(10,2)"
AFTER = ["INSERT INTO big VALUES ({k}, 0x00ff, 'x', NULL, 1.5)", "UPDATE big SET d = d + 1 WHERE id = {k}",
         "DELETE FROM big WHERE id = {j}"]


def _delta_commits(path: Path) -> list[tuple[int, dict[str, Any], list[str]]]:
    """A Delta table's commits: (timestamp ms, the metaData action's configuration or {}, files added)."""
    out = []
    for entry in sorted((path / "_delta_log").glob("*.json")):
        actions = [orjson.loads(line) for line in entry.read_text().splitlines()]
        ts = next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a)
        config = next((a["metaData"].get("configuration") or {} for a in actions if "metaData" in a), {})
        out.append((ts, config, [a["add"]["path"] for a in actions if "add" in a]))
    return out


def _as_of(fmt: str, lake: Path, table: str, ms: int) -> pa.Table:
    """A change log's rows committed before ``ms`` (epoch milliseconds)."""
    if fmt == "delta":
        path = lake / DB / table
        files = [f for ts, _, added in _delta_commits(path) if ts < ms for f in added]
        return pa.concat_tables([pq.read_table(path / f).select(["op", "commit_ts"]) for f in files]) if files \
            else pa.table({"op": pa.array([], pa.string())})
    found = catalog(lake).load_table((DB, table))
    snapshot = found.snapshot_as_of_timestamp(ms - 1)
    if snapshot is None:
        return pa.table({"op": pa.array([], pa.string())})
    return found.scan(snapshot_id=snapshot.snapshot_id).to_arrow().select(["op", "commit_ts"])


def _rewrite_commit(fmt: str, lake: Path) -> int:
    """When the mirror's rewrite committed (epoch ms): its one commit that records a statement's marker."""
    if fmt == "delta":
        return min(ts for ts, config, _ in _delta_commits(lake / DB / "big") if "binlake.statement" in config)
    mirror = catalog(lake).load_table((DB, "big"))
    return min(s.timestamp_ms for s in mirror.snapshots()
               if (s.summary.additional_properties.get("binlake.app-id") or "").endswith("~s1.0"))


def _mirror_rows(fmt: str, lake: Path) -> int:
    if fmt == "delta":
        log = lake / DB / "big" / "_delta_log"
        files: dict[str, int] = {}
        for entry in sorted(log.glob("*.json")) if log.is_dir() else ():
            for a in (orjson.loads(line) for line in entry.read_text().splitlines()):
                if "add" in a:
                    files[a["add"]["path"]] = orjson.loads(a["add"]["stats"])["numRecords"]
                elif "remove" in a:
                    files.pop(a["remove"]["path"], None)
        return sum(files.values())
    found = pyiceberg_table(lake, DB, "big")
    return 0 if found is None else found.num_rows


def _read(fmt: str, lake: Path, table: str) -> pa.Table | None:
    if fmt == "delta":
        return delta_rs_table(lake / DB / table) if (lake / DB / table / "_delta_log").is_dir() else None
    return pyiceberg_table(lake, DB, table)


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


@pytest.mark.parametrize(("fmt", "lake_shape"), [("delta", "cluster-s3"), ("iceberg", "local")],
                         indirect=["lake_shape"])
def test_a_parked_table_lands_beside_the_others_across_a_kill(make_mariadb, kafka, spark, lake_shape, tmp_path,
                                                              fmt) -> None:
    server = make_mariadb(binlog_row_metadata="MINIMAL")
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    prefix = f"park{fmt}"
    lake = lake_shape.lake(tmp_path)
    checkpoint = lake / "_checkpoint"
    where = ["--kafka", kafka.bootstrap, "--topic-prefix", prefix]
    if lake_shape.name == "cluster-s3":  # the production shape: the cluster, the lake and checkpoint in a bucket
        uri = lake_shape.uri(lake)
        cmd, land_env = store_land_command(kafka, lake_shape.store, prefix, uri, None, "--master",
                                           lake_shape.cluster.master, "--kafka-source", "spark")
        where += ["--lake", uri, "--checkpoint", f"{uri}/_checkpoint", "--s3-endpoint", lake_shape.store.endpoint,
                  "--s3-path-style"]
    else:
        where += ["--lake", str(lake), "--checkpoint", str(checkpoint), "--format", fmt]
        cmd, land_env = [*BINLAKE, "land", *where, "--kafka-source", "binlake"], {**os.environ,
                                                                               "PYTHONPATH": os.getcwd()}
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    daemon = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix",
                               prefix, "--server-id", "4949"], env=env, stderr=subprocess.DEVNULL)
    watcher = CheckpointWatcher(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")
    conn = server.connect(DB)
    workload = Trickle(server, DB, "o")
    landing: RunningLand | None = None
    timings: dict[str, float] = {}
    try:
        watcher.wait(lambda c: "file" in c, timeout=60)
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE big (id INT PRIMARY KEY, {TEXT}, d DECIMAL(10,4))")
            cur.execute(f"INSERT INTO big SELECT seq, CONCAT('caf\u00e9-', seq), CONCAT('b', seq), "
                        f"IF(seq % 7 = 0, NULL, CONCAT('\u00fc', seq)), seq / 10000 FROM seq_1_to_{ROWS}")
            cur.execute("CREATE TABLE o (id INT PRIMARY KEY, n BIGINT)")
        workload.start()
        landing = RunningLand(cmd, land_env)
        deadline = time.monotonic() + 300
        while _mirror_rows(fmt, lake) < ROWS:  # the table's rows landed
            assert landing.proc.poll() is None and time.monotonic() < deadline, "".join(landing.lines[-30:])
            time.sleep(0.5)

        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            started = time.monotonic()
            cur.execute(ALTER)
            timings["server ALTER"] = time.monotonic() - started
            cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
            altered = float(cur.fetchone()[0])
        parked = landing.wait_for("parked (park 1)")
        batches = committed_batches(checkpoint) if lake_shape.name == "local" else None
        with conn.cursor() as cur:  # the parked table's changes: held back until it catches up
            for k in range(1, 4):
                cur.execute(AFTER[0].format(k=ROWS + k))
                cur.execute(AFTER[1].format(k=k * 11))
                cur.execute(AFTER[2].format(j=k * 13))
        # the job killed while the table is parked, a batch after the park (the other table landing meanwhile)
        landing.wait_for("row changes landed", after=parked + 1)
        rewritten = any("rewritten in" in line for line in landing.lines)
        kill_group(landing.proc)
        assert not rewritten, "the rewrite committed before the kill: make it longer"
        if batches is not None:
            assert committed_batches(checkpoint) > batches  # batches committed while parked
        killed = time.monotonic()
        status = subprocess.run([*BINLAKE, "status", *where, "--json"], env=land_env, capture_output=True, text=True,
                                timeout=120)
        assert status.returncode == 0, status.stderr[-2000:]
        tables = {t["table"]: t for t in orjson.loads(status.stdout)["tables"]}
        assert tables[f"{DB}.big"]["parked"].startswith("rewriting"), tables[f"{DB}.big"]
        assert altered - 60 < tables[f"{DB}.big"]["parked_since"] < time.time()
        assert tables[f"{DB}.o"]["parked"] is None

        landing = RunningLand(cmd, land_env)  # the park found and finished
        landing.wait_for("caught up to batch")
        timings["kill to caught up"] = time.monotonic() - killed
        time.sleep(2)
        workload.stop.set()
        workload.join()
        end = server.current_binlog_position()
        watcher.wait(lambda c: (c["file"], c["position"]) >= (end.file, end.position))
        time.sleep(4)  # the running job lands the rest
        landing.stop()
        landing = None
    finally:
        workload.stop.set()
        if landing is not None:
            kill_group(landing.proc)
        daemon.terminate()
        daemon.wait()
        watcher.close()
    done = subprocess.run([*cmd, "--trigger", "available-now"], env=land_env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    sys.stderr.write(f"timings: {timings}\n")

    # The other table's changes made after the ALTER landed in batches committed before the rewrite's commit; the
    # parked table's changes after the ALTER all after it
    rewrite_ms = _rewrite_commit(fmt, lake)
    before = _as_of(fmt, lake, "o__changes", rewrite_ms)
    after_alter = [ts for ts in before.column("commit_ts").to_pylist() if ts is not None
                   and ts.timestamp() > altered + 0.5]
    assert after_alter, "no change of the other table landed while the mirror was rewritten"
    parked_log = _as_of(fmt, lake, change_log_name("big", 2), rewrite_ms)
    assert set(parked_log.column("op").to_pylist()) <= {"alter"}

    # Every mirror equals the server's SELECT, read by Spark and by delta-rs / pyiceberg
    for table in ("big", "o"):
        want = {k[0]: {c: _plain(v) for c, v in r.items()} for k, r in plain_rows(conn, table, "id").items()}
        frame = lake_frame(spark, lake, DB, table, fmt)
        names = [c for c in frame.columns if not c.startswith("_binlake")]
        assert {r["id"]: {c: _plain(r[c]) for c in names} for r in frame.collect()} == want, table
        other = _read(fmt, lake, table)
        assert other is not None
        assert {r["id"]: r for r in other.select(names).to_pylist()} == want, f"{table} ({fmt}'s other reader)"
    # Every row change of the binlog once in its table's change logs (every generation's)
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], DB)
    for table, generations in (("big", 2), ("o", 1)):
        rows, number = [], 1
        while (found := _read(fmt, lake, change_log_name(table, number))) is not None:
            rows += found.select(["op", "seq", "row_index"]).to_pylist()
            number += 1
        assert number - 1 == generations, table  # the ALTER's types cannot join big's first change log
        changes = [r for r in rows if r["op"] in ("insert", "update", "delete")]
        got = collections.Counter(r["op"] for r in changes)
        assert dict(got) == {op: counts[(op, table)] for op in ("insert", "update", "delete")
                             if counts[(op, table)]}, table
        assert len({(r["seq"], r["row_index"]) for r in changes}) == len(changes), (table, "twice")
