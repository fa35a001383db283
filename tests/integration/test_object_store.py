"""Issue 21: the lake on an S3-compatible object store (S3Proxy, a real S3 server on a local directory),
written through Hadoop's s3a by `binlake land` as a separate process on a Spark standalone cluster (a
master and a worker, separate JVMs), as users run it. Proof: the type zoo's mirrors equal the server's
SELECT and the change logs hold what mariadb-binlog --verbose saw, read from the bucket's objects by Spark
and through the S3 API by delta-rs; kill -9 of the driver and of the worker lose and duplicate nothing; a
lake the job cannot write (no credentials, a wrong secret, no bucket) stops it with one line naming the
lake, the secret never shown."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import threading
import time
from typing import Any

import orjson
import pytest

from ingester.devstack.objectstore import REGION, ObjectStore
from tests.harness import zoo
from tests.harness.daemon import BINLAKE, run_daemon
from tests.harness.delta_rs import delta_rs_rows
from tests.harness.land import committed_batches, kill_group, land_in_store, landed_everything, running_until, store_env
from tests.harness.workloads import assert_kill_workload_landed, kill_workload
from tests.harness.zoo_lake import assert_zoo_landed, zoo_written

pytestmark = pytest.mark.integration


def _delta_rs(store: Any, uri: str) -> Any:
    import deltalake

    return deltalake.DeltaTable(uri.replace("s3a://", "s3://", 1), storage_options={
        "AWS_ENDPOINT_URL": store.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key})


def test_the_type_zoo_lands_in_a_bucket_from_a_cluster(make_mariadb, kafka, object_store, spark_cluster, spark,
                                                       monkeypatch) -> None:
    """The job on a standalone cluster (its executors are other processes: nothing may rely on the driver's
    memory or disk), the lake and the checkpoint in a bucket."""
    master = ["--master", spark_cluster.master]
    server = make_mariadb()
    db = "s3zoo"
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")  # the big rows as chunks
    conn = zoo_written(server, db)
    prefix, lake = db, f"s3a://lake/{db}"
    run_daemon(server, kafka, prefix)
    done = land_in_store(kafka, object_store, prefix, lake, None, "--min-partitions", "8", *master)
    assert done.returncode == 0, done.stderr[-3000:]
    assert object_store.secret_key not in done.stderr + done.stdout  # Spark's settings hold it: never shown
    # The bucket's objects are files of the store's directory: delta-rs reads the lake there (every mirror and
    # change log against the server; Spark's reading of both write paths is test_land's type zoo) and through
    # the store's S3 API
    local = object_store.data / "lake" / db
    assert_zoo_landed(spark, local, server, conn, db, spark_reads=False)
    # The fast paths, not Spark's writer: change-log files written by pyarrow on the executors
    # (part-<uuid>[.<codec>].parquet; Spark's are part-<task>-<uuid>.c<n>...), a log committed by the driver
    names = {f.name for f in (local / db / "acct__changes").rglob("*.parquet")}
    assert names and all(re.fullmatch(r"part-[0-9a-f-]{36}(\.zstd)?\.parquet", n) for n in names), names
    first = orjson.loads((local / db / "acct__changes" / "_delta_log" / f"{0:020d}.json").read_bytes().split(b"\n")[0])
    assert first["commitInfo"]["engineInfo"] == "binlake", first
    for table in [*zoo.TABLES, "acct", "ledger"]:
        for name in (table, f"{table}__changes"):
            read = _delta_rs(object_store, f"{lake}/{db}/{name}").to_pyarrow_table()
            assert read.num_rows == delta_rs_rows(local / db / name).num_rows, name
    # A second run finds its checkpoint in the bucket: nothing lands twice
    versions = {t: _delta_rs(object_store, f"{lake}/{db}/{t}__changes").version() for t in ("acct", "ledger")}
    with conn.cursor() as cur:
        cur.execute("UPDATE acct SET balance = balance + 1 WHERE id <= 3")
    run_daemon(server, kafka, prefix)
    again = land_in_store(kafka, object_store, prefix, lake, None, *master)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _delta_rs(object_store, f"{lake}/{db}/ledger__changes").version() == versions["ledger"]
    changes = _delta_rs(object_store, f"{lake}/{db}/acct__changes").to_pyarrow_table()
    assert changes.num_rows == delta_rs_rows(local / db / "acct__changes").num_rows
    mirror = {r["id"]: r["balance"] for r in _delta_rs(object_store, f"{lake}/{db}/acct").to_pyarrow_table()
              .select(["id", "balance"]).to_pylist()}
    with conn.cursor() as cur:
        cur.execute("SELECT id, balance FROM acct")
        assert mirror == dict(cur.fetchall())


@pytest.mark.parametrize("case", ["no-credentials", "wrong-secret", "no-bucket", "read-only"])
def test_a_lake_the_job_cannot_write_stops_it_with_one_line(kafka, object_store, tmp_path, case) -> None:
    lake = "s3a://nobucket/lake" if case == "no-bucket" else "s3a://lake/refused"
    env = {"no-credentials": {}, "wrong-secret": {**object_store.environment(), "AWS_SECRET_ACCESS_KEY": "wrong-x9"},
           "no-bucket": object_store.environment(), "read-only": object_store.environment()}[case]
    if case == "read-only":  # a store that refuses every write: a bucket these credentials may only read
        with ObjectStore(tmp_path / "ro", read_only=True) as store:
            store.create_bucket("lake")
            done = land_in_store(kafka, store, "s3refused", lake, env)
    else:
        done = land_in_store(kafka, object_store, "s3refused", lake, env)
    errors = [line for line in done.stderr.splitlines() if line.startswith("binlake: error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-3000:]
    assert errors[0].startswith(f"binlake: error: cannot write the lake {lake}: "), errors[0]
    assert "wrong-x9" not in done.stderr + done.stdout and object_store.secret_key not in done.stderr + done.stdout


def test_kill_minus_nine_of_the_driver_and_of_a_worker_on_a_cluster_into_a_bucket(
        make_mariadb, kafka, object_store, spark_cluster, spark, monkeypatch) -> None:
    """The production shape: the job on a standalone cluster, lake and checkpoint in a bucket. kill -9 of the
    driver mid-batch, then of the worker with its executors mid-batch (the driver waits for a worker and
    runs the batch's tasks again, and goes on to the topics' end): every change once, mirrors equal the server's
    SELECT."""
    server = make_mariadb()
    db = "s3kill"
    conn = kill_workload(server, db)
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "2000")  # many small records: many batches
    run_daemon(server, kafka, db)
    lake = f"s3a://lake/{db}"
    checkpoint = object_store.data / "lake" / db / "_checkpoint"  # the bucket's objects, as files
    cmd = [*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", db, "--lake", lake, "--checkpoint",
           f"{lake}/_checkpoint", "--s3-endpoint", object_store.endpoint, "--s3-path-style", "--master",
           spark_cluster.master, "--max-offsets-per-trigger", "8"]
    env = store_env(object_store)
    rnd = random.Random(21)
    proc = running_until(cmd, env, checkpoint, 1, rnd.uniform(0.5, 2.0))
    kill_group(proc)  # the driver
    killed_driver = committed_batches(checkpoint)
    proc = running_until(cmd, env, checkpoint, killed_driver + 2, rnd.uniform(0.5, 2.0))
    spark_cluster.kill_worker(1)  # the executors' machine
    killed_worker = committed_batches(checkpoint)
    time.sleep(2)
    spark_cluster.start_worker(1)  # back: the driver's job goes on there
    deadline = time.monotonic() + 300
    while committed_batches(checkpoint) < killed_worker + 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None and committed_batches(checkpoint) >= killed_worker + 2, "no progress after the worker"
    # the same job lands the rest (a driver started once more for it would cost a JVM and the cluster's executors)
    while not landed_everything(kafka, db, checkpoint) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert proc.poll() is None and landed_everything(kafka, db, checkpoint), "the rest did not land"
    kill_group(proc)
    assert 1 <= killed_driver < killed_worker < committed_batches(checkpoint), (killed_driver, killed_worker)
    assert_kill_workload_landed(spark, object_store.data / "lake" / db, server, conn, db)


def test_the_demo_lands_into_a_bucket(tmp_path) -> None:
    """`binlake demo --object-store`: the whole pipeline into a bucket of a private store, as a user runs it
    (its own process); the demo compares every mirror with the server's rows and exits 1 on a difference."""
    base = tmp_path / "demo"
    env = store_env()  # the demo's own store's credentials
    done = subprocess.run([*BINLAKE, "demo", "--object-store", "--customers", "300", "--orders", "2000", "--updates",
                           "40", "--dir", str(base)], env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"customers +251 +251  yes", done.stdout) and "differ" not in done.stdout, done.stdout
    assert "what landed in Delta Lake (s3a://lake/demo)" in done.stdout, done.stdout
    assert (base / "s3" / "data" / "lake" / "demo" / "shop" / "orders" / "_delta_log").is_dir()
    assert "binlake-secret" not in done.stdout + done.stderr


def test_a_second_job_on_a_lake_is_refused_and_a_killed_jobs_lease_is_taken_at_once(kafka, object_store) -> None:
    """Two drivers must never commit to one S3 lake (no put-if-absent there): a running job's lease refuses a
    second one with one line naming it; after kill -9 of the first, a new job starts at once."""
    lake = "s3a://lake/leased"
    lease = object_store.data / "lake" / "leased" / "_binlake_job"
    env = store_env(object_store)
    cmd = [*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", "leased", "--lake", lake, "--checkpoint",
           f"{lake}/_checkpoint", "--s3-endpoint", object_store.endpoint, "--s3-path-style"]
    first = subprocess.Popen([*cmd, "--trigger", "1s"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not lease.exists() and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.2)
        assert lease.exists() and first.poll() is None
        second = subprocess.run([*cmd, "--trigger", "available-now"], env=env, capture_output=True, text=True,
                                timeout=600, check=False)
        errors = [line for line in second.stderr.splitlines() if line.startswith("binlake: error:")]
        assert second.returncode == 2 and len(errors) == 1, second.stderr[-3000:]
        assert errors[0].startswith(f"binlake: error: another binlake land job writes the lake {lake} (host "), errors
        assert f"pid {first.pid}:" in errors[0], errors[0]
    finally:
        kill_group(first)
    started = time.monotonic()
    third = subprocess.run([*cmd, "--trigger", "available-now"], env=env, capture_output=True, text=True,
                           timeout=600, check=False)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "watching it" not in third.stderr and time.monotonic() - started < 120  # taken at once
    assert not lease.exists()  # a clean stop gives it back


VERIFY_TABLES = 24


def test_verify_across_many_tables_in_a_bucket_from_a_cluster(make_mariadb, kafka, object_store, spark_cluster,
                                                             tmp_path) -> None:
    """`binlake verify` where users run it: the land job on the standalone cluster (the comparison's reads of
    the mirrors on executors of their own), mirrors and results in a bucket, `binlake verify --lake s3a://...`
    reading the results through the store's API. 24 tables in one run under writes to all of them: every
    chunk matches and the rows compared are the server's COUNT(*); then a row changed with the binlog off is
    found in its table, with its column."""
    from streaming_job.format.verify_results import read_results
    from streaming_job.lake.files import LakeFiles

    server = make_mariadb()
    db = "s3vf"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    server.execute("CREATE DATABASE binlake")
    conn = server.connect(db)
    with conn.cursor() as cur:
        for t in range(VERIFY_TABLES):
            cur.execute(f"CREATE TABLE t{t} (id INT PRIMARY KEY, s VARCHAR(40), d DECIMAL(12,3), ts DATETIME(6))")
            cur.executemany(f"INSERT INTO t{t} VALUES (%s, %s, %s, %s)",
                            [(i, f"row {i} of t{t}", i / 8, f"2024-05-{1 + i % 28:02d} 10:00:00.{i:06d}")
                             for i in range(1, 201)])
    conn.commit()
    config = tmp_path / "binlake.yaml"
    config.write_text(orjson.dumps({"snapshot_signal_table": "binlake.signal", "snapshot_chunk_rows": 60}).decode())
    env = store_env(object_store)
    lake = f"s3a://lake/{db}"
    store = ["--lake", lake, "--s3-endpoint", object_store.endpoint, "--s3-path-style"]
    daemon = subprocess.Popen([*BINLAKE, "run", "--config", str(config), "--source", server.url, "--kafka",
                               kafka.bootstrap, "--topic-prefix", db, "--server-id", "6363"],
                              env=env, stderr=(tmp_path / "run.log").open("wb"))
    land = subprocess.Popen([*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", db, *store,
                             "--checkpoint", f"{lake}/_checkpoint", "--trigger", "1s", "--master",
                             spark_cluster.master], env=env, stdout=subprocess.DEVNULL,
                            stderr=(tmp_path / "land.log").open("wb"), start_new_session=True)
    writing = threading.Event()

    def writes() -> None:  # single-row changes to every table (rows 101-200; the test tampers with row 7)
        rnd = random.Random(5)
        with server.connect(db) as c, c.cursor() as cur:
            c.autocommit(True)
            while not writing.is_set():
                cur.execute(f"UPDATE t{rnd.randrange(VERIFY_TABLES)} SET s = CONCAT('upd ', %s), d = d + 1 "
                            "WHERE id = %s", (rnd.randrange(10**6), rnd.randint(101, 200)))
                time.sleep(0.02)

    def verify(tables: list[str]) -> tuple[int, list[dict[str, Any]]]:
        done = subprocess.run([*BINLAKE, "verify", "--config", str(config), "--source", server.url, "--tables",
                               ",".join(f"{db}.{t}" for t in tables), *store, "--wait", "--timeout", "300"],
                              env=env, capture_output=True, text=True, timeout=400, check=False)
        assert done.returncode in (0, 1), (done.stdout + done.stderr[-3000:]
                                           + (tmp_path / "land.log").read_text()[-3000:])
        run = done.stdout.split()[2]
        return done.returncode, read_results(LakeFiles.on_disk(), str(object_store.data / "lake" / db), run)

    writer = threading.Thread(target=writes, daemon=True)
    writer.start()
    try:
        names = [f"t{t}" for t in range(VERIFY_TABLES)]
        status, results = verify(names)
        writing.set()
        writer.join()
        assert status == 0, [r for r in results if not r["match"]]
        assert {r["table"] for r in results} == {f"{db}.{t}" for t in names}
        assert sum(r["source_rows"] for r in results) + sum(r["excluded"] for r in results) >= 200 * VERIFY_TABLES
        assert sum(r["source_rows"] for r in results) <= 200 * VERIFY_TABLES
        with server.connect(db) as quiet, quiet.cursor() as cur:
            cur.execute("SET sql_log_bin = 0")
            cur.execute("UPDATE t17 SET s = 'behind its back' WHERE id = 7")
            quiet.commit()
        status, results = verify(["t3", "t17"])
        differ = [r for r in results if not r["match"]]
        assert status == 1 and [r["table"] for r in differ] == [f"{db}.t17"], differ
        assert orjson.loads(differ[0]["keys"]) == [{"key": [7], "lake": "different", "columns": ["s"]}]
    finally:
        writing.set()
        kill_group(land)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0, (tmp_path / "run.log").read_text()[-2000:]
