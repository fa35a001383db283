"""Preflight checks (``binlake doctor`` and daemon start-up): is this server ready to be replicated?

Each check reads what the server reports about itself and says, in plain words, what to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass
class Finding:
    level: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.level:<4} {self.check}: {self.message}"


def check_source(url: str, server_id: int) -> tuple[str, list[Finding]]:
    """Connect as the replication user would and run every check; (redacted source, findings)."""
    from ..sources.replication import SourceURL

    src = SourceURL.parse(url)
    with src.connect(connect_timeout=10) as conn:
        return str(src), run_checks(conn, server_id)


def _var(cur: Any, name: str) -> str | None:
    cur.execute("SHOW GLOBAL VARIABLES LIKE %s", (name,))
    row = cur.fetchone()
    return None if row is None else str(row[1])


def run_checks(conn: Any, server_id: int) -> list[Finding]:
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
        out.extend(_replicas(cur, server_id, mariadb))
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


def _replicas(cur: Any, server_id: int, mariadb: bool) -> list[Finding]:
    import pymysql

    cur.execute("SELECT @@server_id")
    own = int(cur.fetchone()[0])
    try:
        cur.execute("SHOW SLAVE HOSTS" if mariadb else "SHOW REPLICAS")
        ids = {int(row[0]) for row in cur.fetchall()}
    except pymysql.err.MySQLError as exc:  # listing replicas needs an admin privilege we should not have
        if server_id == own:
            ids = set()
        else:
            return [Finding(WARN, "server_id", f"cannot list the server's replicas ({exc.args[-1]}); make sure "
                                               f"no other replica uses server_id {server_id}")]
    if server_id == own or server_id in ids:
        return [Finding(FAIL, "server_id", f"{server_id} is already used by "
                                           f"{'the server itself' if server_id == own else 'another replica'}: "
                                           "choose another source.server_id")]
    return [Finding(OK, "server_id", f"{server_id} is free")]


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
