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
