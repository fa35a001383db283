"""A class-data archive (the JDK's AppCDS) for the Spark drivers the tests start: the classes Spark, Delta and
Iceberg load at start and in their first jobs, parsed and verified once and mapped by every later driver JVM.
On 2 CPUs it took a third of a driver's CPU time to start and to run its first Delta write and MERGE
(about 6 of 21 CPU-s). It changes nothing a test sees: a JVM that cannot use the archive (another JDK,
another classpath, e.g. the s3a jars on a cluster driver's) loads its classes as before.

The archive is made once per machine and set of jars, by a driver running a small workload of the land job's
kinds, and kept in binlake's cache beside the jars (the two newest: a checkout's jars are another set). A driver of
a lake in a bucket has Hadoop's s3a and the AWS SDK first on its classpath, where that archive does not apply: its
own archive (``s3a``) is made the same way, by a driver that also writes a bucket of a private S3 server, and the
harness gives it to those drivers (``s3a_driver_env``). scripts/test
starts making it before ruff and mypy (`python -m tests.harness.jvm_archive`) and does not wait for it: the fast
lane's tests go first (tests/conftest.py), and the first integration test of each pytest process takes the
archive, waiting for the one being made (a file lock: one maker at a time), or makes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from ingester.maven import default_cache_dir, find_java

_TIMEOUT_S = 900  # its making competes with the fast lane for 2 CPUs: 300 s were too few on a CI machine
_KEEP = 2
_RETRY_AFTER_S = 600
_MODULE = "tests.harness.jvm_archive"  # (run as `python -m`, this module is __main__)

# Every JVM the tests start runs a short, small workload on 2 CPUs: C1 only (no C2 compilations) and the serial
# collector (no GC threads) spent about a third less CPU per land test than the JVM's defaults; the suite is
# CPU-bound. (C2 for the two long-lived in-process sessions, and Spark's expressions interpreted instead of
# compiled, were tried too: no less CPU.)
TEST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# The drivers' options (SPARK_SUBMIT_OPTS); the executors' go to them as a Spark setting, which SparkConf reads
# from a driver's system properties.
DRIVER_OPTIONS = f"{TEST_JVM} -Dspark.executor.extraJavaOptions='{TEST_JVM}'"


def driver_options(archive: bool, s3a: bool = False) -> str:
    """The tests' SPARK_SUBMIT_OPTS; with ``archive``, mapping the class-data archive (made now if missing) of the
    drivers of a local lake, or with ``s3a`` of a lake in a bucket."""
    if archive and (path := archive_for(DRIVER_OPTIONS, s3a)) is not None:
        return f"{DRIVER_OPTIONS} -XX:SharedArchiveFile={path} -Xlog:cds=off"
    return DRIVER_OPTIONS


def s3a_driver_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` of a process that starts a driver of a lake in a bucket: the s3a drivers' archive in place of the
    others' (``env`` as it is where the driver options are the caller's own)."""
    if env.get("SPARK_SUBMIT_OPTS") != driver_options(archive=True):
        return env
    return {**env, "SPARK_SUBMIT_OPTS": driver_options(archive=True, s3a=True)}


def archive_for(options: str, s3a: bool = False) -> Path | None:
    """The archive for driver JVMs started with `options` (made now if missing), with ``s3a`` of a lake in a
    bucket; None if it cannot be made (a warning says why: the tests run as well without it, only slower)."""
    kind = "spark-s3a-driver" if s3a else "spark-driver"
    path = default_cache_dir() / "jvm" / f"{kind}-{_fingerprint(options, s3a)}.jsa"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held while an archive is made: the others wait for it, then take it
        if path.exists():
            return path
        failed = path.with_suffix(".failed")  # a try that failed just now is not tried again by each waiter
        if failed.exists() and time.time() - failed.stat().st_mtime < _RETRY_AFTER_S:
            return None
        made = _make(path, options, s3a)
        if made is None:
            failed.touch()
        return made


def _make(path: Path, options: str, s3a: bool) -> Path | None:
    with tempfile.TemporaryDirectory(dir=path.parent) as work:
        made = Path(work) / path.name
        try:
            run = subprocess.run([sys.executable, "-m", _MODULE, str(made), options, *(["s3a"] if s3a else [])],
                                 cwd=Path(__file__).parents[2],
                                 capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
            why = "" if run.returncode == 0 and made.exists() else \
                ((run.stderr or run.stdout).strip().splitlines() or ["no output"])[-1]
        except subprocess.TimeoutExpired:
            why = f"not made within {_TIMEOUT_S} s"
        if why:
            warnings.warn(f"no class-data archive for the Spark drivers (tests run slower): {why}", stacklevel=2)
            return None
        os.replace(made, path)  # whole or not at all: another run may be reading the directory
    kind = path.name.rsplit("-", 1)[0]
    for old in sorted(path.parent.glob(f"{kind}-*.jsa"), key=lambda p: p.stat().st_mtime)[:-_KEEP]:
        old.unlink(missing_ok=True)  # a JVM mapping it keeps its pages
    return path


def _fingerprint(options: str, s3a: bool) -> str:
    """What the archive depends on: the JDK, the JVM options, and every jar a driver may load."""
    from pyspark.find_spark_home import _find_spark_home

    from streaming_job.runtime.versions import iceberg_jars, s3a_jars, spark_jars

    digest = hashlib.sha256()
    java = subprocess.run([str(find_java()), "-version"], capture_output=True, text=True, check=True)
    digest.update(java.stderr.encode())
    digest.update(options.encode())
    for jar in [*(s3a_jars() if s3a else []), *sorted(Path(_find_spark_home(), "jars").glob("*.jar")), *spark_jars(),
                *iceberg_jars()]:
        stat = jar.stat()
        digest.update(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _train(archive: Path, options: str, s3a: bool) -> None:
    """A driver that writes `archive` as it exits, after the land job's kinds of work: a stream from Kafka,
    Delta and Iceberg writes, MERGEs and reads, and Arrow batches through Python workers; with ``s3a``, the
    driver of a lake in a bucket, which also writes a Delta table there."""
    os.environ["SPARK_SUBMIT_OPTS"] = f"{options} -XX:ArchiveClassesAtExit={archive} -Xlog:cds=off"
    from kafka import KafkaProducer
    from pyspark import SparkContext

    from ingester.devstack.kafka import KafkaBroker
    from ingester.devstack.objectstore import ObjectStore
    from streaming_job.lake.object_store import ObjectStoreSettings
    from streaming_job.land.job import build_session

    with contextlib.ExitStack() as stack:
        lake = stack.enter_context(tempfile.TemporaryDirectory())
        broker = stack.enter_context(KafkaBroker())
        store = None
        if s3a:
            bucket = stack.enter_context(ObjectStore(Path(lake) / "s3"))
            bucket.create_bucket("train")
            os.environ.update(bucket.environment())
            store = ObjectStoreSettings(bucket.endpoint, path_style=True)
        broker.create_topic("train")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="train")
        producer.init_transactions()
        producer.begin_transaction()
        for n in range(100):
            producer.send("train", key=str(n).encode(), value=b"{}")
        producer.commit_transaction()
        producer.close()
        catalog = {"spark.sql.catalog.train": "org.apache.iceberg.spark.SparkCatalog",
                   "spark.sql.catalog.train.type": "hadoop", "spark.sql.catalog.train.warehouse": f"{lake}/iceberg"}
        spark = build_session("local[2]", 2, "binlake-jvm-archive", store=store, iceberg=catalog)
        rows = spark.range(1000).selectExpr("id", "CAST(id AS STRING) AS s", "id * 2 AS v")
        rows.write.format("delta").save(f"{lake}/delta")
        if s3a:
            rows.write.format("delta").save("s3a://train/delta")
            spark.read.format("delta").load("s3a://train/delta").count()
        spark.sql(f"MERGE INTO delta.`{lake}/delta` t USING (SELECT id, 'x' AS s, 7L AS v FROM range(10)) u "
                  "ON t.id = u.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
        spark.read.format("delta").load(f"{lake}/delta").groupBy("s").count().collect()
        spark.sql("CREATE TABLE train.db.t (id BIGINT, s STRING, v BIGINT) USING iceberg")
        rows.writeTo("train.db.t").append()
        spark.sql("MERGE INTO train.db.t t USING (SELECT id, 'x' AS s, 7L AS v FROM range(10)) u ON t.id = u.id "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
        spark.table("train.db.t").mapInArrow(lambda batches: batches, rows.schema).count()
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", "train").option("startingOffsets", "earliest")
                  .option("kafka.isolation.level", "read_committed").load()
                  .writeStream.trigger(availableNow=True).option("checkpointLocation", f"{lake}/checkpoint")
                  .foreachBatch(lambda batch, _: batch.write.format("delta").mode("append").save(f"{lake}/kafka"))
                  .start())
        stream.awaitTermination(_TIMEOUT_S)
        spark.stop()
    gateway = SparkContext._gateway
    if gateway is not None:  # the JVM writes the archive as it exits, which it does at the end of its stdin
        proc = gateway.proc
        proc.stdin.close()
        proc.wait(timeout=_TIMEOUT_S)


if __name__ == "__main__":
    if len(sys.argv) in (3, 4):
        _train(Path(sys.argv[1]), sys.argv[2], sys.argv[3:] == ["s3a"])
    else:  # scripts/test: both kinds, the local lakes' first (the first integration tests wait for it)
        archive_for(DRIVER_OPTIONS)
        archive_for(DRIVER_OPTIONS, s3a=True)
