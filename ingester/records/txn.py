"""The binlog transaction the record builder is in: one state machine, applied by Python and by C.

A checkpoint is only safe between transactions, so the builder (builder.py) and its native router
(_router.c) follow the stream's transactions with the phases and transitions written down here. Both
apply the same table (``TABLE``); the side effects of each input (the transaction's GTID, its commit
time, the executed-GTID set) are the methods of ``Transaction``, which _router.c mirrors field by field.

Phases:
  IDLE      between transactions: the stream can resume right after the event.
  IMPLICIT  a transaction without a body: after a GTID (MySQL's; MariaDB's with FL_STANDALONE) or rows
            events without BEGIN. Its next statement (DDL) is the whole transaction; an XID ends it too.
  EXPLICIT  a transaction with a body: after BEGIN, XA START or a MariaDB GTID without FL_STANDALONE.
            Statements belong to it until XID, COMMIT, ROLLBACK, XA COMMIT/ROLLBACK or XA_PREPARE.

XA transactions (xa.py) are binlog transactions like the others here: a prepared one's body (MySQL: GTID, XA START,
rows, XA END; MariaDB: a GTID flagged FL_PREPARED_XA, rows, XA END) is EXPLICIT and its XA_PREPARE event ends it, so
a checkpoint may follow the prepare; its XA COMMIT or XA ROLLBACK, later, is a transaction of its own (a GTID and
the statement). Whether its rows are published, and when, is xa.py's machine, not this one: the records builder
holds them back from the prepare to the outcome.

Inputs and transitions (``TRANSITIONS``; "ends" counts the transaction and adds its GTID to the set):
  GTID       any phase -> IMPLICIT
  BEGIN      any phase -> EXPLICIT
  ROWS       IDLE -> IMPLICIT; IMPLICIT and EXPLICIT unchanged
  STATEMENT  IDLE -> IDLE, ends (a statement is a transaction of its own); IMPLICIT -> IDLE, ends;
             EXPLICIT unchanged
  END        any phase -> IDLE, ends
"""

from __future__ import annotations

from enum import IntEnum

from .gtid import MariadbGtidState, MysqlGtidSet


class Phase(IntEnum):
    IDLE = 0
    IMPLICIT = 1
    EXPLICIT = 2


class Input(IntEnum):
    GTID = 0
    BEGIN = 1
    ROWS = 2
    STATEMENT = 3
    END = 4


TRANSITIONS: dict[tuple[Phase, Input], tuple[Phase, bool]] = {
    (Phase.IDLE, Input.GTID): (Phase.IMPLICIT, False),
    (Phase.IMPLICIT, Input.GTID): (Phase.IMPLICIT, False),
    (Phase.EXPLICIT, Input.GTID): (Phase.IMPLICIT, False),
    (Phase.IDLE, Input.BEGIN): (Phase.EXPLICIT, False),
    (Phase.IMPLICIT, Input.BEGIN): (Phase.EXPLICIT, False),
    (Phase.EXPLICIT, Input.BEGIN): (Phase.EXPLICIT, False),
    (Phase.IDLE, Input.ROWS): (Phase.IMPLICIT, False),
    (Phase.IMPLICIT, Input.ROWS): (Phase.IMPLICIT, False),
    (Phase.EXPLICIT, Input.ROWS): (Phase.EXPLICIT, False),
    (Phase.IDLE, Input.STATEMENT): (Phase.IDLE, True),
    (Phase.IMPLICIT, Input.STATEMENT): (Phase.IDLE, True),
    (Phase.EXPLICIT, Input.STATEMENT): (Phase.EXPLICIT, False),
    (Phase.IDLE, Input.END): (Phase.IDLE, True),
    (Phase.IMPLICIT, Input.END): (Phase.IDLE, True),
    (Phase.EXPLICIT, Input.END): (Phase.IDLE, True),
}

ENDS = 0x80  # in TABLE: the transition ends the transaction
# TABLE[phase * len(Input) + input] = next phase | ENDS if it ends the transaction: what _router.c applies.
TABLE = bytes(TRANSITIONS[phase, what][0] | (ENDS if TRANSITIONS[phase, what][1] else 0)
              for phase in Phase for what in Input)
_STEPS = [(TRANSITIONS[phase, what][0], TRANSITIONS[phase, what][1]) for phase in Phase for what in Input]
_INPUTS = len(Input)

# What a transaction adds to the executed set when it ends: ("mysql", sid, gno) or
# ("mariadb", domain, server_id, sequence).
PendingGtid = tuple[str, str, int] | tuple[str, int, int, int]


class Transaction:
    """The transaction in progress and the GTIDs executed before it (_router.c reads and writes these slots)."""

    __slots__ = ("commit_ts", "count", "gtid", "mariadb_gtids", "mysql_gtids", "pending", "phase")

    def __init__(self) -> None:
        self.phase = Phase.IDLE
        self.gtid = b""  # the transaction's GTID as text (index entries carry it), b"" without one
        self.pending: PendingGtid | None = None
        self.commit_ts = 0  # microseconds: the original commit time where the server logs one
        self.count = 0  # transactions ended
        self.mysql_gtids = MysqlGtidSet()
        self.mariadb_gtids = MariadbGtidState()

    @property
    def executed(self) -> str:
        """The executed-GTID set after every transaction ended so far."""
        return str(self.mariadb_gtids) if self.mariadb_gtids.domains else str(self.mysql_gtids)

    def resume_after(self, gtid_set: str) -> None:
        """Start from a checkpoint's executed set (MariaDB's domain-server-seq list or MySQL's)."""
        if gtid_set and "-" in gtid_set and ":" not in gtid_set:
            self.mariadb_gtids = MariadbGtidState.parse(gtid_set)
        else:
            self.mysql_gtids = MysqlGtidSet.parse(gtid_set)

    def step(self, what: Input) -> None:
        following, ends = _STEPS[self.phase * _INPUTS + what]
        if ends:
            self._end()
        self.phase = following

    def mysql_gtid(self, sid: str | None, gno: int, text: bytes, commit_ts: int) -> None:
        """A MySQL GTID event (``sid`` None: an anonymous one, which names no GTID)."""
        self.step(Input.GTID)
        if sid is not None:
            self.gtid, self.pending = text, ("mysql", sid, gno)
        self.commit_ts = commit_ts

    def mariadb_gtid(self, domain: int, server_id: int, sequence: int, standalone: bool, timestamp: int) -> None:
        self.step(Input.GTID)
        self.gtid = f"{domain}-{server_id}-{sequence}".encode()
        self.pending = ("mariadb", domain, server_id, sequence)
        self.commit_ts = timestamp * 1_000_000
        if not standalone:  # FL_STANDALONE: one statement, no COMMIT follows; else a body and its end
            self.step(Input.BEGIN)

    def begin(self, timestamp: int) -> None:
        """BEGIN or XA START."""
        self.step(Input.BEGIN)
        if not self.gtid:
            self.commit_ts = timestamp * 1_000_000

    def statement_time(self, timestamp: int) -> None:
        """A statement is coming (before its records, which carry the commit time; then ``step(STATEMENT)``)."""
        if not self.gtid and self.phase is Phase.IDLE:
            self.commit_ts = timestamp * 1_000_000

    def _end(self) -> None:
        self.count += 1
        pending = self.pending
        if pending is not None:
            if len(pending) == 3:
                self.mysql_gtids.add(pending[1], pending[2])
            else:
                self.mariadb_gtids.add(pending[1], pending[2], pending[3])
        self.pending = None
        self.gtid = b""
