"""The land query's one error line for a failure Spark reports as a Python traceback inside its own message."""

from __future__ import annotations

from streaming_job.runtime.errors import python_error

SPARK = ("[STREAM_FAILED] Query [id = 2a76, runId = 5fe6] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_"
         "ERROR] An error occurred in the user provided function in foreach batch sink. Reason: An exception was "
         "raised by the Python Proxy. Return Message: Traceback (most recent call last):\n") + """\
  File "/venv/lib/python3.11/site-packages/py4j/clientserver.py", line 617, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/repo/streaming_job/land/sink.py", line 150, in __call__
    self.process(batch, batch_id)
sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE constraint failed: iceberg_namespace_properties.namespace
[SQL: INSERT INTO iceberg_namespace_properties ...]

\tat py4j.Protocol.getReturnValue(Protocol.java:476)
"""


def test_the_line_is_the_python_exceptions_not_sparks_header() -> None:
    assert python_error(SPARK) == ("sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) UNIQUE constraint "
                                   "failed: iceberg_namespace_properties.namespace")
    assert python_error("org.apache.kafka.common.errors.TimeoutException: no broker") is None


def test_a_batch_out_of_memory_is_one_line_naming_the_bound_and_the_drivers_memory(tmp_path) -> None:
    """Arrow's OutOfDirectMemoryError killed the driver JVM mid-batch (issue 39: a backlog of 10,000,000 row changes
    in one batch): the query's error says only that py4j's connection is gone; the JVM's log tells why."""
    from ingester.config import LandConfig
    from streaming_job.land.job import LandSettings, _memory_error

    jvm_log = tmp_path / "land-spark.log"
    jvm_log.write_text("Exception in thread \"stream execution thread\" io.netty.util.internal.OutOfDirectMemoryError: "
                       "failed to allocate 536870912 byte(s) of direct memory (used: 603979776, max: 1073741824)\n")
    settings = LandSettings("k:9092", "p", LandConfig(lake="/lake", checkpoint="/cp", max_batch_bytes=0),
                            jvm_log=str(jvm_log))
    error = _memory_error("An error occurred while calling o73.awaitTermination: [Errno 111] Connection refused",
                          settings)
    assert error is not None and "\n" not in str(error)
    assert str(error).startswith("a micro-batch ran out of memory (OutOfDirectMemoryError); nothing committed is lost")
    assert "--max-batch-bytes, now 0: no bound" in str(error) and "SPARK_DRIVER_MEMORY" in str(error)
    settings.land.max_batch_bytes = 64 << 20
    assert "now 64 MiB" in str(_memory_error("java.lang.OutOfMemoryError: Java heap space", settings))
    assert _memory_error("Connection refused", LandSettings("k:9092", "p", LandConfig(lake="/l", checkpoint="/c"),
                                                            jvm_log=str(tmp_path / "none.log"))) is None
    assert _memory_error("org.apache.kafka.common.errors.TimeoutException: no broker", settings) is None
    # an earlier run's lines in the same log tell nothing about this one
    assert _memory_error("Connection refused", settings, jvm_log.stat().st_size) is None
    # a JVM ended by ExitOnOutOfMemoryError (3) or by Spark after a task's (52), its lines on the console
    console = LandSettings("k:9092", "p", LandConfig(lake="/l", checkpoint="/c", driver_rows=1000))
    for status in (3, 52):
        error = _memory_error("Error while sending or receiving", console, jvm_exit=lambda status=status: status)
        assert error is not None and "(OutOfMemoryError)" in str(error) and "--driver-rows, now 1,000" in str(error)
    assert _memory_error("Answer from Java side is empty", console, jvm_exit=lambda: 1) is None
    assert _memory_error("Answer from Java side is empty", console, jvm_exit=lambda: None) is None
    assert _memory_error("a query's own error", console, jvm_exit=lambda: 3) is None  # a JVM alive is not asked


def test_a_tasks_failure_inside_foreach_batch_is_the_tasks_own_line() -> None:
    """A read task of binlake's Kafka source failed inside foreachBatch's function: pyspark's PythonException line
    has its message on the lines below, indented; the task's own exception line is the one told (the stop's CI
    printed only "streaming query failed: pyspark.errors.exceptions.captured.PythonException:")."""
    nested = SPARK.split('sqlalchemy.exc')[0] + """\
  File "/repo/streaming_job/land/sink.py", line 170, in process
    rows = frame.collect()
pyspark.errors.exceptions.captured.PythonException:
  An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/repo/streaming_job/source/kafka_tasks.py", line 124, in batches
    raise SourceError(f"Kafka did not give the committed records of {self._late()} for "
streaming_job.source.kafka_tasks.SourceError: Kafka did not give the committed records of p.d.t-0 for 120 s

\tat py4j.Protocol.getReturnValue(Protocol.java:476)
"""
    assert python_error(nested) == ("streaming_job.source.kafka_tasks.SourceError: Kafka did not give the committed "
                                    "records of p.d.t-0 for 120 s")
