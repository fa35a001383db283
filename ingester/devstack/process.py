"""What the devstack's servers (MariaDB, Kafka, the object store, the Spark cluster) share about their
processes: starting as a ``with`` block, stopping (also a server another process started, found through
its pid file), removing a temporary datadir, the end of a server's log for its errors."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

_PR_SET_PDEATHSIG = 1
LOG_TAIL_LINES = 20


class PortTaken(RuntimeError):
    """A server could not bind a port: another process took it after free_tcp_port() chose it."""

    def __init__(self, message: str, port: int | None = None) -> None:
        super().__init__(message)
        self.port = port


_LOWEST_PORT = 10000
_pick = random.SystemRandom()


def _ephemeral_start() -> int:
    """The first port of the kernel's range for ports it hands out itself (outgoing connections, listeners
    on port 0)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_tcp_port() -> int:
    """A loopback TCP port that nothing listens on right now (callers retry if it is taken meanwhile), chosen
    below the kernel's ephemeral range. There the kernel never hands it to another process, so a client still
    knocking at a stopped server's port (a Kafka client retrying a broker that is gone) cannot meet a listener
    that took the port by asking for port 0, such as Spark's socket for a Python worker, which then fails the
    query with "Authentication failed" on the client's bytes."""
    start = _ephemeral_start()
    for _ in range(100 if start > _LOWEST_PORT + 1000 else 0):
        port = _pick.randrange(_LOWEST_PORT, start)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # no room below the ephemeral range: the kernel's choice
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> None:
    """Runs in the child before exec: Linux sends SIGTERM when the parent dies, so no server outlives a
    killed test run."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def tail(text: str) -> str:
    """The last lines of a server's output, for an error message."""
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])


def stop_server(proc: subprocess.Popen[bytes] | None, server_pid: Callable[[], int | None], timeout: float,
                what: str) -> None:
    """Stop a server cleanly (SIGTERM), killing it if it hangs: ``proc`` where this process started it, else
    the process ``server_pid`` finds (through a pid file: one another process started). A no-op when
    neither runs; ``what`` names the server in the error of one that survives SIGKILL."""
    if proc is not None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return
    pid = server_pid()
    if pid is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while server_pid() == pid and time.monotonic() < deadline:
            time.sleep(0.05)
        if server_pid() != pid:
            return
    raise RuntimeError(f"{what} pid {pid} survived SIGKILL")


class ManagedServer:
    """A server started by ``with``: start() on entry (close() if that fails), close() on exit, which stops
    it and removes its datadir if that was a temporary one."""

    _datadir: Path
    _temporary: bool

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self, timeout: float = 30.0) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop the server and remove the datadir if it was a temporary one."""
        self.stop()
        if self._temporary:
            shutil.rmtree(self._datadir, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class ServerProcess(ManagedServer):
    """A server of one process, known by its pid file and by its configuration file on its command line
    (a stale pid file, a recycled pid or a zombie are not it): MariaDB, Kafka, the object store."""

    what = "server"  # its name in messages
    _proc: subprocess.Popen[bytes] | None = None
    _port: int
    _start_timeout: float

    def _place(self, datadir: str | os.PathLike[str] | None, prefix: str, port: int | None,
               start_timeout: float) -> None:
        """Its datadir (a temporary one named ``prefix...`` when None), its port (a free one when None) and how
        long a start may take: what the servers of one process set up alike."""
        self._temporary = datadir is None
        self._datadir = Path(datadir if datadir is not None else tempfile.mkdtemp(prefix=prefix)).absolute()
        self._port = port if port is not None else free_tcp_port()
        self._start_timeout = start_timeout
        self._proc = None

    @property
    def _pid_file(self) -> Path:
        raise NotImplementedError

    @property
    def _marker(self) -> Path:
        """The file its command line names (its configuration)."""
        raise NotImplementedError

    @property
    def _server_log(self) -> Path:
        raise NotImplementedError

    def is_running(self) -> bool:
        """Whether a server started from this datadir's configuration is alive, whoever started it."""
        return self._server_pid() is not None

    def _refuse_second(self) -> None:
        if (pid := self._server_pid()) is not None:
            raise RuntimeError(f"{self.what} pid {pid} already runs from {self._datadir}; stop it first")

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down cleanly (SIGTERM), killing it if it hangs; a no-op if it is not running.

        Also stops a server another process started from this datadir, found through its pid file. The
        datadir stays, even a temporary one, so start() can restart the server; close() removes it."""
        proc, self._proc = self._proc, None
        stop_server(proc, self._server_pid, timeout, f"{self.what} from {self._datadir}")
        self._pid_file.unlink(missing_ok=True)

    def _wait_serving(self, proc: subprocess.Popen[bytes], serving: Callable[[], bool], where: str, offset: int,
                      timeout: float) -> None:
        """Until ``serving()``; if the process exits or the time runs out first, stop it and raise with the
        end of its log (from ``offset``)."""
        deadline = time.monotonic() + timeout
        while not serving():
            if proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.what} did not serve {where} (exit {proc.returncode}); end of "
                                   f"{self._server_log}:\n{self._log_since(offset)}")
            time.sleep(0.1)

    def _log_since(self, offset: int) -> str:
        with self._server_log.open("rb") as log:
            log.seek(offset)
            return tail(log.read().decode(errors="replace"))

    def _server_pid(self) -> int | None:
        """The pid in the pid file if that process was started with our configuration."""
        try:
            pid = int(self._pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if os.fsencode(self._marker) in cmdline else None


def http_json(method: str, url: str, body: dict[str, Any] | None = None,
              content_type: str = "application/json") -> Any:
    """One request to a server's JSON API: its answer decoded (None when empty); an HTTP error is a
    RuntimeError naming the method, URL, status and the server's message."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {url}: {exc.code} {exc.read().decode(errors='replace')}") from None
    return json.loads(text) if text else None
