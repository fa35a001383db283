"""One job per lake: the land job holds a lease on its lake (``<lake>/_binlake_job``) while it runs.

Two jobs on one lake (and checkpoint) would race for the same Delta versions and Spark offsets; on S3
neither Delta's S3 log store nor the driver's own log writer can tell them apart (no put-if-absent), so
the second must not start. The lease names its holder (host, pid, a random id) and is rewritten every
``RENEW`` seconds; a job that finds it:

- absent, or held by a process of this host that no longer runs (kill -9, a crash): takes it at once;
- held elsewhere: watches it for ``WATCH`` seconds: a holder that renews it is alive (the new job stops with
  one line naming it); one that does not has died (a lost machine or pod): the new job takes it over.

The holder checks at every renewal that the lease is still its own; if another job took it (a holder
stalled for longer than ``WATCH``), the holder's next micro-batch stops it. A clean stop deletes the lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

import orjson

from ..runtime.errors import LandError
from .files import LakeFiles
from .paths import join

log = logging.getLogger("binlake.land")
LEASE = "_binlake_job"
RENEW = 3.0  # seconds between a holder's renewals
WATCH = 12.0  # seconds a lease held elsewhere is watched for a renewal before it is taken over


class LakeLease:
    def __init__(self, files: LakeFiles, lake: str) -> None:
        self.files, self.lake = files, lake
        self.path = join(lake, LEASE)
        self.mine = {"id": uuid.uuid4().hex, "host": socket.gethostname(), "pid": os.getpid()}
        self.lost: str | None = None  # why the lease is no longer ours (another job took it)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, watch: float = WATCH) -> LakeLease:
        """Take the lease (waiting up to ``watch`` s to tell a dead holder elsewhere from a live one), then
        keep renewing it on a thread. Raises LandError naming the other job if it is alive, or the lake
        if it cannot be read or written."""
        try:
            self._take(watch)
        except OSError as exc:
            raise LandError(f"cannot write {self.lake}: {exc.strerror or exc}; nothing committed is lost: fix the "
                            "storage and run again, landing resumes after the last committed micro-batch") from None
        self._thread = threading.Thread(target=self._renew, name="binlake-lake-lease", daemon=True)
        self._thread.start()
        return self

    def _take(self, watch: float) -> None:
        first = self._holder()
        if first is not None and first.get("id") != self.mine["id"] and not self._dead_here(first):
            holder = first
            log.info("the lake %s has the lease of a job on %s (pid %s): watching it for %.0fs", self.lake,
                     holder.get("host"), holder.get("pid"), watch)
            deadline = time.monotonic() + watch
            while time.monotonic() < deadline:
                time.sleep(min(0.5, watch))
                now = self._holder()
                if now is None:
                    break
                if now != first:  # renewed (or being rewritten), or taken by a third job: alive
                    named = now if "host" in now else first
                    raise LandError(f"another binlake land job writes the lake {self.lake} (host "
                                    f"{named.get('host')}, pid {named.get('pid')}: its lease {self.path} is "
                                    "renewed); one job per lake and checkpoint: stop it first")
        self._write()

    def check(self) -> None:
        """Raises LandError where another job took the lease (called before each micro-batch's work)."""
        if self.lost is not None:
            raise LandError(self.lost)

    def release(self) -> None:
        """Stop renewing; delete the lease if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            held = self._holder()
            if held is not None and held.get("id") == self.mine["id"]:
                self.files.delete(self.path)
        except OSError as exc:  # the next job finds it held by a process that is gone: taken at once
            log.warning("could not delete the lease %s: %s", self.path, exc)

    def _renew(self) -> None:
        while not self._stop.wait(RENEW):
            try:
                held = self._holder()
                if held is not None and held.get("id") != self.mine["id"]:
                    self.lost = (f"another binlake land job (host {held.get('host')}, pid {held.get('pid')}) "
                                 f"took the lease of the lake {self.lake}: this job stops (one job per lake)")
                    return
                self._write()
            except OSError as exc:  # the store is away for a moment: the next renewal tries again
                log.warning("could not renew the lease %s: %s", self.path, exc)

    def _write(self) -> None:
        self.files.write(self.path, orjson.dumps({**self.mine, "renewed": time.time()}))

    def _holder(self) -> dict[str, object] | None:
        """The lease's content (its holder and last renewal), or None where there is none."""
        data = self.files.read(self.path)
        if data is None:
            return None
        try:
            content = orjson.loads(data)
        except orjson.JSONDecodeError:
            return {}
        return content if isinstance(content, dict) else {}

    def _dead_here(self, holder: dict[str, object]) -> bool:
        """A holder of this host whose process is gone (or this very process: an earlier run in it)."""
        if holder.get("host") != self.mine["host"]:
            return False
        pid = holder.get("pid")
        if not isinstance(pid, int) or pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
