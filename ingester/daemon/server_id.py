"""One live daemon per server_id on a server: a named lock the daemon holds on the source while it runs.

A replica's registration (SHOW SLAVE HOSTS / SHOW REPLICAS) outlives the replica's process: the server drops
it when its dump thread next writes to the closed socket, which on a quiet server is a heartbeat or two
away. So the listing cannot tell a daemon that stopped (or was killed) a second ago from a live one. The
lock can: the server releases it the moment its holder's connection closes, which the kernel does for a
stopped and a killed process alike. A daemon that gets the lock knows that no binlake daemon streams with
its server_id; a registration listed under binlake's report host (``sources.replication.REPORT_HOST``) is
then a stale one of ours, which the server replaces when we register (it ends the old dump thread). A
daemon that cannot get the lock within ``WAIT`` seconds is refused, naming the live holder.

A holder whose machine is lost without closing its connection keeps the lock until the server times the
idle session out: the session's ``wait_timeout`` is ``IDLE_LIMIT`` seconds and the holder pings it every
``PING`` seconds, so such a lock is free a minute later.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..sources.errors import ReplicationError
from ..sources.replication import SourceURL

log = logging.getLogger("binlake.run")
WAIT = 15.0  # seconds a starting daemon waits for a live holder to stop (a rolling restart's overlap)
PING = 10.0
IDLE_LIMIT = 60


class ServerIdInUse(ReplicationError):
    """A live binlake daemon streams from this server with the same server_id: no retry helps."""

    fatal = True


def lock_name(server_id: int) -> str:
    return f"binlake.server_id.{server_id}"


def lock_holder(cur: Any, server_id: int) -> str | None:
    """Who holds the server_id's lock ("connection N from HOST:PORT"), or None where it is free."""
    cur.execute("SELECT IS_USED_LOCK(%s)", (lock_name(server_id),))
    row = cur.fetchone()
    if row is None or row[0] is None:
        return None
    conn_id = int(row[0])
    try:  # visible to the same user (binlake's), or with the PROCESS privilege
        cur.execute("SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = %s", (conn_id,))
        found = cur.fetchone()
    except Exception:  # a server without the table: the connection id alone
        found = None
    return f"connection {conn_id}" + (f" from {found[0]}" if found and found[0] else "")


class ServerIdClaim:
    """The server_id's lock on one server, held (and kept alive) from ``acquire`` to ``release``."""

    def __init__(self, url: str, server_id: int) -> None:
        self.source = SourceURL.parse(url)
        self.server_id = server_id
        self.held = False
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()  # the connection is used by the pinger and by release

    def acquire(self, wait: float = WAIT) -> ServerIdClaim:
        """Take the lock, waiting up to ``wait`` s for a live holder to stop; raises ServerIdInUse naming it.
        A server without named locks (or a connection that fails) leaves the claim not held, with a warning:
        the replica listing alone then decides, as before."""
        import pymysql

        name = lock_name(self.server_id)
        refused = None
        try:
            got = self._lock()
            with self._conn.cursor() as cur:
                if got == 0:
                    holder = lock_holder(cur, self.server_id) or "a connection that just closed"
                    log.info("server_id %s is held by a binlake daemon on %s (%s): waiting up to %.0f s for it to "
                             "stop", self.server_id, self.source, holder, wait)
                    cur.execute("SELECT GET_LOCK(%s, %s)", (name, wait))
                    got = cur.fetchone()[0]
                    if got == 0:
                        refused = lock_holder(cur, self.server_id) or holder
        except pymysql.err.MySQLError as exc:
            log.warning("%s: cannot take the lock %s (%s): a restart seconds after a stop may find the old "
                        "registration of server_id %s and be refused", self.source, name, exc.args[-1],
                        self.server_id)
            self.release()
            return self
        if refused is not None:
            self.release()
            raise ServerIdInUse(f"{self.source}: server_id {self.server_id} is in use by a running binlake daemon "
                                f"({refused}); stop it first, or give this daemon another source.server_id")
        self.held = got == 1
        if self.held:
            self._thread = threading.Thread(target=self._keep_alive, name="binlake-server-id", daemon=True)
            self._thread.start()
        return self

    def _keep_alive(self) -> None:
        while not self._stop.wait(PING):
            with self._guard:
                try:
                    self._conn.ping(reconnect=False)
                except Exception as exc:  # the server restarted: the lock went with the session; take it again
                    log.warning("%s: the server_id lock's connection broke (%s): taking it again", self.source, exc)
                    self._reclaim()

    def _lock(self) -> int | None:
        """A new connection (timed out by the server after IDLE_LIMIT s idle) and the lock if it is free:
        GET_LOCK's answer (1 taken, 0 held elsewhere)."""
        self._conn = self.source.connect(connect_timeout=10, autocommit=True)
        with self._conn.cursor() as cur:
            cur.execute(f"SET SESSION wait_timeout = {IDLE_LIMIT}")
            cur.execute("SELECT GET_LOCK(%s, 0)", (lock_name(self.server_id),))
            return cur.fetchone()[0]

    def _reclaim(self) -> None:
        try:
            if self._lock() != 1:
                log.warning("%s: server_id %s's lock is held by another connection now", self.source,
                            self.server_id)
        except Exception as exc:  # the next ping tries again
            log.warning("%s: cannot take the server_id lock again yet: %s", self.source, exc)

    def release(self) -> None:
        """Stop pinging and close the connection: the server frees the lock with it."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._guard:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:  # already gone
                    pass
                self._conn = None
        self.held = False
