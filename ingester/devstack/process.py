"""What the devstack's servers (MariaDB, Kafka, the object store) share about their processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self


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
    """A server started by ``with``: start() on entry (close() if that fails), close() on exit."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
