"""A driver JVM out of heap ends the land job with one line, not a query that waits forever (issue 39: the driver's
candidates handed to Spark as local data made 51 MB tasks, the JVM ran out of heap in its scheduler's thread, and the
query then waited with no task running and no error).

The job's own session (job.build_session) in a process of its own, a streaming query whose micro-batch makes the JVM
allocate more than its heap (a thread of the JVM's other than the query's, as the scheduler's was): the JVM must end,
and the job's error be the memory line naming the settings to change.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

_SCRIPT = textwrap.dedent("""
    import sys
    from ingester.config import LandConfig
    from streaming_job.land.job import LandSettings, _jvm_exit, build_session, query_error

    land = LandConfig(lake=sys.argv[1], checkpoint=sys.argv[2], driver_rows=123456)
    settings = LandSettings("localhost:9", "p", land)
    spark = build_session("local[1]", 1, "binlake-oom-test")
    try:  # on a thread of the JVM's py4j server
        spark._jvm.java.nio.ByteBuffer.allocate(2_000_000_000)  # past the driver's heap (1 GiB)
        print("RESULT no failure")
    except Exception as exc:
        print("RESULT " + str(query_error(exc, settings)))
    print(f"EXIT {_jvm_exit()}")
""")


def test_a_driver_out_of_heap_ends_the_job_with_the_memory_line(tmp_path) -> None:
    """Without ExitOnOutOfMemoryError (job.build_session) the JVM lives on: the error goes back to the py4j call
    here, but the same error in the JVM's scheduler's thread went nowhere."""
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "lake"), str(tmp_path / "cp")],
                          capture_output=True, text=True, timeout=180)
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("RESULT ", "EXIT ")))
    assert said.get("EXIT") == "3", (done.stdout[-2000:], done.stderr[-3000:])  # the JVM ended, of the lack of heap
    line = said["RESULT"]
    assert line.startswith("a micro-batch ran out of memory (OutOfMemoryError)"), line
    assert "--driver-rows, now 123,456" in line and "SPARK_DRIVER_MEMORY" in line, line
