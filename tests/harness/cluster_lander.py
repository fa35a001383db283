"""`binlake land` runs on a Spark standalone cluster into a bucket, served by one long-lived process: each run is
the CLI's own `main(["land", ...])`, as a `binlake land` process runs it, in a process that keeps its Spark
application (driver and executors) between runs, the way the in-process local shape keeps its local[2] session.

A fresh application per run cost ~30 s (a driver JVM with Hadoop's s3a, an executor launched on the worker) for
what the tests check in runs of a few seconds. The process has a cluster of its own, so tests that kill a
cluster's worker or driver (their own `binlake land` processes on the session's `spark_cluster`) never touch it.

Protocol: a JSON request per line on the server's stdin ({"argv": [...], "log": path}); the run's output (fds 1
and 2) goes to ``log``; the reply, a JSON line {"code": n}, comes on a pipe of its own (the JVM the first run
starts inherits the server's stdout, which goes to a file)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

_REPLY_FD = "BINLAKE_TEST_LANDER_REPLY_FD"
_TIMEOUT = 900.0  # a run's longest, as the process shape's


class ClusterLander:
    """The client: ``land(argv)`` runs `binlake <argv>` in the server, its output copied to this process's
    streams (the tests read both shapes' lines there); returns its exit code."""

    def __init__(self, master: str, env: dict[str, str]) -> None:
        self.master = master
        self._dir = Path(tempfile.mkdtemp(prefix="binlake-lander-"))
        read, write = os.pipe()
        self._reply = os.fdopen(read, "rb", buffering=0)
        with open(self._dir / "server.log", "wb") as log:
            self._proc = subprocess.Popen([sys.executable, "-m", "tests.harness.cluster_lander"],
                                          stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(write,),
                                          env={**env, "PYTHONPATH": os.getcwd(), _REPLY_FD: str(write)})
        os.close(write)
        self._runs = 0

    def land(self, argv: list[str]) -> int:
        assert self._proc.poll() is None, f"the lander exited with {self._proc.returncode}: {self._server_log()}"
        self._runs += 1
        log = self._dir / f"run-{self._runs}.log"
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"argv": argv, "log": str(log)}).encode() + b"\n")
        self._proc.stdin.flush()
        answer = select.poll()  # (select.select fails once this process has more than 1,024 files open)
        answer.register(self._reply, select.POLLIN)
        line = self._reply.readline() if answer.poll(_TIMEOUT * 1000) else b""
        output = log.read_text(errors="replace") if log.exists() else ""
        sys.stderr.write(output)
        if not line:
            self.close()
            raise AssertionError(f"the lander gave no answer to {argv} within {_TIMEOUT:.0f} s: "
                                 f"{self._server_log()}")
        return int(json.loads(line)["code"])

    def _server_log(self) -> str:
        return (self._dir / "server.log").read_text(errors="replace")[-3000:]

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()  # the server's loop ends, its session stops
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._reply.close()


def _run(argv: list[str], log: str) -> int:
    """``main(argv)`` with fds 1 and 2 on ``log``; its exit code (1 for an exception it let out)."""
    from ingester.cli.main import main

    saved = os.dup(1), os.dup(2)
    with open(log, "wb") as out:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            code: Any = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # reported in the run's output, as a process's would be
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    return int(code or 0)


def serve() -> None:
    reply = os.fdopen(int(os.environ.pop(_REPLY_FD)), "wb", buffering=0)
    for line in sys.stdin:
        request = json.loads(line)
        code = _run(request["argv"], request["log"])
        reply.write(json.dumps({"code": code}).encode() + b"\n")
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


if __name__ == "__main__":
    serve()
