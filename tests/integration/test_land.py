"""binlake run -> Kafka -> binlake land (Spark local[2]) -> Delta Lake, against real servers.

Proof is the server's own SELECT of every table (values computed by the server: HEX, +0,
TIME_TO_SEC, UNIX_TIMESTAMP, ...) and the row counts of mariadb-binlog --verbose, never our decoder.
"""

from __future__ import annotations

import collections
import datetime
import os
import random
import re
import signal
import subprocess
import sys
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
from tests.harness.lake_shapes import LocalShape
from tests.integration import test_type_zoo as zoo

pytestmark = pytest.mark.integration
BINLAKE = [sys.executable, "-m", "ingester.cli.main"]

# What each zoo column lands as (docs/LAND.md), written down independently of streaming_job/lake_types.py.
LAKE_TYPES = {
    "ti": "tinyint", "tiu": "smallint", "si": "smallint", "siu": "int", "mi": "int", "miu": "int", "i": "int",
    "iu": "bigint", "bi": "bigint", "biu": "decimal(20,0)", "b1": "bigint", "b17": "bigint", "b64": "bigint",
    "yr": "int", "bo": "tinyint",
    "f": "float", "d": "double", "d0": "decimal(10,0)", "d52": "decimal(5,2)", "d65": "string",
    "d189": "decimal(18,9)", "du": "decimal(12,4)",
    "dt": "date", "t0": "bigint", "t1": "bigint", "t3": "bigint", "t6": "bigint", "dt0": "timestamp_ntz",
    "dt2": "timestamp_ntz", "dt6": "timestamp_ntz", "ts0": "timestamp", "ts3": "timestamp", "ts6": "timestamp",
    "c": "string", "vc": "string", "vl": "string", "vb": "binary", "bn": "binary", "vbn": "binary",
    "tt": "string", "tx": "string", "mt": "string", "lt": "string", "tb": "binary", "bb": "binary",
    "mb": "binary", "lb": "binary", "e": "string", "s": "string", "j": "string", "cu": "string", "gk": "string",
    "vcc": "string", "bc": "binary", "c255": "string", "g": "binary", "p": "binary", "pg": "binary",
}
TIMES = {"t0", "t1", "t3", "t6"}
DATETIMES = {"dt0", "dt2", "dt6"}
TIMESTAMPS = {"ts0", "ts3", "ts6"}
ZERO = ("0000-", "-00-", "-00 ")


def _server_expr(col: str, sqltype: str) -> str:
    """The server computes the lake's value (as text where Python would otherwise do the work)."""
    q = f"`{col}`"
    if col in TIMES:
        return f"ROUND(TIME_TO_SEC({q}) * 1000000)"
    if col in TIMESTAMPS:
        return f"IF(CAST({q} AS CHAR) = '0000-00-00 00:00:00', NULL, ROUND(UNIX_TIMESTAMP({q}) * 1000000))"
    return zoo._select_expr(col, sqltype)


def _server_rows(conn, table: str, cols: list[tuple[str, str]]) -> dict[Any, dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT id, {', '.join(_server_expr(c, t) for c, t in cols)} FROM `{table}`")
        return {r[0]: dict(zip([c for c, _ in cols], r[1:], strict=True)) for r in cur.fetchall()}


def _expected(col: str, sqltype: str, v: Any) -> Any:
    """The server's value in the lake's representation."""
    if v is None:
        return None
    if col in zoo.BINARY:
        return v.upper()
    if col == "j":
        return ("json", zoo.json.loads(v))  # the document "null" is not SQL NULL
    if col in zoo.FLOAT32 or sqltype == "DOUBLE":
        return float(v)
    if col in TIMES or col in TIMESTAMPS:
        return int(v)
    if col == "dt" or col in DATETIMES:
        return None if any(z in v + " " for z in ZERO) else v
    return v if isinstance(v, int) else str(v)


def _lake(col: str, v: Any) -> Any:
    """The mirror's value (as collected by Spark) in the same representation."""
    if v is None:
        return None
    if col in zoo.BINARY:
        return bytes(v).hex().upper()
    if col in zoo.BITS:
        return v & (1 << 64) - 1
    if col == "j":
        return ("json", zoo.json.loads(v))
    if isinstance(v, Decimal):
        return int(v) if col == "biu" else format(v, "f")
    if col == "dt":
        return v.isoformat()
    if col in DATETIMES:
        return v
    return v


def _mirror(spark, lake: Path, db: str, table: str, cols: list[tuple[str, str]]) -> tuple[dict, dict]:
    """Rows by id (timestamps as UTC microseconds, computed by Spark) and column types of a mirror."""
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(str(lake / db / table))
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    exprs = [F.unix_micros(F.col(c)).alias(c) if c in TIMESTAMPS else F.col(c) for c, _ in cols]
    return {r["id"]: r.asDict() for r in df.select("id", *exprs).collect()}, types


def _compare_datetime(expected: Any, got: Any) -> bool:
    if expected is None or got is None:
        return expected is got
    return datetime.datetime.fromisoformat(expected) == got


def _delta_rs(path: Path, widened: bool = False) -> Any:
    """A table as delta-rs (the `deltalake` package, the Delta reader of Polars and pandas users) reads it,
    as an Arrow table. Its protocol is the lowest its columns need: reader 1 and writer 2, or with
    timestamp_ntz columns reader 3 and writer 7 with just that feature; it names Delta's typeWidening reader
    feature, which delta-rs cannot read, only once a column was ``widened`` (docs/LAND.md)."""
    import deltalake

    table = deltalake.DeltaTable(str(path))
    protocol = table.protocol()
    readers, writers = set(protocol.reader_features or ()), set(protocol.writer_features or ())
    assert ("typeWidening" in readers) is widened, (path, protocol)
    if not widened:
        legacy = {"invariants", "appendOnly"}  # writer 2's own, listed as features in a writer 7 protocol
        versions = (protocol.min_reader_version, protocol.min_writer_version)
        assert (readers, writers, versions) in (
            (set(), set(), (1, 2)), ({"timestampNtz"}, {"timestampNtz", *legacy}, (3, 7))), (path, protocol)
    return table.to_pyarrow_table()


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


def _assert_delta_rs_mirror(path: Path, spark_rows: dict, columns: list[str], key: list[str],
                            micros: set[str] | frozenset[str] = frozenset(), widened: bool = False) -> None:
    """delta-rs reads the mirror at ``path`` as Spark did: ``spark_rows`` (key tuple -> {column: value}, the
    ``micros`` columns as UTC microseconds). Arrow's values compare as Spark's do: timestamps (with a time
    zone: as microseconds; timestamp_ntz: naive datetimes), decimals, dates, binary (bytes, Spark's bytearray)."""
    import pyarrow as pa

    table = _delta_rs(path, widened)
    data = {c: (table.column(c).cast(pa.timestamp("us", "UTC")).cast(pa.int64()) if c in micros
                else table.column(c)).to_pylist() for c in columns}
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*data.values(), strict=True)]
    got = {tuple(r[k] for k in key): r for r in rows}
    assert len(got) == len(rows), f"{path}: duplicate keys"
    want = {k: {c: _plain(v[c]) for c in columns} for k, v in spark_rows.items()}
    assert sorted(got) == sorted(want), path
    for k, row in want.items():
        assert got[k] == row, f"{path} {k}: delta-rs {got[k]!r}, Spark {row!r}"


def _assert_delta_rs_change_log(path: Path, spark_rows: list, widened: bool = False) -> None:
    """delta-rs reads the change log at ``path`` (every column, the nested images too) with the row
    changes Spark read (``_changes``)."""
    table = _delta_rs(path, widened)
    got = collections.Counter(zip(*(table.column(c).to_pylist() for c in ("op", "seq", "row_index", "gtid",
                                                                         "commit_date")), strict=True))
    want = collections.Counter((r.op, bytes(r.seq), r.row_index, r.gtid, r.commit_date) for r in spark_rows)
    assert got == want, path


def _changes(spark, lake: Path, db: str, table: str) -> list:
    return spark.read.format("delta").load(str(lake / db / f"{table}__changes")).select(
        "op", "seq", "row_index", "gtid", "commit_ts", "commit_date", "ingest_ts").collect()


def _assert_change_log(spark, lake: Path, db: str, counts: collections.Counter, tables: list[str]) -> dict:
    """Every change log holds exactly the row changes mariadb-binlog --verbose saw, each once. Returns the
    rows read (``_changes``) by table."""
    read = {}
    for table in tables:
        rows = read[table] = _changes(spark, lake, db, table)
        got = collections.Counter(r.op for r in rows)
        want = {op: counts[(verb, table)] for op, verb in (("insert", "insert"), ("update", "update"),
                                                             ("delete", "delete")) if counts[(verb, table)]}
        assert dict(got) == want, table
        keys = [(bytes(r.seq), r.row_index) for r in rows]
        assert len(set(keys)) == len(keys), f"{table}: duplicate changes"
        assert all(r.commit_date == r.commit_ts.date() and r.gtid for r in rows), table
    return read


def _workload_tables(conn) -> None:
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20), balance DECIMAL(12,2))")
        cur.execute("CREATE TABLE ledger (a INT, b VARCHAR(5), amount BIGINT, PRIMARY KEY (a, b))")
        cur.execute("CREATE TABLE nopk (x INT, y VARCHAR(10))")


def _workload(conn, tables: bool = True) -> None:
    """Beyond the zoo: multi-row and multi-table transactions, key updates, deletes, a table without a key."""
    if tables:
        _workload_tables(conn)
    with conn.cursor() as cur:
        conn.begin()
        cur.execute("INSERT INTO acct VALUES " + ", ".join(f"({i}, 'o{i}', {i}.50)" for i in range(1, 201)))
        cur.execute("INSERT INTO ledger VALUES " + ", ".join(f"({i}, 'k{i % 3}', {i * 7})" for i in range(100)))
        cur.execute("INSERT INTO nopk VALUES (1, 'a'), (1, 'a'), (2, 'b')")
        conn.commit()
        for i in range(1, 60):  # single-row transactions across two tables
            conn.begin()
            cur.execute("UPDATE acct SET balance = balance - 1 WHERE id = %s", (i,))
            cur.execute("INSERT INTO ledger VALUES (%s, 'tx', -1)", (1000 + i,))
            conn.commit()
        cur.execute("UPDATE acct SET id = id + 1000 WHERE id <= 20")  # key moves, many rows
        cur.execute("UPDATE acct SET id = 5000 WHERE id = 1001")
        cur.execute("UPDATE acct SET id = 1001 WHERE id = 1002")  # a key freed and reused in one batch
        cur.execute("UPDATE ledger SET b = 'z' WHERE a < 10")  # composite key moves
        cur.execute("DELETE FROM acct WHERE id BETWEEN 100 AND 150")
        cur.execute("INSERT INTO acct VALUES (120, 'again', 0)")  # deleted key re-inserted
        cur.execute("DELETE FROM ledger WHERE amount > 500")
        cur.execute("UPDATE nopk SET y = 'c' WHERE x = 1")
        cur.execute("DELETE FROM nopk WHERE x = 2")


def _plain_rows(conn, table: str, key: str) -> dict:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table}`")
        names = [d[0] for d in cur.description]
        return {tuple(r[names.index(k)] for k in key.split(",")): dict(zip(names, r, strict=True))
                for r in cur.fetchall()}


def _run_daemon(server, kafka, prefix: str) -> None:
    assert main(["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                 "--server-id", "4545", "--exit-at-end"]) == 0


def _land(kafka, prefix: str, lake: Path, *extra: str) -> int:
    return main(["land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake),
                 "--checkpoint", str(lake / "_checkpoint"), "--trigger", "available-now", *extra])


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
    zoo._create(conn, rows=False)
    _workload_tables(conn)
    prefix = f"land1{driver_rows or ''}{metadata.lower().replace('_', '')}"  # the broker is the session's
    # Small records: the big rows go as chunks, and minPartitions splits the partitions between them.
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")
    _run_daemon(server, kafka, prefix)  # without FULL metadata, the schema history is captured here
    zoo._write(conn)
    _workload(conn, tables=False)
    _run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    capsys.readouterr()
    assert _land(kafka, prefix, lake, "--min-partitions", "16", *(["--driver-rows", driver_rows] if driver_rows
                                                                  else [])) == 0
    assert "chunk pieces reassembled across partition splits" in capsys.readouterr().err
    _assert_zoo_landed(spark, lake, server, conn, db)
    # A second run finds its checkpoint: nothing lands twice.
    before = spark.read.format("delta").load(str(lake / db / "acct__changes")).count()
    assert _land(kafka, prefix, lake) == 0
    assert spark.read.format("delta").load(str(lake / db / "acct__changes")).count() == before


def _assert_zoo_landed(spark, lake: Path, server, conn, db: str) -> None:
    """The type zoo's and the workload's mirrors equal the server's SELECT (read by Spark and by delta-rs),
    and their change logs hold the row changes mariadb-binlog --verbose counts, each once."""
    for name, cols in zoo.TABLES.items():
        got, types = _mirror(spark, lake, db, name, cols)
        assert {c: types[c] for c, _ in cols} == {c: LAKE_TYPES[c] for c, _ in cols}, name
        # delta-rs (Polars', pandas' reader) reads the mirror as Spark did
        _assert_delta_rs_mirror(lake / db / name, {(k,): v for k, v in got.items()}, ["id", *(c for c, _ in cols)],
                                ["id"], TIMESTAMPS)
        expected = _server_rows(conn, name, cols)
        assert sorted(got) == sorted(expected), name
        for pk, row in expected.items():
            for col, sqltype in cols:
                want, have = _expected(col, sqltype, row[col]), _lake(col, got[pk][col])
                if col in DATETIMES:
                    assert _compare_datetime(want, have), f"{name}.{col} id={pk}: {have!r} != {want!r}"
                else:
                    assert have == want, f"{name}.{col} id={pk}: lake {have!r}, server {want!r}"
    for table, key in (("acct", "id"), ("ledger", "a,b")):
        df = spark.read.format("delta").load(str(lake / db / table))
        mirror = {tuple(r[k] for k in key.split(",")): {c: r[c] for c in df.columns if not c.startswith("_binlake")}
                  for r in df.collect()}
        assert mirror == _plain_rows(conn, table, key), table
        _assert_delta_rs_mirror(lake / db / table, mirror, [c for c in df.columns if not c.startswith("_binlake")],
                                key.split(","))
    assert not (lake / db / "nopk").exists()  # no primary key: change log only

    server.flush_logs()
    counts = zoo._verbose_counts(server.binlog_files()[:-1], db)
    changes = _assert_change_log(spark, lake, db, counts, [*zoo.TABLES, "acct", "ledger", "nopk"])
    for table, rows in changes.items():
        _assert_delta_rs_change_log(lake / db / f"{table}__changes", rows)


def test_a_lake_uri_lands_through_sparks_writer(make_mariadb, kafka, spark, tmp_path) -> None:
    """A lake given as a URI (s3a://, abfss://, here file://) keeps its scheme, and its change logs go
    through Spark's writer (executors cannot write object stores as files): same tables, same result."""
    server = make_mariadb()
    db = "landuri"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    _workload(conn)
    prefix = "landuri"
    _run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    argv = ["land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", lake.as_uri(),
            "--checkpoint", str(tmp_path / "cp"), "--trigger", "available-now"]
    assert main(argv) == 0
    for table, key in (("acct", "id"), ("ledger", "a,b")):
        df = spark.read.format("delta").load(str(lake / db / table))
        mirror = {tuple(r[k] for k in key.split(",")): {c: r[c] for c in df.columns if not c.startswith("_binlake")}
                  for r in df.collect()}
        assert mirror == _plain_rows(conn, table, key), table
    names = {f.name for f in (lake / db / "acct__changes").rglob("*.parquet")}
    # written by Spark (part-<task>-<uuid>.c<n>.<codec>.parquet), not pyarrow (part-<uuid>[.<codec>].parquet)
    assert names and all(re.match(r"part-\d{5}-.*\.c\d{3}\.", n) for n in names), names
    server.flush_logs()
    counts = zoo._verbose_counts(server.binlog_files()[:-1], db)
    _assert_change_log(spark, lake, db, counts, ["acct", "ledger", "nopk"])
    before = spark.read.format("delta").load(str(lake / db / "acct__changes")).count()
    assert main(argv) == 0
    assert spark.read.format("delta").load(str(lake / db / "acct__changes")).count() == before


def _committed(checkpoint: Path) -> int:
    """Micro-batches the query has committed (Spark's commit log)."""
    return len(list((checkpoint / "commits").glob("[0-9]*")))


def _running_until(cmd: list[str], env: dict[str, str], checkpoint: Path, batches: int,
                   then: float) -> subprocess.Popen:
    """`binlake land --trigger 1s` started in a process group of its own, returned once ``batches``
    micro-batches have committed and ``then`` seconds more have passed (mid-way through the next)."""
    proc = subprocess.Popen([*cmd, "--trigger", "1s"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while _committed(checkpoint) < batches and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(then)
    return proc


def _kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the driver's JVM and Python workers share its process group
    proc.wait()


def _kill_workload(server, db: str):
    """Two tables, 600 transactions of inserts, updates (a key moved too) and deletes; the connection."""
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(50), n BIGINT)")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, n BIGINT)")
        for i in range(600):
            conn.begin()
            cur.execute("INSERT INTO a VALUES (%s, %s, %s)", (i, f"v{i}", i))
            if i % 3 == 0:
                cur.execute("INSERT INTO b VALUES (%s, %s)", (i, i * i))
            if i % 7 == 0 and i:
                cur.execute("UPDATE a SET n = n + 1, v = 'upd' WHERE id = %s", (i - 1,))
            if i % 11 == 0 and i:
                cur.execute("DELETE FROM b WHERE id = %s", (i - 3,))
            if i % 13 == 0 and i:
                cur.execute("UPDATE a SET id = id + 100000 WHERE id = %s", (i - 2,))
            conn.commit()
    return conn


def test_kill_minus_nine_of_the_driver_neither_loses_nor_duplicates(make_mariadb, kafka, spark, tmp_path,
                                                                   monkeypatch) -> None:
    server = make_mariadb()
    db = "landkill"
    conn = _kill_workload(server, db)
    prefix = "landkill"
    # Small records (a few dozen events each) and few of them per micro-batch: the stream spans many batches.
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "2000")
    _run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    checkpoint = lake / "_checkpoint"
    cmd = [*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake),
           "--checkpoint", str(checkpoint), "--max-offsets-per-trigger", "8"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    rnd = random.Random(4)
    progress = []
    for target in (1, 2):  # kill once that many batches have committed, at a random moment of the next
        proc = _running_until(cmd, env, checkpoint, target, rnd.uniform(0.5, 3.0))
        _kill_group(proc)
        progress.append(_committed(checkpoint))
    done = subprocess.run([*cmd, "--trigger", "available-now"], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    # The kills landed mid-stream: each after some progress, all before the end.
    assert progress[0] >= 1 and progress == sorted(progress) and progress[-1] < _committed(checkpoint), progress
    _assert_kill_workload_landed(spark, lake, server, conn, db)


def _assert_kill_workload_landed(spark, lake: Path, server, conn, db: str) -> None:
    """Mirrors equal the server's SELECT; the change logs hold mariadb-binlog --verbose's row changes, once."""
    for table, key in (("a", "id"), ("b", "id")):
        df = spark.read.format("delta").load(str(lake / db / table))
        mirror = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
        assert mirror == _plain_rows(conn, table, key), table
    server.flush_logs()
    counts = zoo._verbose_counts(server.binlog_files()[:-1], db)
    _assert_change_log(spark, lake, db, counts, ["a", "b"])


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
    _run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    capsys.readouterr()
    # 2 offsets per batch: many batches end inside a chunked record
    assert _land(kafka, prefix, lake, "--max-offsets-per-trigger", "2") == 0
    assert "carried over to the next batch" in capsys.readouterr().err
    rows, _ = _mirror_rows(spark, lake, db, "t")
    assert rows == _plain_rows(conn, "t", "id") and len(rows) == 8
    server.flush_logs()
    counts = zoo._verbose_counts(server.binlog_files()[:-1], db)
    _assert_change_log(spark, lake, db, counts, ["t"])


def _mirror_rows(spark, lake: Path, db: str, table: str) -> tuple[dict, dict]:
    df = spark.read.format("delta").load(str(lake / db / table))
    rows = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
    return rows, {f.name: f.dataType.simpleString() for f in df.schema.fields}


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
def test_schema_changes_evolve_the_lake_and_unsafe_ones_stop_it(make_mariadb, kafka, spark, tmp_path,
                                                                capsys, lake_shape) -> None:
    server = make_mariadb()
    db = "landddl"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    prefix, lake = f"landddl{lake_shape.name.replace('-', '')}", lake_shape.lake(tmp_path)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT, f FLOAT, d DATE)")
        cur.execute("INSERT INTO t VALUES (1, -5, 1.5, '2024-02-29'), (2, 7, NULL, NULL)")
    _run_daemon(server, kafka, prefix)
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
    rows, _ = _mirror_rows(spark, lake, db, "t")
    _assert_delta_rs_mirror(mirror, rows, ["id", "n", "f", "d"], ["id"])
    _assert_delta_rs_change_log(change_log, _changes(spark, lake, db, "t"))
    with conn.cursor() as cur:  # the tables exist now: ALTER TABLE on the lake side
        cur.execute("ALTER TABLE t ADD COLUMN c VARCHAR(10), MODIFY n BIGINT")
        cur.execute("INSERT INTO t VALUES (3, 9000000000, 2.5, '1000-01-01', 'new')")
        cur.execute("UPDATE t SET c = 'old', n = n * 2 WHERE id = 1")
        cur.execute("DELETE FROM t WHERE id = 3")
    _run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake) == 0
    # The first widening (n: int -> bigint) enabled Delta's type widening on both tables: Spark reads them,
    # their protocol names it now, and delta-rs reads them or refuses them for it
    rows, types = _mirror_rows(spark, lake, db, "t")
    assert types["n"] == "bigint" and rows == _plain_rows(conn, "t", "id") and len(rows) == 2
    _delta_rs_reads_widened(lambda: _assert_delta_rs_mirror(mirror, rows, ["id", "n", "f", "d", "c"], ["id"],
                                                            widened=True))
    _delta_rs_reads_widened(lambda: _assert_delta_rs_change_log(change_log, _changes(spark, lake, db, "t"),
                                                                widened=True))
    with conn.cursor() as cur:  # a batch whose only schema changes are widenings (a mirror the driver keeps)
        # f and d widen (date -> timestamp_ntz: a table without that type gets its feature); n narrows: stays bigint
        cur.execute("ALTER TABLE t MODIFY f DOUBLE, MODIFY n SMALLINT, MODIFY d DATETIME")
        cur.execute("INSERT INTO t VALUES (4, 1, 0.1, '2024-06-01 12:34:56', 'x')")
    _run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake) == 0
    rows, types = _mirror_rows(spark, lake, db, "t")
    assert {c: types[c] for c in ("id", "n", "f", "d", "c")} == {"id": "int", "n": "bigint", "f": "double",
                                                                 "d": "timestamp_ntz", "c": "string"}
    assert rows == _plain_rows(conn, "t", "id") and len(rows) == 3
    changes = spark.read.format("delta").load(str(lake / db / "t__changes"))
    assert (changes.schema["after"].dataType.simpleString()
            == "struct<id:int,n:bigint,f:double,d:timestamp_ntz,c:string>")
    assert changes.count() == 6
    for path in (mirror, change_log):
        assert {"typeWidening", "timestampNtz"} <= set(_delta_rs_protocol(path).reader_features or ()), path

    with conn.cursor() as cur:
        cur.execute("UPDATE t SET c = '7'")
        cur.execute("ALTER TABLE t MODIFY c INT")  # string -> int: no safe widening
        cur.execute("INSERT INTO t VALUES (5, 1, 1, NULL, 42)")
    _run_daemon(server, kafka, prefix)
    capsys.readouterr()
    assert lake_shape.land(kafka, prefix, lake) == 2
    err = capsys.readouterr().err
    assert f"binlake: error: `{db}`.`t`: column `c` changed from string to int at binlog position" in err, err
    # ... naming the statement that did it (read from the schema topic) and where it is in the binlog
    assert re.search(r"after the DDL statement at \d+:\d+:\d+: ALTER TABLE t MODIFY c INT;", err), err


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
    driver: every commit of both tables is binlake's own, and Spark and delta-rs read what the server has."""
    server = make_mariadb()
    db = "landadd"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    prefix, lake = f"landadd{lake_shape.name.replace('-', '')}", lake_shape.lake(tmp_path)
    big = 2 ** 64 - 1
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, v INT)")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(1, 1), (2 ** 63 + 5, 2), (big, 3)])
    _run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake) == 0
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE t ADD COLUMN c VARCHAR(10)")
        cur.execute(f"INSERT INTO t VALUES ({2 ** 63}, 4, 'new')")
        cur.execute(f"UPDATE t SET c = 'top', v = v + 1 WHERE id = {big}")
        cur.execute(f"DELETE FROM t WHERE id = {2 ** 63 + 5}")
    _run_daemon(server, kafka, prefix)
    assert lake_shape.land(kafka, prefix, lake) == 0
    rows, types = _mirror_rows(spark, lake, db, "t")
    assert types["id"] == "decimal(20,0)" and types["c"] == "string"
    assert rows == _plain_rows(conn, "t", "id") and len(rows) == 3
    mirror, change_log = lake / db / "t", lake / db / "t__changes"
    _assert_delta_rs_mirror(mirror, rows, ["id", "v", "c"], ["id"])
    _assert_delta_rs_change_log(change_log, _changes(spark, lake, db, "t"))
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
    _run_daemon(server, kafka, prefix)
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
    bad = b"BLK\x01\x00garbage"
    producer.send(f"{prefix}.{db}.t", key=f"{db}.t".encode(), value=bad,
                  headers=[("binlake.v", b"1"), ("binlake.seq", bytes(15) + b"\x01")]).get(timeout=30)
    producer.close()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (3, 'c')")
        cur.execute("UPDATE t SET v = 'z' WHERE id = 1")
    _run_daemon(server, kafka, prefix)
    capsys.readouterr()
    assert lake_shape.land(kafka, prefix, lake) == 2
    err = capsys.readouterr().err
    assert f"binlake: error: undecodable record at {prefix}.{db}.t[0]@" in err, err
    assert lake_shape.land(kafka, prefix, lake, "--quarantine") == 0  # the same batch again, now quarantined
    quarantined = spark.read.format("delta").load(str(lake / "_quarantine")).collect()
    assert [bytes(r.value) for r in quarantined] == [bad] and quarantined[0].error
    assert quarantined[0].topic == f"{prefix}.{db}.t"
    rows, _ = _mirror_rows(spark, lake, db, "t")
    assert rows == _plain_rows(conn, "t", "id")


def test_mirror_key_bounds_are_exact_for_every_key_type(spark, tmp_path) -> None:
    """The MERGE's key bounds travel as SQL text: each must come back as the batch's exact smallest and
    largest key (a bound off by a microsecond or a quote would make MERGE miss a row)."""
    from streaming_job.mirror_spark import key_ranges

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
        [(column, low, high, _, _)] = key_ranges(candidates, [("k", dtype)], ["k"])
        assert column == "`k`"
        got = spark.sql(f"SELECT {low} AS low, {high} AS high").first()
        assert (got.low, got.high) == (min(values), max(values)), dtype


@pytest.mark.parametrize("lake_shape", ["local", "cluster-s3"], indirect=True)
def test_small_files_of_many_micro_batches_are_compacted_and_nothing_is_seen_twice(
        make_mariadb, kafka, spark, tmp_path, capsys, lake_shape) -> None:
    """Forty-five transactions, each published on its own (the daemon's group commit would put a backlog
    into one record), landed one record per micro-batch (``--max-offsets-per-trigger 1``): the change log
    reaches 32 small files and is compacted by a batch's commit (the mirror stays under that). It still
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
        for i in range(45):
            conn.begin()
            cur.execute("INSERT INTO t VALUES (%s, %s), (%s, %s)", (2 * i, f"v{2 * i}", 2 * i + 1, f"v{2 * i + 1}"))
            if i % 5 == 4:
                cur.execute("UPDATE t SET v = 'updated' WHERE id = %s", (i,))
                cur.execute("DELETE FROM t WHERE id = %s", (i - 3,))
            conn.commit()
            _run_daemon(server, kafka, prefix)
    lake = lake_shape.lake(tmp_path)
    capsys.readouterr()
    assert lake_shape.land(kafka, prefix, lake, "--max-offsets-per-trigger", "1") == 0
    batches = len(re.findall(r"batch \d+: 1 records in", capsys.readouterr().err))
    assert batches >= 40, batches  # enough for 32 small files in each table
    server.flush_logs()
    counts = zoo._verbose_counts(server.binlog_files()[:-1], db)
    _assert_change_log(spark, lake, db, counts, ["t"])
    rows, _ = _mirror_rows(spark, lake, db, "t")
    assert rows == _plain_rows(conn, "t", "id") and len(rows) == 90 - 9
    from delta.tables import DeltaTable

    changes, mirror = (str(lake / db / table) for table in ("t__changes", "t"))
    # the change log compacted its 32 small files once; the mirror's rewrites of updated files merged some
    # of its own, and it never holds more than 32 small ones (test_mirror_driver shows its compaction)
    assert len(spark.read.format("delta").load(changes).inputFiles()) <= batches - 31
    assert len(spark.read.format("delta").load(mirror).inputFiles()) <= 32 + 1
    assert len(DeltaTable.forPath(spark, changes).history().collect()) >= batches  # a commit per batch
    stream = (spark.readStream.format("delta").option("startingVersion", "0").load(str(lake / db / "t__changes"))
              .writeStream.format("memory")
              .queryName(f"{prefix}_changes").trigger(availableNow=True).start())
    stream.awaitTermination()
    seen = spark.sql(f"SELECT seq, row_index FROM {prefix}_changes").collect()
    assert len(seen) == sum(counts[(verb, "t")] for verb in ("insert", "update", "delete"))
    assert len({(bytes(r.seq), r.row_index) for r in seen}) == len(seen)
