"""Preflight checks (``binlake doctor`` and daemon start-up): is this server ready to be replicated?

Each check reads what the server reports about itself and says, in plain words, what to change.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Config
    from .server_id import ServerIdClaim

log = logging.getLogger("binlake.run")

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass
class Finding:
    level: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.level:<4} {self.check}: {self.message}"


def check_source(url: str, server_id: int, claimed: bool = False, wait: float = 0.0) -> tuple[str, list[Finding]]:
    """Connect as the replication user would and run every check; (redacted source, findings). ``claimed``:
    the caller holds the server_id's lock (a starting daemon); ``wait``: seconds another replica's
    registration of the server_id is waited for to go."""
    from ..sources.replication import SourceURL

    src = SourceURL.parse(url)
    with src.connect(connect_timeout=10) as conn:
        return str(src), run_checks(conn, server_id, claimed, wait)


def start_checks(cfg: Config, sources: list[str]) -> tuple[int, ServerIdClaim | None]:
    """The daemon's start (``_start_checks``), tried again with a growing pause while no server can be reached,
    for up to ``source.start_wait`` seconds (a server still starting beside the daemon); then that one line."""
    from ..sources.errors import SourceUnreachable

    wait = cfg.source.start_wait
    deadline, delay = time.monotonic() + wait, 0.5
    while True:
        try:
            return _start_checks(cfg, sources)
        except SourceUnreachable as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                if wait > 0:
                    raise SourceUnreachable(f"{exc} (tried for {wait:g} s: source.start_wait)") from None
                raise
            pause = min(delay, left)
            log.warning("%s; trying again in %.1f s (source.start_wait: %.0f s left)", exc, pause, left)
            time.sleep(pause)
            delay = min(delay * 2, 10.0)


def _start_checks(cfg: Config, sources: list[str]) -> tuple[int, ServerIdClaim | None]:
    """One try of the daemon's start: the checks on every listed server (warnings logged, failures raised as one
    ReplicationError); the first reachable server is the one to stream from, and its server_id's lock
    (server_id.py) is taken before its checks, so that its own stale registration is told from another
    replica's. Returns that server's index in ``sources`` and the lock (the caller releases it)."""
    from ..sources.errors import ReplicationError, SourceUnreachable
    from ..sources.replication import SourceURL
    from .server_id import ServerIdClaim

    chosen: int | None = None
    claim: ServerIdClaim | None = None
    try:
        for index, url in enumerate(sources):
            streamed = chosen is None
            try:
                if streamed:
                    claim = ServerIdClaim(cfg.source_url(url), cfg.source.server_id).acquire()
                src, findings = check_source(cfg.source_url(url), cfg.source.server_id,
                                             claimed=streamed and claim is not None and claim.held,
                                             wait=3 * cfg.source.heartbeat if streamed else 0.0)
            except SourceUnreachable as exc:
                if len(sources) == 1:
                    raise
                log.warning("preflight: %s", exc)
                if streamed and claim is not None:
                    claim.release()
                    claim = None
                continue
            if streamed:
                chosen = index
            for finding in findings:
                if finding.level == WARN:
                    log.warning("preflight: %s: %s", src, finding)
            failures = [f for f in findings if f.level == FAIL]
            if failures:
                raise ReplicationError(f"{src}: not ready to replicate: " + "; ".join(
                    f"{f.check}: {f.message}" for f in failures))
        if chosen is None:
            raise SourceUnreachable("no server of source.url and source.hosts can be reached: "
                                    + ", ".join(str(SourceURL.parse(u)) for u in sources))
    except BaseException:
        if claim is not None:
            claim.release()
        raise
    return chosen, claim


def _var(cur: Any, name: str) -> str | None:
    cur.execute("SHOW GLOBAL VARIABLES LIKE %s", (name,))
    row = cur.fetchone()
    return None if row is None else str(row[1])


def run_checks(conn: Any, server_id: int, claimed: bool = False, wait: float = 0.0) -> list[Finding]:
    """Checks on a connected pymysql connection, as the user binlake replicates with."""
    out: list[Finding] = []
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
        mariadb = "MariaDB" in version
        out.append(Finding(OK, "server", version))

        log_bin = _var(cur, "log_bin")
        out.append(Finding(OK, "log_bin", "ON") if log_bin == "ON" else
                   Finding(FAIL, "log_bin", f"{log_bin}: enable binary logging (log_bin) and restart the server"))
        fmt = _var(cur, "binlog_format")
        out.append(Finding(OK, "binlog_format", fmt or "") if fmt == "ROW" else
                   Finding(FAIL, "binlog_format", f"{fmt}: set binlog_format=ROW (statements cannot be decoded "
                                                  "into rows)"))
        image = _var(cur, "binlog_row_image")
        out.append(Finding(OK, "binlog_row_image", image or "") if image in (None, "FULL") else
                   Finding(WARN, "binlog_row_image", f"{image}: updates and deletes carry only some columns; "
                                                     "FULL gives complete before/after images"))
        meta = _var(cur, "binlog_row_metadata")
        out.append(Finding(OK, "binlog_row_metadata", meta or "") if meta == "FULL" else
                   Finding(WARN, "binlog_row_metadata", f"{meta or 'not supported'}: without FULL, TABLE_MAPs "
                                                        "carry no column names (NO_LOG: no charsets, signedness or"
                                                        " labels either); binlake's schema history supplies them "
                                                        "(schema.history); FULL needs none"))
        checksum = _var(cur, "binlog_checksum")
        out.append(Finding(OK, "binlog_checksum", checksum or ""))
        if mariadb:
            strict = _var(cur, "gtid_strict_mode")
            out.append(Finding(OK, "gtid", f"MariaDB GTIDs (gtid_strict_mode={strict})"))
        else:
            mode = _var(cur, "gtid_mode")
            out.append(Finding(OK, "gtid_mode", mode or "") if mode == "ON" else
                       Finding(WARN, "gtid_mode", f"{mode}: without GTIDs, failover to another server cannot "
                                                  "resume exactly; positions still work on this server"))
        out.extend(_privileges(cur, mariadb))
        out.extend(_replicas(cur, server_id, mariadb, claimed, wait))
        out.extend(_retention(cur, mariadb))
    return out


def _privileges(cur: Any, mariadb: bool) -> list[Finding]:
    cur.execute("SHOW GRANTS")
    grants = " ".join(row[0] for row in cur.fetchall()).upper()
    if "ALL PRIVILEGES ON *.*" in grants:
        return [Finding(WARN, "privileges", "the user has ALL PRIVILEGES; binlake needs only REPLICATION SLAVE, "
                                            "REPLICATION CLIENT (MariaDB: BINLOG MONITOR) and SELECT")]
    needed = ["REPLICATION SLAVE", "BINLOG MONITOR" if mariadb else "REPLICATION CLIENT"]
    missing = [p for p in needed if p not in grants and not (p == "BINLOG MONITOR" and "REPLICATION CLIENT" in grants)]
    if missing:
        return [Finding(FAIL, "privileges", f"missing {', '.join(missing)}: GRANT {', '.join(missing)} ON *.* "
                                            "TO the binlake user")]
    if "SELECT" not in grants:
        return [Finding(WARN, "privileges", "no SELECT: snapshots need SELECT on the captured tables")]
    return [Finding(OK, "privileges", "replication and SELECT granted")]


def _replicas(cur: Any, server_id: int, mariadb: bool, claimed: bool, wait: float) -> list[Finding]:
    """Is ``server_id`` free on this server? ``claimed``: this process holds its lock (daemon/server_id.py),
    so no live binlake daemon uses it and a registration under binlake's report host is a stale one of
    ours; otherwise (the doctor) the lock's holder, if any, is a live daemon. Another replica's registration
    is waited for up to ``wait`` s (one left by an older binlake, which reported no host, goes with its
    dump thread's next heartbeat)."""
    import pymysql

    from ..sources.replication import REPORT_PREFIX
    from .server_id import lock_holder

    cur.execute("SELECT @@server_id")
    own = int(cur.fetchone()[0])
    if server_id == own:
        return [Finding(FAIL, "server_id", f"{server_id} is already used by the server itself: choose another "
                                           "source.server_id")]
    deadline = time.monotonic() + wait
    while True:
        try:
            cur.execute("SHOW SLAVE HOSTS" if mariadb else "SHOW REPLICAS")
            hosts = {int(row[0]): str(row[1] or "") for row in cur.fetchall()}
        except pymysql.err.MySQLError as exc:  # listing replicas needs an admin privilege we should not have
            return [Finding(WARN, "server_id", f"cannot list the server's replicas ({exc.args[-1]}); make sure "
                                               f"no other replica uses server_id {server_id}")]
        if server_id not in hosts:
            return [Finding(OK, "server_id", f"{server_id} is free")]
        if hosts[server_id].startswith(REPORT_PREFIX):
            holder = None if claimed else lock_holder(cur, server_id)
            if holder is not None:
                return [Finding(FAIL, "server_id", f"{server_id} is in use by a running binlake daemon ({holder}, "
                                                   f"{hosts[server_id]}): stop it first or choose another "
                                                   "source.server_id")]
            return [Finding(OK, "server_id", f"{server_id} was registered by a binlake daemon that stopped "
                                             f"({hosts[server_id]}): the server replaces its registration")]
        if time.monotonic() >= deadline:
            return [Finding(FAIL, "server_id", f"{server_id} is already used by another replica "
                                               f"({hosts[server_id] or 'no host reported'}): choose another "
                                               "source.server_id")]
        time.sleep(0.5)


def _retention(cur: Any, mariadb: bool) -> list[Finding]:
    seconds = _var(cur, "binlog_expire_logs_seconds")
    if not seconds or seconds == "0":
        days = _var(cur, "expire_logs_days")
        seconds = str(int(float(days) * 86400)) if days else "0"
    if int(seconds) == 0:
        return [Finding(OK, "retention", "binlogs are never purged automatically")]
    hours = int(seconds) / 3600
    level = WARN if hours < 24 else OK
    return [Finding(level, "retention", f"binlogs are kept {hours:.0f} h: binlake must never lag more than that "
                                        "(or it needs a new snapshot)")]


def worst(findings: list[Finding]) -> str:
    levels = {f.level for f in findings}
    return FAIL if FAIL in levels else WARN if WARN in levels else OK
