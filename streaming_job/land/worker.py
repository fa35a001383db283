"""Spark's Python workers, made cheaper to start and per task.

Start: in local mode the land job's Python daemon (``spark.python.daemon.module``, see
job.build_session) is this module. It imports the decoder (pyarrow, the codec and its C extensions)
once, then runs pyspark's own daemon, which forks every worker from it: a worker started later (the
first micro-batch, or after Spark retired idle workers) does not pay those imports (~1-2 s each on our
2-CPU machine).

Per task: see spark_archives.py.
"""

from __future__ import annotations

from ..runtime.spark_archives import keep_spark_archive_listings

DAEMON_MODULE = "streaming_job.land.worker"


def preload() -> None:
    """What every land task imports, imported once in the daemon, before it forks workers."""
    import pyspark.worker  # noqa: F401  (the worker's own main and pyspark.sql's Arrow code)

    from ..batch import writer  # noqa: F401  (pyarrow, the codec, its C extensions)
    from ..decode import decode  # noqa: F401

    keep_spark_archive_listings()


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
