"""Running the land job in tests and reading what it wrote: mirrors and change logs (as Spark reads them)
against the server's rows and mariadb-binlog --verbose's row changes; a land job killed mid-batch."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingester.cli.main import main
from tests.harness.daemon import BINLAKE
from tests.harness.delta_rs import delta_rs_frame
from tests.harness.jvm_archive import s3a_driver_env


def run_land(kafka, prefix: str, lake: Path, *extra: str) -> int:
    """`binlake land --trigger available-now` in this process, its checkpoint in the lake's ``_checkpoint``."""
    return main(["land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake),
                 "--checkpoint", str(lake / "_checkpoint"), "--trigger", "available-now", *extra])


def run_land_process(kafka, prefix: str, lake: Path, *extra: str) -> int:
    """run_land as a process of its own: no Spark session is left in this one (tests before ``test_demo``,
    whose in-process demo would share it)."""
    command = [sys.executable, "-m", "ingester.cli.main", "land", "--kafka", kafka.bootstrap, "--topic-prefix",
               prefix, "--lake", str(lake), "--checkpoint", str(lake / "_checkpoint"), "--trigger", "available-now",
               *extra]
    return subprocess.run(command, env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=600).returncode


def land_command(kafka, prefix: str, lake: Path) -> tuple[list[str], dict[str, str]]:
    """`binlake land` as a process of its own, its checkpoint in the lake's ``_checkpoint`` (no trigger: add
    one): the command and its environment (the working tree importable)."""
    return ([*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake),
             "--checkpoint", str(lake / "_checkpoint")], {**os.environ, "PYTHONPATH": os.getcwd()})


def land_in_store(kafka, store, prefix: str, lake: str, env: dict[str, str] | None = None,
                  *extra: str) -> subprocess.CompletedProcess[str]:
    """`binlake land --trigger available-now` as a process into ``lake`` (an s3a:// URI of ``store``, an
    ObjectStore), its checkpoint beside the tables unless ``extra`` gives one; ``env``: its AWS variables
    (default the store's)."""
    cmd, environment = store_land_command(kafka, store, prefix, lake, env, *extra)
    return subprocess.run([*cmd, "--trigger", "available-now"], env=environment, capture_output=True, text=True,
                          timeout=600, check=False)


def store_land_command(kafka, store, prefix: str, lake: str, env: dict[str, str] | None = None,
                       *extra: str) -> tuple[list[str], dict[str, str]]:
    """`binlake land`'s command line (no trigger) and environment for ``land_in_store``."""
    checkpoint = [] if "--checkpoint" in extra else ["--checkpoint", f"{lake}/_checkpoint"]
    return ([*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", lake, *checkpoint,
             "--s3-endpoint", store.endpoint, "--s3-path-style", *extra], store_env(store, env))


def store_env(store=None, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process whose Spark driver reads or writes a lake in a bucket: this one's without its
    AWS variables, then ``env``'s (default those of ``store``, an ObjectStore, if any), and the s3a drivers'
    class-data archive."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    own = env if env is not None else store.environment() if store is not None else {}
    return s3a_driver_env({**base, **own})


def mirror_rows(spark, lake: Path, db: str, table: str) -> tuple[dict, dict]:
    """A mirror keyed by id as lake_frame reads it, without binlake's columns: (rows, column types)."""
    df = lake_frame(spark, lake, db, table)
    rows = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
    return rows, {f.name: f.dataType.simpleString() for f in df.schema.fields}


def plain_rows(conn, table: str, key: str) -> dict:
    """The server's SELECT * of a table, keyed by the columns named in ``key`` (comma-separated)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table}`")
        names = [d[0] for d in cur.description]
        return {tuple(r[names.index(k)] for k in key.split(",")): dict(zip(names, r, strict=True))
                for r in cur.fetchall()}


_ICEBERG_CATALOG: dict = {}  # session -> the settings of the Iceberg catalog lake_frame last loaded in it


def lake_frame(spark, lake: Path, db: str, table: str, lake_format: str = "delta", catalog: str | None = None,
               auth: Any = None, spark_reads: bool = False):
    """A lake table as a Spark DataFrame. Iceberg's as Spark reads it through the lake's catalog ``binlake`` (by
    default Iceberg's HadoopCatalog on the lake's path; ``catalog``: the JDBC or REST catalog pyiceberg wrote; a
    REST catalog's with ``auth``, an iceberg/auth.RestAuth). Delta's as delta-rs reads it (delta_rs.delta_rs_frame),
    or with ``spark_reads`` (and where delta-rs cannot read the table: type widening) by Spark's Delta source, as
    the type zoo's test of Spark's reading asks (docs/CORRECTNESS.md)."""
    if lake_format == "iceberg":
        from streaming_job.iceberg.catalog import IcebergCatalog

        conf = {k: v for k, v in IcebergCatalog(str(lake), catalog, auth=auth).spark_conf().items()
                if k.startswith("spark.sql.catalog.")}  # (not Spark's redaction: a setting of its start)
        if _ICEBERG_CATALOG.get(spark) != conf:  # the session's catalog `binlake` is another lake's: load it anew
            for k, v in conf.items():  # (a land job run in this process may have set these already)
                spark.conf.set(k, v)
            spark._jsparkSession.sessionState().catalogManager().reset()
            _ICEBERG_CATALOG[spark] = conf
        spark.sql(f"REFRESH TABLE binlake.`{db}`.`{table}`")
        return spark.table(f"binlake.`{db}`.`{table}`")
    if not spark_reads and (frame := delta_rs_frame(spark, lake / db / table)) is not None:
        return frame
    return spark.read.format("delta").load(str(lake / db / table))


def change_log_rows(spark, lake: Path, db: str, table: str, lake_format: str = "delta",
                    catalog: str | None = None, spark_reads: bool = False) -> list:
    """A table's change log as lake_frame reads it (its columns but the images)."""
    return lake_frame(spark, lake, db, f"{table}__changes", lake_format, catalog, spark_reads=spark_reads).select(
        "op", "seq", "row_index", "gtid", "commit_ts", "commit_date", "ingest_ts").collect()


def assert_change_log(spark, lake: Path, db: str, counts: collections.Counter, tables: list[str],
                      lake_format: str = "delta", catalog: str | None = None, spark_reads: bool = False) -> dict:
    """Every change log holds exactly the row changes mariadb-binlog --verbose saw, each once. Returns the
    rows read (``change_log_rows``) by table."""
    read = {}
    for table in tables:
        read[table] = change_log_rows(spark, lake, db, table, lake_format, catalog, spark_reads)
        assert_change_rows(table, counts, read[table])
    return read


def assert_change_rows(table: str, counts: collections.Counter, rows: list) -> None:
    """A change log's rows (``op``, ``seq``, ``row_index``, ``gtid``, ``commit_ts``, ``commit_date`` attributes)
    are the row changes mariadb-binlog --verbose counted for ``table``, each once."""
    got = collections.Counter(r.op for r in rows)
    want = {op: counts[(verb, table)] for op, verb in (("insert", "insert"), ("update", "update"),
                                                         ("delete", "delete")) if counts[(verb, table)]}
    assert dict(got) == want, (table, dict(got), want)
    keys = [(bytes(r.seq), r.row_index) for r in rows]
    assert len(set(keys)) == len(keys), f"{table}: duplicate changes"
    assert all(r.commit_date == r.commit_ts.date() and r.gtid for r in rows), table


def committed_batches(checkpoint: Path) -> int:
    """Micro-batches the query has committed (Spark's commit log)."""
    return len(list((checkpoint / "commits").glob("[0-9]*")))


def landed_everything(kafka, prefix: str, checkpoint: Path) -> bool:
    """Whether the land job's committed batches reach the end of every table topic of ``prefix`` (its committed
    records), and no table is parked (streaming_job/statements/parking.py): the lake has everything Kafka has."""
    import re

    from kafka import KafkaConsumer, TopicPartition

    from streaming_job.lake.files import LakeFiles
    from streaming_job.source.progress import read_landed
    from streaming_job.source.source_formats import topic_pattern
    from streaming_job.statements.parking import read_parks

    files = LakeFiles.on_disk()
    landed = read_landed(files, str(checkpoint))
    if landed is None or read_parks(files, str(checkpoint)):
        return False
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed", group_id=None)
    try:
        topics = [t for t in consumer.topics() if re.fullmatch(topic_pattern(prefix), t)]
        ends = consumer.end_offsets([TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t)])
    finally:
        consumer.close()
    return all(landed.offsets.get(tp.topic, {}).get(tp.partition, 0) >= end for tp, end in ends.items())


def running_until(cmd: list[str], env: dict[str, str], checkpoint: Path, batches: int,
                  then: float) -> subprocess.Popen:
    """`binlake land --trigger 1s` started in a process group of its own, returned once ``batches``
    micro-batches have committed and ``then`` seconds more have passed (mid-way through the next)."""
    proc = subprocess.Popen([*cmd, "--trigger", "1s"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while committed_batches(checkpoint) < batches and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(then)
    return proc


def kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the driver's JVM and Python workers share its process group
    proc.wait()


def killed_at_line(cmd: list[str], env: dict[str, str], line: str, timeout: float = 300) -> str:
    """`binlake land --trigger available-now` started in a process group of its own and killed with SIGKILL as
    soon as its log has a line containing ``line`` (e.g. a table statement's, logged as it is applied: mid-batch,
    after the batch's earlier parts committed); the log up to there."""
    proc = subprocess.Popen([*cmd, "--trigger", "available-now"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        assert proc.stderr is not None
        for text in proc.stderr:
            seen.append(text)
            if line in text or time.monotonic() > deadline:
                break
    finally:
        kill_group(proc)
    assert any(line in s for s in seen), "".join(seen[-30:])
    return "".join(seen)


class RunningLand:
    """`binlake land --trigger 1s` as a process group of its own; its log lines kept as they come."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path | None = None) -> None:
        """``log``: a file that gets the lines too (a test's tmp_path: what a failure looks at)."""
        self.proc = subprocess.Popen([*cmd, "--trigger", "1s"], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self.log = log
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        with open(self.log, "a") if self.log is not None else open(os.devnull, "w") as out:
            for line in self.proc.stderr:
                self.lines.append(line)
                out.write(f"{time.time():.3f} {line}")
                out.flush()

    def wait_for(self, text: str, timeout: float = 240, after: int = 0) -> int:
        """The index of the first log line from ``after`` on holding ``text``, once there is one."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((i for i in range(after, len(self.lines)) if text in self.lines[i]), None)
            if found is not None:
                return found
            assert self.proc.poll() is None, self.tail()
            assert time.monotonic() < deadline, self.tail()
            time.sleep(0.05)

    def until(self, condition: Callable[[], bool], timeout: float = 300) -> None:
        """Until ``condition()`` holds (asked twice a second), the job running all along."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.proc.poll() is None, self.tail()
            assert time.monotonic() < deadline, self.tail()
            time.sleep(0.5)

    def tail(self) -> str:
        """The job's last log lines; all of them up to its last if it has ended (its error comes last)."""
        if self.proc.poll() is not None:
            self.reader.join(timeout=10)
        return "".join(self.lines[-30:])

    def kill_at(self, text: str, timeout: float = 240) -> None:
        """SIGKILL as soon as a log line holds ``text`` (a statement's, logged as it is applied: mid-batch)."""
        self.wait_for(text, timeout)
        kill_group(self.proc)

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=120)

    def __enter__(self) -> RunningLand:
        return self

    def __exit__(self, *exc: object) -> None:
        """A job still running at the block's end (a failed test) is killed."""
        if self.proc.poll() is None:
            kill_group(self.proc)
