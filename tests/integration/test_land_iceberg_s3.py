"""binlake land --format iceberg into a bucket of an S3-compatible store (S3Proxy, a real S3 server on a local
directory): pyiceberg writes the tables through the store's S3 API with the job's land.s3_* settings and
credentials (those of Delta's object-store lakes), the default SQLite catalog in the local checkpoint.
Proof: the driver killed with SIGKILL mid-stream, then run to the end: the type zoo's and the workload's mirrors,
read back from the bucket by pyiceberg through the S3 API, equal the server's SELECT; every change once in the
change logs (mariadb-binlog's counts); no file the crash left stays in the bucket; a lake the job cannot write,
or a catalog it has nowhere to keep, stops it with one line naming what and where."""

from __future__ import annotations

import random
from functools import partial

import pytest

from ingester.devstack.objectstore import ObjectStore
from streaming_job.iceberg.catalog import IcebergCatalog
from streaming_job.lake.object_store import ObjectStoreSettings
from tests.harness.daemon import run_daemon
from tests.harness.iceberg import spark_rows_in_store
from tests.harness.iceberg_files import local_path, metadata_locations, named, on_disk
from tests.harness.land import committed_batches, kill_group, land_in_store, running_until, store_land_command
from tests.harness.zoo_lake import assert_zoo_read, zoo_written

pytestmark = pytest.mark.integration


def test_the_type_zoo_lands_in_iceberg_tables_in_a_bucket(make_mariadb, kafka, object_store, tmp_path,
                                                           monkeypatch) -> None:
    server = make_mariadb()
    db = "s3ice"
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")  # the big rows as chunks
    conn = zoo_written(server, db)
    run_daemon(server, kafka, db)
    lake, checkpoint = f"s3a://lake/{db}", tmp_path / "checkpoint"
    # the driver killed with SIGKILL mid-stream (small batches), then run again to the end: the files the crash
    # left in the bucket are removed (land.iceberg_orphan_age 0), every change lands once
    cmd, env = store_land_command(kafka, object_store, db, lake, None, "--format", "iceberg", "--checkpoint",
                                  str(checkpoint), "--max-offsets-per-trigger", "8")
    kill_group(running_until(cmd, env, checkpoint, 1, random.Random(11).uniform(0.5, 2.0)))
    killed_at = committed_batches(checkpoint)
    done = land_in_store(kafka, object_store, db, lake, {**object_store.environment(),
                                                         "BINLAKE_LAND_ICEBERG_ORPHAN_AGE": "0"},
                         "--format", "iceberg", "--checkpoint", str(checkpoint), "--max-offsets-per-trigger", "8")
    assert done.returncode == 0, done.stderr[-3000:]
    assert 1 <= killed_at < committed_batches(checkpoint)  # killed mid-stream
    in_bucket = partial(local_path, bucket_root=object_store.data)
    for (ns, name), current in metadata_locations(checkpoint / "_iceberg_catalog.db").items():
        location = object_store.data / "lake" / db / ns / name
        assert on_disk(location) - named(current, in_bucket) == set(), name  # no orphan files left
    assert object_store.secret_key not in done.stderr + done.stdout  # pyiceberg's and Spark's settings hold it
    assert (checkpoint / "_iceberg_catalog.db").exists()  # the default catalog: SQLite in the local checkpoint
    # Every table's files are the bucket's objects (nothing of the lake on local disk)
    assert (object_store.data / "lake" / db / db / "acct" / "metadata").is_dir()
    for name, value in object_store.environment().items():
        monkeypatch.setenv(name, value)
    catalog = IcebergCatalog(lake, None, ObjectStoreSettings(object_store.endpoint, path_style=True),
                             str(checkpoint)).open()
    assert catalog.load_table((db, "acct")).location() == f"{lake}/{db}/acct"

    def read(table: str):
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return catalog.load_table((db, table)).scan().to_arrow()  # through the store's S3 API
        except NoSuchTableError:
            return None

    assert_zoo_read(read, server, conn, db)
    # Spark reads the same tables through Hadoop's s3a: the rows pyiceberg read
    change = ["op", "row_index", "gtid", "kafka_offset"]
    tables = {"acct": ["id", "owner", "balance"], "ledger": ["a", "b", "amount"], "acct__changes": change,
              "ints__changes": change}
    for table, rows in spark_rows_in_store(object_store, lake, checkpoint, db, tables).items():
        want = [[str(v) for v in r.values()] for r in read(table).select(tables[table]).to_pylist()]
        assert rows and sorted(rows) == sorted(want), table


@pytest.mark.parametrize("case", ["no-credentials", "read-only", "no-catalog"])
def test_a_bucket_the_iceberg_job_cannot_use_stops_it_with_one_line(kafka, object_store, tmp_path, case) -> None:
    lake = "s3a://lake/icerefused"
    local = ["--checkpoint", str(tmp_path / "checkpoint")] if case != "no-catalog" else []
    env = {} if case == "no-credentials" else object_store.environment()
    if case == "read-only":  # a store that refuses every write: a bucket these credentials may only read
        with ObjectStore(tmp_path / "ro", read_only=True) as store:
            store.create_bucket("lake")
            done = land_in_store(kafka, store, "icerefused", lake, env, "--format", "iceberg", *local)
    else:
        done = land_in_store(kafka, object_store, "icerefused", lake, env, "--format", "iceberg", *local)
    errors = [line for line in done.stderr.splitlines() if line.startswith("binlake: error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-3000:]
    if case == "no-catalog":  # the checkpoint in the bucket too: no local disk for the SQLite catalog
        assert errors[0].startswith(f"binlake: error: land.format iceberg: the lake {lake} is on an object store "
                                    f"and the checkpoint {lake}/_checkpoint too: "), errors[0]
        assert "land.iceberg_catalog" in errors[0]
    else:  # as for a Delta lake: the job's probe write, before any table
        assert errors[0].startswith(f"binlake: error: cannot write the lake {lake}: "), errors[0]
    assert object_store.secret_key not in done.stderr + done.stdout
    assert not (tmp_path / "checkpoint" / "_iceberg_catalog.db").exists()  # nothing created
