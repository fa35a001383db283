"""Failover across ``source.hosts``: may the daemon continue on this server from its checkpoint's GTIDs?

A server may take over only if its binlog holds the same history as the one the checkpoint was read
from: every GTID already published (a server that lacks one never got that transaction, and what it
writes next would reuse its sequence number) and no other transaction at the same domain and sequence
number. MariaDB's ``@@gtid_binlog_pos`` (the last GTID per domain in the server's binlog) decides the
cases it can; for a server that is further along, its own dump check does (the daemon asks for strict
GTID mode), and its error 1236 is reported with both servers named.
"""

from __future__ import annotations

from typing import Any

from ..records.gtid import MariadbGtidState
from ..sources.errors import ReplicationError


class DivergedHistory(ReplicationError):
    """The candidate server's GTID history differs from what was published: no retry helps."""

    fatal = True


def check_history(cur: Any, published: str, previous: str, candidate: str) -> None:
    """Raise DivergedHistory when the MariaDB server behind ``cur`` cannot continue after ``published``
    (the checkpoint's GTID state, read from ``previous``)."""
    cur.execute("SELECT @@global.gtid_binlog_pos")
    binlog = MariadbGtidState.parse(cur.fetchone()[0] or "")
    for domain, (server, seq) in sorted(MariadbGtidState.parse(published).domains.items()):
        gtid = f"{domain}-{server}-{seq}"
        has = binlog.domains.get(domain)
        if has is None or has[1] < seq:
            ends = f"ends at {domain}-{has[0]}-{has[1]}" if has else f"has nothing of domain {domain}"
            raise DivergedHistory(f"{candidate} cannot take over from {previous}: its binlog lacks GTID {gtid}, "
                                  f"already published (it {ends}); refusing to fail over")
        if has[1] == seq and has[0] != server:
            raise DivergedHistory(f"{candidate} cannot take over from {previous}: its binlog has "
                                  f"{domain}-{has[0]}-{seq} where {gtid} was published (the histories diverge); "
                                  "refusing to fail over")


def diverged(exc: ReplicationError, previous: str, candidate: str) -> DivergedHistory:
    """The server's own refusal of our GTID state (error 1236 in strict mode), naming both servers."""
    return DivergedHistory(f"{candidate} cannot take over from {previous}: {exc}; refusing to fail over")


def file_offset(cur: Any, committed: dict[str, Any]) -> int:
    """What to add to this server's binlog file numbers so that its sequences sort after the checkpoint's
    (file numbers differ between servers; consumers order changes by sequence)."""
    cur.execute("SHOW BINARY LOGS")
    oldest = min(int(row[0].rsplit(".", 1)[-1]) for row in cur.fetchall())
    last = int(str(committed.get("seq", "0")).split(":")[0])
    return max(0, last - oldest + 1)
