"""binlake run -> Kafka -> binlake land (Spark local[2]) -> Delta Lake, against real servers.

Proof is the server's own SELECT of every table (values computed by the server: HEX, +0,
TIME_TO_SEC, UNIX_TIMESTAMP, ...) and the row counts of mariadb-binlog --verbose, never our decoder.
"""

from __future__ import annotations

import datetime
import os
import random
import re
import subprocess
import time
import urllib.request
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from ingester.cli.main import main
from ingester.devstack.mariadb import free_tcp_port
from streaming_job.lake.delta_log import TableLog
from tests.harness import zoo
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, run_daemon
from tests.harness.delta_rs import (
    assert_arrow_mirror,
    assert_delta_rs_change_log,
    assert_delta_rs_mirror,
    delta_rs_rows,
)
from tests.harness.lake_shapes import LocalShape
from tests.harness.land import (
    assert_change_log,
    change_log_rows,
    committed_batches,
    kill_group,
    lake_frame,
    landed_everything,
    mirror_rows,
    plain_rows,
    run_land,
    running_until,
)
from tests.harness.workloads import assert_kill_workload_landed, kill_workload, mixed_workload, mixed_workload_tables
from tests.harness.zoo_lake import assert_zoo_landed

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("metadata", "driver_rows"), [("FULL", None), ("FULL", "0"), ("MINIMAL", None),
                                                      ("NO_LOG", None)],
                         ids=["driver-reduces", "spark-reduces", "minimal-metadata", "no-log-metadata"])
def test_every_type_lands_and_mirrors_equal_the_servers_select(make_mariadb, kafka, spark, tmp_path,
                                                               monkeypatch, capsys, metadata, driver_rows) -> None:
    """Both ways of landing a table's batch: small ones reduced on the driver (the mirror appended by it
    where the batch only adds keys), large ones (here: every one, ``--driver-rows 0``) by Spark's jobs; and
    servers whose TABLE_MAPs lack names (MINIMAL) or also charsets, signedness and labels (NO_LOG,
    MariaDB's default), where the schema history supplies them."""
    server = make_mariadb(binlog_row_metadata=metadata)
    db = "landzoo"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    zoo.create(conn, rows=False)
    mixed_workload_tables(conn)
    prefix = f"land1{driver_rows or ''}{metadata.lower().replace('_', '')}"  # the broker is the session's
    # Small records: the big rows go as chunks, and minPartitions splits the partitions between them.
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")
    run_daemon(server, kafka, prefix)  # without FULL metadata, the schema history is captured here
    zoo.write(conn)
    mixed_workload(conn, tables=False)
    run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    capsys.readouterr()
    assert run_land(kafka, prefix, lake, "--min-partitions", "16", *(["--driver-rows", driver_rows] if driver_rows
                                                                     else [])) == 0
    assert "chunk pieces reassembled across partition splits" in capsys.readouterr().err
    # Spark reads the lake written both ways; the servers without full metadata change what is decoded, not how
    # it is written: their lakes are read by delta-rs (the checks' reader, tests/harness/land.lake_frame).
    assert_zoo_landed(spark, lake, server, conn, db, spark_reads=metadata == "FULL")
    # A second run finds its checkpoint: nothing lands twice.
    before = delta_rs_rows(lake / db / "acct__changes").num_rows
    assert run_land(kafka, prefix, lake) == 0
    assert delta_rs_rows(lake / db / "acct__changes").num_rows == before


def test_a_lake_uri_lands_through_sparks_writer(make_mariadb, kafka, spark, tmp_path) -> None:
    """A lake given as a URI (s3a://, abfss://, here file://) keeps its scheme, and its change logs go
    through Spark's writer (executors cannot write object stores as files): same tables, same result."""
    server = make_mariadb()
    db = "landuri"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    mixed_workload(conn)
    prefix = "landuri"
    run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    argv = ["land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", lake.as_uri(),
            "--checkpoint", str(tmp_path / "cp"), "--trigger", "available-now"]
    assert main(argv) == 0
    for table, key in (("acct", "id"), ("ledger", "a,b")):  # (read by delta-rs: a reader other than the writer)
        df = lake_frame(spark, lake, db, table)
        mirror = {tuple(r[k] for k in key.split(",")): {c: r[c] for c in df.columns if not c.startswith("_binlake")}
                  for r in df.collect()}
        assert mirror == plain_rows(conn, table, key), table
    names = {f.name for f in (lake / db / "acct__changes").rglob("*.parquet")}
    # written by Spark (part-<task>-<uuid>.c<n>.<codec>.parquet), not pyarrow (part-<uuid>[.<codec>].parquet)
    assert names and all(re.match(r"part-\d{5}-.*\.c\d{3}\.", n) for n in names), names
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    assert_change_log(spark, lake, db, counts, ["acct", "ledger", "nopk"])
    before = delta_rs_rows(lake / db / "acct__changes").num_rows
    assert main(argv) == 0
    assert delta_rs_rows(lake / db / "acct__changes").num_rows == before


def test_kill_minus_nine_of_the_driver_neither_loses_nor_duplicates(make_mariadb, kafka, spark, tmp_path,
                                                                   monkeypatch) -> None:
    server = make_mariadb()
    db = "landkill"
    conn = kill_workload(server, db)
    prefix = "landkill"
    # Small records (a few dozen events each) and few of them per micro-batch: the stream spans many batches.
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "2000")
    run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    checkpoint = lake / "_checkpoint"
    # The mirrors have deletion vectors, and no file is small: a batch's changes in a file go to its vector (or
    # rewrite it where they are more than 30% of it)
    cmd = [*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake),
           "--checkpoint", str(checkpoint), "--deletion-vectors", "always", "--small-file-bytes", "1",
           "--max-offsets-per-trigger", "8"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    rnd = random.Random(4)
    progress = []
    for target in (1, 2):  # kill once that many batches have committed, at a random moment of the next
        proc = running_until(cmd, env, checkpoint, target, rnd.uniform(0.5, 3.0))
        kill_group(proc)
        progress.append(committed_batches(checkpoint))
    # the rest in one batch once the killed one ran again as planned (its offsets were logged before the kill)
    done = subprocess.run([*cmd[:-2], "--trigger", "available-now"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # The kills landed mid-stream: each after some progress, all before the end.
    assert progress[0] >= 1 and progress == sorted(progress) and progress[-1] < committed_batches(checkpoint), progress
    assert_kill_workload_landed(spark, lake, server, conn, db)
    assert any(add.get("deletionVector") for add in TableLog.read(str(lake / db / "a")).files.values())

    # quiet (delta/tidy.py): a running job lands a few more changes, then compacts each mirror whole once no commit
    # changed it for land.quiet_compaction (1 s here): no deletion vector and one file left, the server's rows
    def untidy() -> dict[str, int]:
        files = {t: TableLog.read(str(lake / db / t)).files.values() for t in ("a", "b")}
        return {t: len(found) for t, found in files.items() if len(found) > 1 or any(a.get("deletionVector")
                                                                                   for a in found)}

    with conn.cursor() as cur:
        cur.execute("UPDATE a SET n = n + 1 WHERE id < 5")
        cur.execute("UPDATE b SET n = n + 1 WHERE id < 30")
    conn.commit()
    run_daemon(server, kafka, prefix)
    proc = subprocess.Popen([*cmd[:-2], "--trigger", "1s"], env={**env, "BINLAKE_LAND_QUIET_COMPACTION": "1s"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not landed_everything(kafka, prefix, checkpoint) or untidy():
            assert proc.poll() is None and time.monotonic() < deadline, untidy()
            time.sleep(1)
    finally:
        kill_group(proc)
    assert_kill_workload_landed(spark, lake, server, conn, db)


def test_a_chunked_record_cut_by_max_offsets_per_trigger_lands_whole_in_the_next_batch(
        make_mariadb, kafka, spark, tmp_path, monkeypatch, capsys) -> None:
    server = make_mariadb()
    db = "landcut"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB)")
        for i in range(4):  # each row event ~9 KB: 3 chunks of 4,000 bytes, between small records
            cur.execute("INSERT INTO t VALUES (%s, %s)", (i, bytes(range(256)) * 35 + bytes([i])))
            cur.execute("UPDATE t SET b = CONCAT(b, 'x') WHERE id = %s", (i,))
            cur.execute("INSERT INTO t VALUES (%s, 'small')", (100 + i,))
    prefix = "landcut"
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "4000")
    run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    capsys.readouterr()
    # 2 offsets per batch: many batches end inside a chunked record
    assert run_land(kafka, prefix, lake, "--max-offsets-per-trigger", "2") == 0
    assert "carried over to the next batch" in capsys.readouterr().err
    rows, _ = mirror_rows(spark, lake, db, "t")
    assert rows == plain_rows(conn, "t", "id") and len(rows) == 8
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    assert_change_log(spark, lake, db, counts, ["t"])


def _delta_rs_protocol(path: Path) -> Any:
    import deltalake

    return deltalake.DeltaTable(str(path)).protocol()


def _delta_rs_reads_widened(read: Callable[[], None]) -> bool:
    """Runs ``read``, a delta-rs check of a widened table (``widened=True``): True where delta-rs read it as
    Spark does, False where it refused the table for Delta's typeWidening reader feature, which deltalake
    1.x cannot read (docs/LAND.md)."""
    import deltalake

    try:
        read()
    except deltalake.exceptions.DeltaProtocolError as exc:
        assert "typeWidening" in str(exc), exc
        return False
    return True


@pytest.mark.parametrize("lake_shape", ["local", "cluster-s3"], indirect=True)
def test_schema_changes_evolve_the_lake_and_unsafe_ones_rewrite_it(make_mariadb, kafka, spark, tmp_path,
                                                                   lake_shape) -> None:
    server = make_mariadb()
    db = "landddl"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    prefix, lake = f"landddl{lake_shape.name.replace('-', '')}", lake_shape.lake(tmp_path)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT, f FLOAT, d DATE)")
        cur.execute("INSERT INTO t VALUES (1, -5, 1.5, '2024-02-29'), (2, 7, NULL, NULL)")
    run_daemon(server, kafka, prefix)
    if isinstance(lake_shape, LocalShape):  # in this process: its metrics stay up after the run
        port = free_tcp_port()
        assert lake_shape.land(kafka, prefix, lake, "--metrics-port", str(port)) == 0
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert "binlake_land_rows_total 2.0" in metrics and "binlake_land_lag_seconds " in metrics, metrics
    else:
        assert lake_shape.land(kafka, prefix, lake) == 0
    # New tables get the lowest protocol their columns need (no timestamp_ntz here: reader 1, writer 2), and
    # delta-rs (Polars', pandas' Delta reader) reads them
    mirror, change_log = lake / db / "t", lake / db / "t__changes"
    for path in (mirror, change_log):
        protocol = _delta_rs_protocol(path)
        assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2), (path, protocol)
    rows, _ = mirror_rows(spark, lake, db, "t")
    assert_delta_rs_mirror(mirror, rows, ["id", "n", "f", "d"], ["id"])
    assert_delta_rs_change_log(change_log, change_log_rows(spark, lake, db, "t"))
    with conn.cursor() as cur:  # the tables exist now: ALTER TABLE on the lake side
        cur.execute("ALTER TABLE t ADD COLUMN c VARCHAR(10), MODIFY n BIGINT")
        cur.execute("INSERT INTO t VALUES (3, 9000000000, 2.5, '1000-01-01', 'new')")
        cur.execute("UPDATE t SET c = 'old', n = n * 2 WHERE id = 1")
        cur.execute("DELETE FROM t WHERE id = 3")
    run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake) == 0
    # The first widening (n: int -> bigint) enabled Delta's type widening on the change log: Spark reads it,
    # its protocol names it now, and delta-rs reads it or refuses it for it; the ALTER's entry rewrote the mirror
    # with the new type (docs/LAND.md, "Schema changes"): its protocol stays the lowest, and delta-rs reads it
    rows, types = mirror_rows(spark, lake, db, "t")
    assert types["n"] == "bigint" and rows == plain_rows(conn, "t", "id") and len(rows) == 2
    assert_delta_rs_mirror(mirror, rows, ["id", "n", "f", "d", "c"], ["id"])
    _delta_rs_reads_widened(lambda: assert_delta_rs_change_log(change_log, change_log_rows(spark, lake, db, "t"),
                                                               widened=True))
    with conn.cursor() as cur:  # a batch whose only schema changes are widenings (a mirror the driver keeps)
        # f and d widen (date -> timestamp_ntz: a table without that type gets its feature); n narrows: stays bigint
        cur.execute("ALTER TABLE t MODIFY f DOUBLE, MODIFY n SMALLINT, MODIFY d DATETIME")
        cur.execute("INSERT INTO t VALUES (4, 1, 0.1, '2024-06-01 12:34:56', 'x')")
    run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake) == 0
    rows, types = mirror_rows(spark, lake, db, "t")
    assert {c: types[c] for c in ("id", "n", "f", "d", "c")} == {"id": "int", "n": "bigint", "f": "double",
                                                                 "d": "timestamp_ntz", "c": "string"}
    assert rows == plain_rows(conn, "t", "id") and len(rows) == 3
    changes = spark.read.format("delta").load(str(lake / db / "t__changes"))
    assert (changes.schema["after"].dataType.simpleString()
            == "struct<id:int,n:bigint,f:double,d:timestamp_ntz,c:string>")
    assert changes.count() == 8  # 6 row changes, the two ALTERs' rows
    assert {"typeWidening", "timestampNtz"} <= set(_delta_rs_protocol(change_log).reader_features or ())
    assert set(_delta_rs_protocol(mirror).reader_features or ()) == {"timestampNtz"}  # rewritten: no widening

    with conn.cursor() as cur:
        cur.execute("UPDATE t SET c = '7'")
        cur.execute("ALTER TABLE t MODIFY c INT")  # string -> int: no safe widening
        cur.execute("INSERT INTO t VALUES (5, 1, 1, NULL, 42)")
    run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake) == 0
    # the table's mirror rewritten (each value as the server converted it), its change log in a new generation
    rows, types = mirror_rows(spark, lake, db, "t")
    assert types["c"] == "int" and rows == plain_rows(conn, "t", "id") and len(rows) == 4
    second = delta_rs_rows(lake / db / "t__changes__v2")
    assert sorted(second.column("op").to_pylist()) == ["alter", "insert"]


def _engines(table: Path) -> list[tuple[str, str]]:
    """(operation, engine) of each commit of a Delta table, oldest first, from its log files."""
    out = []
    for entry in sorted((table / "_delta_log").glob("*.json")):
        info = next(orjson.loads(line)["commitInfo"] for line in entry.read_bytes().splitlines()
                    if b'"commitInfo"' in line)
        out.append((info["operation"], info.get("engineInfo", "")))
    return out


@pytest.mark.parametrize("lake_shape", ["local", "cluster-s3"], indirect=True)
def test_added_columns_and_unsigned_keys_stay_on_the_drivers_path(make_mariadb, kafka, spark, tmp_path,
                                                                   lake_shape) -> None:
    """A column added without a default is a commit of the new schema by the driver (no ALTER through Spark),
    and a mirror keyed by an unsigned BIGINT (decimal(20,0) in the lake, keys past 2^63) is kept by the
    driver: every commit of both tables is binlake's own, and Spark and delta-rs read what the server has. The
    mirror has deletion vectors (no file small): the update and the delete go to its file's vector, in both lake
    shapes (the cluster's: written by the driver into the bucket)."""
    server = make_mariadb()
    db = "landadd"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    prefix, lake = f"landadd{lake_shape.name.replace('-', '')}", lake_shape.lake(tmp_path)
    big = 2 ** 64 - 1
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, v INT)")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(1, 1), (2 ** 63 + 5, 2), (big, 3),
                                                          *((k, k) for k in range(10, 30))])
    run_daemon(server, kafka, prefix)
    vectors = ("--deletion-vectors", "always", "--small-file-bytes", "1")
    assert lake_shape.land(kafka, prefix, lake, *vectors) == 0
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE t ADD COLUMN c VARCHAR(10)")
        cur.execute(f"INSERT INTO t VALUES ({2 ** 63}, 4, 'new')")
        cur.execute(f"UPDATE t SET c = 'top', v = v + 1 WHERE id = {big}")
        cur.execute(f"DELETE FROM t WHERE id = {2 ** 63 + 5}")
    run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake, *vectors) == 0
    rows, types = mirror_rows(spark, lake, db, "t")
    assert types["id"] == "decimal(20,0)" and types["c"] == "string"
    assert rows == plain_rows(conn, "t", "id") and len(rows) == 23
    mirror, change_log = lake / db / "t", lake / db / "t__changes"
    vectored = [a["deletionVector"]["cardinality"] for a in TableLog.read(str(mirror)).files.values()
                if a.get("deletionVector")]
    assert vectored == [2], vectored  # the first load's file: its rows of the updated and the deleted key
    # delta-rs's query engine applies the vectors (its plain table reader refuses them)
    assert_arrow_mirror(delta_rs_rows(mirror), f"{mirror} (delta-rs)", rows, ["id", "v", "c"], ["id"])
    assert_delta_rs_change_log(change_log, change_log_rows(spark, lake, db, "t"))
    for path in (mirror, change_log):
        commits = _engines(path)
        assert ("ADD COLUMNS", "binlake") in commits and {e for _, e in commits} == {"binlake"}, (path, commits)


@pytest.mark.parametrize("lake_shape", ["local", "cluster-s3"], indirect=True)
def test_undecodable_records_stop_the_query_or_go_to_quarantine(make_mariadb, kafka, spark, tmp_path,
                                                                 capsys, lake_shape) -> None:
    from kafka import KafkaProducer

    server = make_mariadb()
    db = "landbad"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    prefix, lake = f"landbad{lake_shape.name.replace('-', '')}", lake_shape.lake(tmp_path)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    run_daemon(server, kafka, prefix)
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    bad = b"BLK\x01\x00garbage"
    producer.send(f"{prefix}.{db}.t", key=f"{db}.t".encode(), value=bad,
                  headers=[("binlake.v", b"1"), ("binlake.seq", bytes(15) + b"\x01")]).get(timeout=30)
    producer.close()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (3, 'c')")
        cur.execute("UPDATE t SET v = 'z' WHERE id = 1")
    run_daemon(server, kafka, prefix)
    capsys.readouterr()
    assert lake_shape.land(kafka, prefix, lake) == 2
    err = capsys.readouterr().err
    assert f"binlake: error: undecodable record at {prefix}.{db}.t[0]@" in err, err
    assert lake_shape.land(kafka, prefix, lake, "--quarantine") == 0  # the same batch again, now quarantined
    quarantined = spark.read.format("delta").load(str(lake / "_quarantine")).collect()
    assert [bytes(r.value) for r in quarantined] == [bad] and quarantined[0].error
    assert quarantined[0].topic == f"{prefix}.{db}.t"
    rows, _ = mirror_rows(spark, lake, db, "t")
    assert rows == plain_rows(conn, "t", "id")


def test_mirror_key_bounds_are_exact_for_every_key_type(spark, tmp_path) -> None:
    """The MERGE's key bounds travel as SQL text: each must come back as the batch's exact smallest and
    largest key (a bound off by a microsecond or a quote would make MERGE miss a row)."""
    from streaming_job.delta.mirror_spark import key_ranges

    keys = {
        "bigint": [-(2**63), 5, 2**63 - 1],
        "decimal(20,6)": [Decimal("-12345678901234.000001"), Decimal("0.5"), Decimal("99999999999999.999999")],
        "string": ["a'b\\c", "Zeta {t}", "ä\u20ac"],
        "date": [datetime.date(1000, 1, 1), datetime.date(2024, 2, 29), datetime.date(9999, 12, 31)],
        "timestamp": [datetime.datetime(1970, 1, 1, 0, 0, 0, 1), datetime.datetime(2038, 1, 19, 3, 14, 7, 999999),
                      datetime.datetime(2024, 6, 1, 12, 0)],
        "binary": [b"\x00", b"\xff\xfe", b"\x00\x01"],
    }
    for dtype, values in keys.items():
        # Mirror candidates (a moved key's old value is a delete candidate), in no particular order.
        candidates = spark.createDataFrame([(v,) for v in (values[1], max(values), min(values))], f"k {dtype}")
        [bounds] = key_ranges(candidates, [("k", dtype)], ["k"])
        assert bounds.column == "k"
        low, high = bounds.literals()
        got = spark.sql(f"SELECT {low} AS low, {high} AS high").first()
        assert (got.low, got.high) == (min(values), max(values)), dtype


TRANSACTIONS, COMPACT_FILES = 15, 8  # the small-files test: a batch each; land.compact_files


@pytest.mark.parametrize("lake_shape", ["local", "cluster-s3"], indirect=True)
def test_small_files_of_many_micro_batches_are_compacted_and_nothing_is_seen_twice(
        make_mariadb, kafka, spark, tmp_path, capsys, lake_shape) -> None:
    """Fifteen transactions, each published on its own (the daemon's group commit would put a backlog
    into one record), landed one record per micro-batch (``--max-offsets-per-trigger 1``) with
    ``--compact-files 8``: the change log reaches 8 small files and is compacted by a batch's commit (the
    mirror stays under that). It still
    holds every row change exactly once (mariadb-binlog --verbose), a Delta stream reading it from its
    first version sees each once (the compaction's files are dataChange false), the mirror equals the
    server's SELECT."""
    server = make_mariadb()
    db = "landsmall"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    prefix = f"landsmall{lake_shape.name.replace('-', '')}"
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
        for i in range(TRANSACTIONS):
            conn.begin()
            cur.execute("INSERT INTO t VALUES (%s, %s), (%s, %s)", (2 * i, f"v{2 * i}", 2 * i + 1, f"v{2 * i + 1}"))
            if i % 5 == 4:
                cur.execute("UPDATE t SET v = 'updated' WHERE id = %s", (i,))
                cur.execute("DELETE FROM t WHERE id = %s", (i - 3,))
            conn.commit()
            run_daemon(server, kafka, prefix)
    lake = lake_shape.lake(tmp_path)
    capsys.readouterr()
    assert lake_shape.land(kafka, prefix, lake, "--max-offsets-per-trigger", "1", "--compact-files",
                           str(COMPACT_FILES)) == 0
    batches = len(re.findall(r"batch \d+: 1 records in", capsys.readouterr().err))
    assert batches >= TRANSACTIONS - 2, batches  # enough for 8 small files in each table
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    assert_change_log(spark, lake, db, counts, ["t"])
    rows, _ = mirror_rows(spark, lake, db, "t")
    assert rows == plain_rows(conn, "t", "id") and len(rows) == 2 * TRANSACTIONS - TRANSACTIONS // 5
    from delta.tables import DeltaTable

    changes, mirror = (str(lake / db / table) for table in ("t__changes", "t"))
    # the change log compacted its 8 small files at least once; the mirror's rewrites of updated files merged
    # some of its own, and it never holds more than 8 small ones (test_mirror_driver shows its compaction)
    assert len(spark.read.format("delta").load(changes).inputFiles()) <= batches - (COMPACT_FILES - 1)
    assert len(spark.read.format("delta").load(mirror).inputFiles()) <= COMPACT_FILES + 1
    # a commit per transaction's batch (one more record is the table's CREATE entry: no change-log row)
    assert len(DeltaTable.forPath(spark, changes).history().collect()) >= TRANSACTIONS
    stream = (spark.readStream.format("delta").option("startingVersion", "0").load(str(lake / db / "t__changes"))
              .writeStream.format("memory")
              .queryName(f"{prefix}_changes").trigger(availableNow=True).start())
    stream.awaitTermination()
    seen = spark.sql(f"SELECT seq, row_index FROM {prefix}_changes").collect()
    assert len(seen) == sum(counts[(verb, "t")] for verb in ("insert", "update", "delete"))
    assert len({(bytes(r.seq), r.row_index) for r in seen}) == len(seen)
