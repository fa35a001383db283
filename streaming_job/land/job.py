"""The streaming query: Kafka source (read_committed, headers) -> foreachBatch(Lander), with metrics.

Used by ``binlake land`` (local mode by default) and by ``streaming_job/main.py`` under spark-submit.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent

from ingester.config import LandConfig
from ingester.config_values import duration_seconds
from ingester.registry_client import RegistryClient

from ..iceberg.auth import RestAuth
from ..iceberg.catalog import IcebergCatalog
from ..iceberg.maintenance import IcebergMaintenance
from ..lake.files import LakeFiles
from ..lake.lease import LakeLease
from ..lake.object_store import ObjectStoreSettings, on_object_store, probe
from ..lake.paths import is_local, scheme
from ..runtime.errors import LandError, python_error
from ..runtime.spark_logs import driver_java_options, jvm_stderr
from ..source.available_now import StartRetry, last_progress, run_rounds, start_offsets
from ..source.kafka_source import stream_source
from ..source.progress import read_newest_planned
from ..source.source_formats import source_format
from .sink import Lander
from .worker import DAEMON_MODULE

log = logging.getLogger("binlake.land")
_EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"  # build_session
# the JVM's exit status after ExitOnOutOfMemoryError, and Spark's after a task's (local mode: in the driver's JVM)
_OOM_EXITS = (3, 52)


@dataclass
class LandSettings:
    """What the job runs with: the configuration's land section (ingester.config.LandConfig: lake, checkpoint,
    trigger, quarantine, the Kafka source's options, driver_rows, keys: defined once, there) and what it
    takes from the rest of the configuration."""

    bootstrap: str
    topic_prefix: str
    land: LandConfig
    master: str | None = "local[2]"  # None: whatever spark-submit set (`binlake land` passes land.master)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    store: ObjectStoreSettings = field(default_factory=ObjectStoreSettings)  # a lake on S3: land.s3_*
    jvm_log: str | None = None  # the driver JVM's log file (None: Spark's console, e.g. --verbose)
    registry: RegistryClient | None = None  # --source-format debezium-avro: the topics' schema registry

    def __post_init__(self) -> None:
        if not self.land.lake or not self.land.checkpoint:
            raise LandError("land needs --lake and --checkpoint (or land.lake and land.checkpoint)")

    @property
    def lake(self) -> str:
        return self.land.lake or ""

    @property
    def checkpoint(self) -> str:
        return self.land.checkpoint or ""


def build_session(master: str | None, shuffle_partitions: int, app_name: str = "binlake-land",
                  store: ObjectStoreSettings | None = None, jvm_log: str | None = None,
                  iceberg: dict[str, str] | None = None) -> SparkSession:
    """A session with Delta Lake and the Kafka source from locally cached jars (no network once warm);
    with ``store``, Hadoop's s3a for a lake on it; with ``iceberg``, Iceberg's Spark runtime and these
    settings (iceberg/catalog.IcebergCatalog.spark_conf: the lake's catalog)."""
    from ..runtime.versions import iceberg_jars, s3a_jars, spark_jars

    jars = [*spark_jars(), *(iceberg_jars() if iceberg is not None else [])]
    builder = (SparkSession.builder.appName(app_name)
               .config("spark.jars", ",".join(str(p) for p in jars))
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               # No table feature by default (no type widening, deletion vectors, column mapping): a new table
               # gets the lowest protocol its columns need, which delta-rs, Polars and pandas read too; type
               # widening is enabled on a table at its first widening (delta/evolution.py, DeltaEvolution.add_columns;
               # docs/LAND.md)
               # A checkpoint (a Spark job writing the table's state) every 1,000 commits, not 10: with a commit
               # per micro-batch and table, the batch writing one is slower (~1 s warm, more in a busy JVM, which
               # grows its heap for the first: docs/LAND.md); 1 in 1,000 batches stays out of the p99
               .config("spark.databricks.delta.properties.defaults.checkpointInterval", "1000")
               .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
               # A Kafka consumer per topic partition is kept between batches: with a topic per table, the
               # default 64 made a batch touching hundreds of tables connect hundreds of consumers anew
               .config("spark.kafka.consumer.cache.capacity", "4096")
               .config("spark.databricks.delta.snapshotPartitions", "2")  # small logs, 2 CPUs
               # MERGE's source is decoded once per batch and deterministic: no second copy of it
               .config("spark.databricks.delta.merge.materializeSource", "none")
               # a parked table's rewrite (parking.py) runs its Spark jobs, if any, in a pool of its own beside the
               # batches' (the default pool, FIFO within it as before)
               .config("spark.scheduler.mode", "FAIR")
               # a driver JVM out of heap (e.g. in its scheduler's thread) would go on with a query that waits
               # forever, no task running and no error: it ends instead, and the job says why (query_error)
               .config("spark.driver.defaultJavaOptions", _EXIT_ON_OOM)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if store is not None:
        # on the JVMs' classpath (a cluster's executors read it from the same path), not shipped per job
        classpath = os.pathsep.join(str(p) for p in s3a_jars())
        builder = (builder.config("spark.driver.extraClassPath", classpath)
                   .config("spark.executor.extraClassPath", classpath))
        for key, value in store.hadoop_conf().items():
            builder = builder.config(key, value)
    for key, value in (iceberg or {}).items():
        builder = builder.config(key, value)
    if jvm_log is not None:  # Spark's own lines to a file, not the terminal (spark_logs.py)
        builder = builder.config("spark.driver.extraJavaOptions", driver_java_options(jvm_log))
    if master:  # executors' Python workers must import the codec: this interpreter's path, unless set
        builder = builder.master(master)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master and master.startswith("local"):
        # its workers are forked from a daemon that has the decoder imported (worker.py); a cluster's
        # executors may not have the package on the daemon's path, so only here
        builder = builder.config("spark.python.daemon.module", DAEMON_MODULE)
    if jvm_log is not None and SparkContext._active_spark_context is None:  # this starts the driver JVM
        with jvm_stderr(jvm_log):
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


class _ProgressAsJson(JStreamingQueryListener):
    """PySpark's bridge of a Python listener's events, with each batch's progress read as its JSON in one call to
    the JVM. PySpark's own reads each field of the progress through py4j, and each Java map it walks ends with a Java
    exception that it converts with a dozen class lookups: ~0.4 s a batch on a busy 2-CPU machine against ~6 ms,
    on the listener's thread, which holds the GIL the batch's own Python code needs."""

    def onQueryProgress(self, jevent: Any) -> None:
        self.pylistener.onQueryProgress(QueryProgressEvent.fromJson({"progress": json.loads(jevent.progress().json())}))


class LandMetrics(StreamingQueryListener):
    """Per micro-batch: rows landed per second, batch duration, lag; logged and in Prometheus."""

    @property
    def _jlistener(self) -> Any:  # (PySpark's StreamingQueryListener: the JVM's wrapper of its bridge)
        if not hasattr(self, "_jlistenerobj"):
            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_ProgressAsJson(self))
        return self._jlistenerobj

    def __init__(self, lander: Lander) -> None:
        self.lander = lander
        self.registry = CollectorRegistry()
        r = self.registry
        self.rows = Counter("binlake_land_rows", "Row changes landed in Delta change logs", registry=r)
        self.rate = Gauge("binlake_land_rows_per_second", "Row changes landed per second, last batch", registry=r)
        self.duration = Histogram("binlake_land_batch_seconds", "Micro-batch duration", registry=r,
                                  buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300))
        self.lag = Gauge("binlake_land_lag_seconds", "Now minus the newest landed commit timestamp", registry=r)
        self.batches = Counter("binlake_land_batches", "Micro-batches completed", registry=r)
        self.parked = Gauge("binlake_land_parked_tables", "Tables parked: their mirror's rewrite runs beside the "
                            "micro-batches, their records wait for its commit (docs/LAND.md)", registry=r)
        self.verified = Counter("binlake_verify_chunks", "Verify chunks compared with the mirrors", registry=r)
        self.mismatched = Counter("binlake_verify_mismatched_chunks", "Verify chunks that differ from the mirror",
                                  registry=r)

    def onQueryStarted(self, event: Any) -> None:
        log.info("query %s started", event.id)

    last_batch: int = -1

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        self.last_batch = progress.batchId
        stats = self.lander.last
        seconds = (progress.batchDuration or 0) / 1000
        self.batches.inc()
        self.duration.observe(seconds)
        self.rows.inc(stats.rows)
        self.verified.inc(stats.verified)
        self.mismatched.inc(stats.mismatched)
        rate = stats.rows / seconds if seconds else 0.0
        self.rate.set(rate)
        self.parked.set(self.lander.parked_tables())
        lag = max(0.0, time.time() - stats.newest_commit_ts) if stats.newest_commit_ts else None
        if lag is not None:
            self.lag.set(lag)
        records = stats.records if stats.records is not None else progress.numInputRows  # (the driver's read)
        log.info("batch %d: %d records in, %d row changes landed in %.2fs (%.0f rows/s), lag %s",
                 progress.batchId, records, stats.rows, seconds, rate,
                 f"{lag:.1f}s" if lag is not None else "-")
        log.debug("batch %d: Spark's step times (ms) %s", progress.batchId, dict(progress.durationMs or {}))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception:
            log.error("query stopped: %s", self.lander.error or event.exception.splitlines()[0])


def warm_up(spark: SparkSession, delta: bool = True) -> None:
    """Before the query: the Python workers' daemon started (it imports the decoder, worker.py) and, with
    ``delta``, Delta's commit path loaded in the JVM, on a scratch table (created, appended to, its files and
    transactions read, checkpointed). Otherwise the first micro-batch after every start pays both: 5-6 s on our
    2-CPU machine, on top of its own work. A local lake's tables are read and committed by the driver itself
    (delta_log), so its job skips the JVM's part (~4-6 s of every start). A failure here only costs that time
    again: logged, not raised."""
    started = time.monotonic()
    try:
        tasks = spark.sparkContext.defaultParallelism
        spark.range(tasks, numPartitions=tasks).mapInArrow(_started, "id long").toArrow()  # as batches come
        if not delta:
            log.info("warmed up Spark's Python workers in %.1fs", time.monotonic() - started)
            return
        from ..delta.commit import warm_up_commits

        warm_up_commits(spark)
    except Exception as exc:  # an optimisation: the query itself says what is wrong
        log.warning("warm-up failed, the first micro-batch pays Spark's and Delta's start: %s",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return
    log.info("warmed up Spark's Python workers and Delta in %.1fs", time.monotonic() - started)


def _started(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A warm-up task: its worker is forked from the daemon, which imported the decoder."""
    yield from batches


def run(settings: LandSettings, spark: SparkSession | None = None) -> int:
    """Run the query until it stops (available-now: once everything committed so far has landed)."""
    store = settings.store if on_object_store(settings.lake) else None
    catalog = None
    if settings.land.format == "iceberg":  # the lake's Iceberg catalog, built once: the job writes it with pyiceberg,
        # Spark reads it
        catalog = IcebergCatalog(settings.lake, settings.land.iceberg_catalog, store, settings.checkpoint,
                                 RestAuth.of(settings.land))
    spark = spark or build_session(settings.master, settings.land.shuffle_partitions, store=store,
                                   jvm_log=settings.jvm_log, iceberg=catalog.spark_conf() if catalog else None)
    if store is not None:
        probe(spark, settings.lake)
    master = spark.sparkContext.master or ""
    if is_local(settings.lake) and not master.startswith("local"):
        log.warning("the lake %s is a path of this machine, and the executors run on %s: every worker must "
                    "see it at the same path (a shared disk); an object store (s3a://) needs none", settings.lake,
                    master)
    files = LakeFiles.of(settings.lake, store)
    lease = LakeLease(files, settings.lake).acquire() if files is not None else None
    try:
        return _run(spark, settings, files, lease, catalog)
    finally:
        if lease is not None:
            lease.release()


def _run(spark: SparkSession, settings: LandSettings, files: LakeFiles | None, lease: LakeLease | None,
         catalog: IcebergCatalog | None = None) -> int:
    land = settings.land
    source_kind = source_format(land.source_format, spark, settings.lake, settings.bootstrap, settings.registry)
    source_kind.check(land.min_partitions)
    checkpoint_files = LakeFiles.of(settings.checkpoint, settings.store if on_object_store(settings.checkpoint)
                                    else None)
    lander = Lander(spark, settings.lake, settings.checkpoint, land.quarantine, settings.bootstrap,
                    settings.topic_prefix, driver_rows=land.driver_rows, min_tasks=land.min_partitions or 0,
                    keys=land.keys, files=files, lease=lease, source=source_kind, lake_format=land.format,
                    iceberg_catalog=catalog, compact_files=land.compact_files,
                    small_file_bytes=land.small_file_bytes, compact_bytes=land.compact_bytes,
                    key_memory=land.key_memory, quiet_compaction=duration_seconds(land.quiet_compaction),
                    deletion_vectors=land.deletion_vectors, iceberg_maintenance=IcebergMaintenance.of(land),
                    on_incompatible_change=land.on_incompatible_change, park_rows=land.park_rows,
                    checkpoint_files=checkpoint_files)
    listener = LandMetrics(lander)
    # The JVM's Delta path is warmed for a URI lake's running job (its first batch then lands in steady time);
    # a one-shot run would only pay it twice: on a cluster, 13 s of scratch-table work against ~3 s more in
    # its first batch (docs/LAND.md, "Start-up").
    warm_up(spark, delta=land.format == "delta" and not is_local(settings.lake) and land.trigger != "available-now")
    spark.streams.addListener(listener)
    if settings.metrics_port is not None:
        start_http_server(settings.metrics_port, settings.metrics_host, registry=listener.registry)
    planned = read_newest_planned(checkpoint_files, settings.checkpoint) if checkpoint_files is not None else None
    source = stream_source(settings.bootstrap, source_kind.topic_pattern(settings.topic_prefix),
                           settings.land.min_partitions,
                           settings.land.max_offsets_per_trigger, settings.land.kafka_source,
                           settings.land.max_batch_bytes,
                           None if planned is None else {t: {str(p): o for p, o in parts.items()}
                                                         for t, parts in planned.offsets.items()},
                           once=settings.land.trigger == "available-now")
    log.info("Kafka source: %s", type(source).__name__)
    reader = source.reader(spark)
    use_checkpoint_manager(spark, settings.checkpoint)
    writer = (reader.load().writeStream.foreachBatch(lander)
              .option("checkpointLocation", settings.checkpoint)
              .queryName("binlake-land"))
    target = None
    if settings.land.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
        target = start_offsets(source)  # binlake's source: Spark 4.0 runs one batch (available_now.py)
    else:
        writer = writer.trigger(processingTime=_interval(settings.land.trigger))
    jvm_log_start = _size(settings.jvm_log)
    try:
        lander.start()  # parked tables a stopped job left (parking.py)
        run_rounds(writer, target, lambda query: _drain(query, listener, lander.begun), lander.background_failure,
                   StartRetry(lambda: lander.calls))
        if settings.land.trigger == "available-now":
            lander.settle()  # the parked tables' rewrites and catch-ups: no next batch is coming
        lander.close()  # the work beside the batches done (Iceberg's table upkeep): its failure is the job's
    except Exception as exc:
        failure = lander.background_failure()
        if failure is not None:
            raise (failure if isinstance(failure, LandError) else
                   LandError(f"a parked table's rewrite or catch-up failed: {python_error(str(failure)) or failure}")
                   ) from None
        if lander.error is not None:
            raise lander.error from None
        raise query_error(exc, settings, jvm_log_start) from exc
    finally:
        with contextlib.suppress(Exception):  # a JVM that died: the error above is the one to tell
            spark.streams.removeListener(listener)
        try:  # (again after a failure: the query's error is the one raised)
            lander.close()
        except Exception as exc:
            log.error("the work beside the batches failed too: %s", exc)
    return 0


def query_error(exc: Exception, settings: LandSettings, jvm_log_start: int = 0) -> LandError:
    """The streaming query's failure in one line: a storage error, a lack of memory, else its own first line."""
    try:
        text = str(exc)
    except Exception:  # py4j's error of a JVM that died has no text ("<exception str() failed>")
        text = f"{type(exc).__name__}: Connection refused"
    return _storage_error(text, settings) or _memory_error(text, settings, jvm_log_start, _jvm_exit) or LandError(
        f"streaming query failed: {python_error(text) or (text.splitlines() or [type(exc).__name__])[0]}")


def _jvm_exit() -> int | None:
    """The driver JVM's exit status, where this process started it and it has ended (or ends within 5 s)."""
    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return None
    try:
        return int(proc.wait(timeout=5))
    except subprocess.TimeoutExpired:
        return None


_STORAGE_ERRORS = ("No space left on device", "Read-only file system", "Permission denied", "Disk quota exceeded")


def _storage_error(text: str, settings: LandSettings) -> LandError | None:
    """A failed write of the lake or the checkpoint, named by its path (Spark's first line may name neither).
    Delta commits a micro-batch and the checkpoint records it only after its files are written, so the
    last committed batch stays intact and the next run resumes after it."""
    cause = next((e for e in _STORAGE_ERRORS if e in text), None)
    if cause is None:
        return None
    paths = [p for p in (settings.lake, settings.checkpoint) if p in text] or [settings.lake, settings.checkpoint]
    return LandError(f"cannot write {' or '.join(paths)}: {cause}; nothing committed is lost: fix the storage and "
                     "run again, landing resumes after the last committed micro-batch")


_MEMORY_ERRORS = ("OutOfDirectMemoryError", "OutOfMemoryError", "Java heap space", "MemoryError")


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def _memory_error(text: str, settings: LandSettings, jvm_log_start: int = 0,
                  jvm_exit: Callable[[], int | None] | None = None) -> LandError | None:
    """A micro-batch that needed more memory than the driver (or a Python worker) had, in one line: what, and the
    settings that change it. Where the JVM died of it, the query's error says only that the connection to it is
    gone: its log (settings.jvm_log, from ``jvm_log_start``: this run's lines) tells, or its exit status
    (``jvm_exit``: that of a JVM ended by ExitOnOutOfMemoryError, whose log may be the console)."""
    said = text
    gone = any(e in text for e in ("Connection refused", "Error while receiving", "Error while sending",
                                  "Answer from Java side is empty"))
    if settings.jvm_log and gone:
        try:
            with open(settings.jvm_log, "rb") as log_file:
                log_file.seek(max(jvm_log_start, _size(settings.jvm_log) - 1_000_000))
                said += "\n" + log_file.read().decode(errors="replace")
        except OSError:
            pass
    cause = next((e for e in _MEMORY_ERRORS if e in said), None)
    if cause is None and gone and jvm_exit is not None and jvm_exit() in _OOM_EXITS:
        cause = "OutOfMemoryError"
    if cause is None:
        return None
    bound = f"{settings.land.max_batch_bytes >> 20} MiB" if settings.land.max_batch_bytes else "0: no bound"
    return LandError(f"a micro-batch ran out of memory ({cause}); nothing committed is lost: lower "
                     f"land.max_batch_bytes (--max-batch-bytes, now {bound}) or land.driver_rows (--driver-rows, now "
                     f"{settings.land.driver_rows:,}), or give the Spark driver more memory (e.g. "
                     "SPARK_DRIVER_MEMORY=4g), and run again")


# Spark's checkpoint files (offsets, commits, metadata) are written through Hadoop's FileContext by default: on a
# local disk, without Hadoop's native library, that starts a `chmod` process per file written and `readlink` ones per
# rename, ~20 processes and 60-90 ms per micro-batch. Its FileSystem-based manager writes the same files the same way
# (a temporary file renamed into place, never over an existing one) with a `chmod` per file only.
_LOCAL_CHECKPOINTS = "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"
_CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


def use_checkpoint_manager(spark: SparkSession, checkpoint: str) -> None:
    """The session's checkpoint file manager for a query checkpointed at ``checkpoint``: the FileSystem-based one on
    a local disk, Spark's default elsewhere (an object store's renames are its file system's either way)."""
    if scheme(checkpoint) in (None, "file"):
        spark.conf.set(_CHECKPOINT_MANAGER, _LOCAL_CHECKPOINTS)
    else:
        spark.conf.unset(_CHECKPOINT_MANAGER)


def _drain(query: Any, listener: LandMetrics, begun: int = -1, timeout: float = 10.0) -> None:
    """Listener events arrive asynchronously: let the last batch's reach the metrics before returning. A query whose
    last trigger found no new records reports that progress (no input rows) without a batch: no listener event
    follows it (Spark posts a QueryIdleEvent instead), there is nothing to wait for. A batch the driver read itself
    (source/driver_read.py) has no input rows in Spark's count either, but the sink began it (``begun``: the last
    batch it began)."""
    last = last_progress(query)
    if not last or (not last["numInputRows"] and last["batchId"] != begun):
        return
    deadline = time.monotonic() + timeout
    while listener.last_batch < last["batchId"] and time.monotonic() < deadline:
        time.sleep(0.05)


def _interval(trigger: str) -> str:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|m)", trigger.strip())
    if m is None:
        raise ValueError(f"trigger {trigger!r}: use an interval like 1s, 500ms, 2m, or available-now")
    unit = {"ms": "milliseconds", "s": "seconds", "m": "minutes"}[m.group(2)]
    return f"{m.group(1)} {unit}"
