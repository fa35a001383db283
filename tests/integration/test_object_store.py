"""Issue 21: the lake on an S3-compatible object store (S3Proxy, a real S3 server on a local directory),
written through Hadoop's s3a by `binlake land` as a separate process, as users run it. Proof: the type
zoo's mirrors equal the server's SELECT and the change logs hold what mariadb-binlog --verbose saw, read
from the bucket's objects by Spark and through the S3 API by delta-rs; a lake the job cannot write (no
credentials, a wrong secret, no bucket) stops it with one line naming the lake, the secret never shown."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from ingester.devstack.objectstore import REGION
from tests.integration import test_type_zoo as zoo
from tests.integration.test_land import _assert_zoo_landed, _run_daemon, _workload, _workload_tables

pytestmark = pytest.mark.integration
BINLAKE = [sys.executable, "-m", "ingester.cli.main"]


def _land(kafka: Any, store: Any, prefix: str, lake: str, env: dict[str, str] | None = None,
          *extra: str) -> subprocess.CompletedProcess[str]:
    """`binlake land --trigger available-now` into ``lake`` (an s3a:// URI), its checkpoint beside the tables."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", lake,
                           "--checkpoint", f"{lake}/_checkpoint", "--trigger", "available-now",
                           "--s3-endpoint", store.endpoint, "--s3-path-style", *extra],
                          env={**base, **(env if env is not None else store.environment())},
                          capture_output=True, text=True, timeout=600, check=False)


def _delta_rs(store: Any, uri: str) -> Any:
    import deltalake

    return deltalake.DeltaTable(uri.replace("s3a://", "s3://", 1), storage_options={
        "AWS_ENDPOINT_URL": store.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key})


def test_the_type_zoo_lands_in_a_bucket(make_mariadb, kafka, object_store, spark, monkeypatch) -> None:
    server = make_mariadb()
    db = "s3zoo"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    zoo._create(conn, rows=False)
    _workload_tables(conn)
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")  # the big rows as chunks
    zoo._write(conn)
    _workload(conn, tables=False)
    prefix, lake = "s3zoo", "s3a://lake/zoo"
    _run_daemon(server, kafka, prefix)
    done = _land(kafka, object_store, prefix, lake, None, "--min-partitions", "8")
    assert done.returncode == 0, done.stderr[-3000:]
    assert object_store.secret_key not in done.stderr + done.stdout  # Spark's settings hold it: never shown
    # The bucket's objects are files of the store's directory: Spark reads the lake there, delta-rs through
    # the store's S3 API
    local = object_store.data / "lake" / "zoo"
    _assert_zoo_landed(spark, local, server, conn, db)
    for table in [*zoo.TABLES, "acct", "ledger"]:
        for name in (table, f"{table}__changes"):
            read = _delta_rs(object_store, f"{lake}/{db}/{name}").to_pyarrow_table()
            assert read.num_rows == spark.read.format("delta").load(str(local / db / name)).count(), name
    # A second run finds its checkpoint in the bucket: nothing lands twice
    versions = {t: _delta_rs(object_store, f"{lake}/{db}/{t}__changes").version() for t in ("acct", "ledger")}
    with conn.cursor() as cur:
        cur.execute("UPDATE acct SET balance = balance + 1 WHERE id <= 3")
    _run_daemon(server, kafka, prefix)
    again = _land(kafka, object_store, prefix, lake)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _delta_rs(object_store, f"{lake}/{db}/ledger__changes").version() == versions["ledger"]
    changes = _delta_rs(object_store, f"{lake}/{db}/acct__changes").to_pyarrow_table()
    assert changes.num_rows == spark.read.format("delta").load(str(local / db / "acct__changes")).count()
    mirror = {r["id"]: r["balance"] for r in _delta_rs(object_store, f"{lake}/{db}/acct").to_pyarrow_table()
              .select(["id", "balance"]).to_pylist()}
    with conn.cursor() as cur:
        cur.execute("SELECT id, balance FROM acct")
        assert mirror == dict(cur.fetchall())


@pytest.mark.parametrize("case", ["no-credentials", "wrong-secret", "no-bucket"])
def test_a_lake_the_job_cannot_write_stops_it_with_one_line(kafka, object_store, case) -> None:
    lake = "s3a://nobucket/lake" if case == "no-bucket" else "s3a://lake/refused"
    env = {"no-credentials": {}, "wrong-secret": {**object_store.environment(), "AWS_SECRET_ACCESS_KEY": "wrong-x9"},
           "no-bucket": object_store.environment()}[case]
    done = _land(kafka, object_store, "s3refused", lake, env)
    errors = [line for line in done.stderr.splitlines() if line.startswith("binlake: error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-3000:]
    assert errors[0].startswith(f"binlake: error: cannot write the lake {lake}: "), errors[0]
    assert "wrong-x9" not in done.stderr + done.stdout and object_store.secret_key not in done.stderr + done.stdout
