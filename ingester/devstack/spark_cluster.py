"""A Spark standalone cluster on 127.0.0.1, for tests and local development: a master and workers, each
its own JVM started through pyspark's `bin/spark-class` (pyspark from PyPI ships no start scripts), so a
job's executors are processes of their own with their own Python workers, as on a real cluster.

Executors run the Python of ``PYSPARK_PYTHON`` as the driver names it (set it to an interpreter that has
binlake installed); their logs are under ``<datadir>/work/<app>/<executor>/``.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Self

from ingester.devstack.process import ManagedServer, die_with_parent, free_tcp_port, stop_server, tail

_DAEMON_MEMORY = "256m"  # the master's and a worker's own heap (executors get theirs from the job)


def spark_home() -> Path:
    """pyspark's package directory: its bin/ and jars/ are a Spark distribution's."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("pyspark is not installed (pip install 'binlake[spark]')")
    return Path(spec.origin).parent


class SparkCluster(ManagedServer):
    """A master and ``workers`` workers (``cores`` cores and ``memory`` for executors each) in a temporary or
    a given datadir; stop() ends them all, also those another process started (their pid files)."""

    host = "127.0.0.1"

    def __init__(self, datadir: str | os.PathLike[str] | None = None, port: int | None = None, *, workers: int = 1,
                 cores: int = 2, memory: str = "3g", start_timeout: float = 90.0) -> None:
        self._temporary = datadir is None
        self._datadir = Path(datadir if datadir is not None else tempfile.mkdtemp(prefix="binlake-spark-")).absolute()
        self._port = port if port is not None else free_tcp_port()
        self._ui_port = free_tcp_port()
        self.workers, self.cores, self.memory = workers, cores, memory
        self._start_timeout = start_timeout
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def __repr__(self) -> str:
        return f"SparkCluster(master={self.master!r}, workers={self.workers})"

    @property
    def master(self) -> str:
        return f"spark://{self.host}:{self._port}"

    @property
    def work_dir(self) -> Path:
        """Where the workers keep each application's executors' files and logs."""
        return self._datadir / "work"

    def _names(self) -> list[str]:
        return ["master", *(f"worker-{i}" for i in range(1, self.workers + 1))]

    def is_running(self) -> bool:
        return self._pid("master") is not None

    def start(self, *, detach: bool = False) -> Self:
        """Start the master, then the workers, and wait until the master has every worker ALIVE."""
        if (pid := self._pid("master")) is not None:
            raise RuntimeError(f"a Spark master pid {pid} already runs from {self._datadir}; stop it first")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", self.host, "--port",
                                    str(self._port), "--webui-port", str(self._ui_port)], detach)
            for name in self._names()[1:]:
                self._launch_worker(name, detach)
            self._wait_ready(self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def kill_worker(self, index: int = 1) -> None:
        """kill -9 of a worker and of the executors it started (a machine lost mid-job)."""
        pid = self._pid(f"worker-{index}")
        if pid is not None:
            subprocess.run(["pkill", "-9", "-P", str(pid)], check=False)
            os.kill(pid, signal.SIGKILL)
        proc = self._procs.pop(f"worker-{index}", None)
        if proc is not None:
            proc.wait()

    def start_worker(self, index: int = 1, detach: bool = False) -> None:
        """(Re)start a worker (after kill_worker: a machine back) and wait until the master has it."""
        known = self._alive_workers()
        self._launch_worker(f"worker-{index}", detach)
        self._wait_ready(1, known)

    def stop(self, timeout: float = 30.0) -> None:
        for name in reversed(self._names()):
            stop_server(self._procs.pop(name, None), functools.partial(self._pid, name), timeout,
                        f"Spark {name} from {self._datadir}")
            self._pid_file(name).unlink(missing_ok=True)

    def _pid_file(self, name: str) -> Path:
        return self._datadir / f"{name}.pid"

    def _log(self, name: str) -> Path:
        return self._datadir / f"{name}.log"

    def _launch_worker(self, name: str, detach: bool) -> None:
        self._launch(name, ["org.apache.spark.deploy.worker.Worker", self.master, "--host", self.host, "--cores",
                            str(self.cores), "--memory", self.memory, "--work-dir", str(self.work_dir),
                            "--webui-port", "0"], detach)

    def _launch(self, name: str, arguments: list[str], detach: bool) -> None:
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": self.host,
               "SPARK_DAEMON_MEMORY": _DAEMON_MEMORY, "SPARK_LOG_DIR": str(self._datadir),
               "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        with self._log(name).open("ab") as log:
            proc = subprocess.Popen([str(home / "bin" / "spark-class"), *arguments], stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=log, env=env, start_new_session=detach,
                                    preexec_fn=die_with_parent if not detach and sys.platform == "linux" else None)
        self._procs[name] = proc
        self._pid_file(name).write_text(f"{proc.pid}\n")

    def _wait_ready(self, workers: int, known: frozenset[str] = frozenset()) -> None:
        """Until the master has ``workers`` ALIVE workers besides the ``known`` ones."""
        deadline = time.monotonic() + self._start_timeout
        while True:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"Spark {name} exited with code {proc.returncode}; end of {self._log(name)}:\n"
                                       f"{tail(self._log(name).read_text(errors='replace'))}")
            if len(self._alive_workers() - known) >= workers:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Spark master {self.master} did not have {workers} new workers within "
                                   f"{self._start_timeout:g}s; end of {self._log('master')}:\n"
                                   f"{tail(self._log('master').read_text(errors='replace'))}")
            time.sleep(0.2)

    def _alive_workers(self) -> frozenset[str]:
        """The ids of the workers the master reports ALIVE (its web UI's JSON)."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self._ui_port}/json/", timeout=2) as response:
                state = json.load(response)
        except (OSError, ValueError):
            return frozenset()
        return frozenset(w["id"] for w in state.get("workers", ()) if w.get("state") == "ALIVE")

    def _pid(self, name: str) -> int | None:
        """The pid file's process if it is this cluster's ``name`` (its command line names our master)."""
        try:
            pid = int(self._pid_file(name).read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        wanted = str(self._port) if name == "master" else self.master
        return pid if os.fsencode(wanted) in cmdline else None
