"""XA transactions: a prepared transaction's records held back until its outcome (docs/FORMAT.md, "XA transactions").

The server writes a prepared XA transaction's changes at its XA PREPARE, and its outcome later, as a transaction
of its own: MySQL logs (GTID) ``XA START X'..',X'..',n``, table maps and rows events, ``XA END ...`` and an
XA_PREPARE event (one_phase 0); MariaDB (10.5+) a GTID event flagged FL_PREPARED_XA that names the xid (no XA START
statement), the body, ``XA END ...`` and the XA_PREPARE event. The outcome is a GTID transaction of one statement,
``XA COMMIT X'..',X'..',n`` or ``XA ROLLBACK ...`` (MariaDB's GTID flagged FL_COMPLETED_XA), any time later,
interleaved with other transactions and other XA transactions. ``XA COMMIT ... ONE PHASE`` is a whole transaction:
MySQL logs the body with an XA_PREPARE whose one_phase is 1, MariaDB an ordinary transaction (GTID, body, XID).

txn.py stays the machine of binlog transaction boundaries: an XA_PREPARE ends the binlog transaction (a checkpoint
may follow it). This module is the machine of XA transactions, keyed by xid, which the record builder
(builder.py) drives at a few points:

  states of an xid:  (none) --body begins--> CAPTURING
                     CAPTURING --XA_PREPARE, one_phase--> released at once, as the plain commit it is
                     CAPTURING --XA_PREPARE--> PREPARED (``pending``)
                     CAPTURING --XA COMMIT / XA ROLLBACK (no prepare)--> released / dropped
                     PREPARED --XA COMMIT--> released, re-sequenced at the commit
                     PREPARED --XA ROLLBACK--> dropped
                     (none) --XA COMMIT--> a warning: prepared before the daemon's start, its changes never seen
                     (none) --XA ROLLBACK--> nothing was published: logged

While a body streams (CAPTURING) every event the builder would add to its open records goes to the capture, records
of their own (the native router is not used meanwhile: ``RecordBuilder.route`` declines). At XA PREPARE they become
the prepared transaction's records, held in memory (``memory_bytes`` in all; beyond that those already in Kafka are
dropped from memory) and, at the next Kafka commit whose checkpoint passes the prepare, published to the topic
``_prepared`` (``persist``; unless resolved by then) with headers saying whose they are; the checkpoint's
``"prepared"`` lists the unresolved ones (``checkpoint``, ``resume``). At XA COMMIT the records are released: the
open records are closed first (a topic's records stay in sequence order), then the prepared ones follow,
**re-sequenced at the commit**: the k-th event (in binlog order, k = 1, 2, ...) gets the sequence (file number of
the XA COMMIT, its position, its sub-index + k), the commit's time and GTID; the values (the server's bytes) stay.
They then sort after everything before the commit and before everything after it, as the server applied them.
Records not in memory (after a restart, or dropped from memory) are read back through ``load`` (the daemon reads
``_prepared``). Sans-I/O: no Kafka here.
"""

from __future__ import annotations

import logging
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .format import Sequence, read_index
from .open_records import OpenRecords, Record

log = logging.getLogger("binlake.xa")

PREPARED_TOPIC = "_prepared"  # the records of prepared, unresolved XA transactions (one partition, kept forever)
# headers a record in _prepared has besides its own: the xid, the prepare's sequence (which prepare of the xid) and
# the topic the record is released to
XID_HEADER, PREPARE_HEADER, TOPIC_HEADER = "binlake.xid", "binlake.prepare", "binlake.topic"
_OWN_HEADERS = (XID_HEADER, PREPARE_HEADER, TOPIC_HEADER, "binlake.chunk")
_INDEX_ENTRY = struct.Struct(">16sQBB")

# an XA statement's xid: gtrid [, bqual [, formatID]]; each string X'hex', 0xhex or a quoted string
_STRING = rb"""(?:[xX]'[0-9a-fA-F]*'|0x[0-9a-fA-F]+|'(?:[^'\\]|''|\\.)*'|"(?:[^"\\]|""|\\.)*")"""
_XID = re.compile(rb"\s*(" + _STRING + rb")(?:\s*,\s*(" + _STRING + rb")(?:\s*,\s*(0x[0-9a-fA-F]+|\d+))?)?", re.S)
_STATEMENT = re.compile(rb"^\s*XA\s+(START|BEGIN|END|PREPARE|COMMIT|ROLLBACK)\b", re.I)
_ONE_PHASE = re.compile(rb"\bONE\s+PHASE\s*$", re.I)


def xid_text(format_id: int, gtrid: bytes, bqual: bytes) -> str:
    """An xid as the servers log it (``X'<gtrid>',X'<bqual>',<formatID>``, hex in lower case): the key of an XA
    transaction here, in checkpoints and in ``_prepared``."""
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}"


def _string(literal: bytes) -> bytes:
    if literal[:1] in (b"x", b"X"):
        return bytes.fromhex(literal[2:-1].decode())
    if literal[:2] == b"0x":
        hexa = literal[2:].decode()
        return bytes.fromhex(hexa if len(hexa) % 2 == 0 else "0" + hexa)
    quote = literal[:1]
    body = literal[1:-1].replace(quote + quote, quote)
    return re.sub(rb"\\(.)", lambda m: {b"0": b"\0", b"n": b"\n", b"r": b"\r", b"t": b"\t"}.get(m[1], m[1]), body)


def statement_xid(text: bytes) -> tuple[str, str, bool] | None:
    """An XA statement's verb (START, END, PREPARE, COMMIT, ROLLBACK; BEGIN as START), its xid (``xid_text``) and
    whether it says ONE PHASE; None for another statement or an xid that does not parse."""
    verb = _STATEMENT.match(text)
    if verb is None:
        return None
    found = _XID.match(text, verb.end())
    if found is None:
        return None
    gtrid, bqual, fmt = found.groups()
    format_id = 1 if fmt is None else int(fmt, 16) if fmt.startswith(b"0x") else int(fmt)
    word = verb[1].upper().decode()
    return ("START" if word == "BEGIN" else word), xid_text(format_id, _string(gtrid), _string(bqual or b"''")), \
        bool(_ONE_PHASE.search(text))


@dataclass
class Prepared:
    """A prepared XA transaction not yet resolved (as far as the events fed so far say)."""

    xid: str
    seq: Sequence  # the XA_PREPARE event's: which prepare of the xid (an xid may be used again after its outcome)
    gtid: str  # the prepared transaction's GTID ("" without GTIDs)
    commit_ts: int  # its time, µs (the prepare's)
    records: list[Record] | None  # in memory; None: only in _prepared (read back through ``load``)
    count: int  # its records
    size: int  # their bytes
    tables: list[str]  # the topics of its records ("db.table"), for messages and `binlake status`
    persisted: bool = False  # published to _prepared (in a Kafka transaction committed or under way)
    offset: int | None = None  # where its records begin in _prepared, at the earliest (given by the publisher)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"seq": str(self.seq), "gtid": self.gtid, "ts": self.commit_ts, "records": self.count,
                             "bytes": self.size, "tables": self.tables}
        if self.offset is not None:
            d["offset"] = self.offset
        return d

    @classmethod
    def from_json(cls, xid: str, d: dict[str, Any]) -> Prepared:
        file, position, sub = (int(x) for x in d["seq"].split(":"))
        return cls(xid, Sequence(file, position, sub), d.get("gtid", ""), d.get("ts", 0), None, d["records"],
                   d.get("bytes", 0), list(d.get("tables", ())), True, d.get("offset"))


class Capture(OpenRecords):
    """The open records of an XA transaction's body: records it closes are kept, not returned."""

    __slots__ = ("closed", "xid")

    def __init__(self, xid: str, main: OpenRecords) -> None:
        super().__init__(main.max_record_bytes, main.max_open_bytes)
        self.xid = xid
        self.fde, self.file_number, self.names = main.fde, main.file_number, main.names
        self.closed: list[Record] = []

    def add(self, topic: str, raw: bytes, position: int, sub: int, table_map: bytes | None, in_payload: bool,
            commit_ts: int, gtid: bytes, schema: bytes = b"") -> tuple[()]:
        self.closed += super().add(topic, raw, position, sub, table_map, in_payload, commit_ts, gtid, schema)
        return ()

    def take(self) -> list[Record]:
        records, self.closed = [*self.closed, *self.flush()], []
        for r in records:
            r.complete = False
        return records


Loader = Callable[[list[Prepared]], dict[str, list[Record]]]


def _no_loader(entries: list[Prepared]) -> dict[str, list[Record]]:
    raise RuntimeError(f"the records of prepared XA transaction {entries[0].xid} are not in memory and nothing "
                       "reads them back")


@dataclass
class XaTransactions:
    """The XA transactions of the stream: the body being captured and the prepared ones not yet resolved."""

    records: OpenRecords  # the builder's open records (their format description, file number and table names)
    memory_bytes: int = 64 << 20  # prepared records kept in memory; beyond, those already in _prepared are dropped
    # reads prepared transactions' records back from _prepared (their xid -> records), given the daemon's Kafka
    load: Loader = _no_loader
    capture: Capture | None = None  # the XA transaction whose body is streaming
    pending: dict[str, Prepared] = field(default_factory=dict)  # by xid, in the order of their prepares

    # -- the stream (builder.py)

    def start(self, xid: str) -> None:
        """An XA transaction's body begins (MySQL's XA START; MariaDB's GTID flagged FL_PREPARED_XA)."""
        if self.capture is not None:  # a body without its end: the server restarted mid-transaction (not resumed)
            log.warning("XA transaction %s began before %s's body ended: the unfinished one is dropped", xid,
                        self.capture.xid)
        self.capture = Capture(xid, self.records)

    def prepare(self, xid: str, one_phase: bool, seq: Sequence, gtid: bytes, commit_ts: int) -> list[Record]:
        """The XA_PREPARE event at ``seq``: the records released now (one phase: the body's, as they were), else
        none (the transaction is pending)."""
        capture, self.capture = self.capture, None
        records = capture.take() if capture is not None else []
        if one_phase:
            return self._release(records)
        if capture is not None and capture.xid != xid:
            log.warning("XA PREPARE %s at %s ends the body of XA transaction %s: taken as %s's", xid, seq,
                        capture.xid, xid)
        if xid in self.pending:
            log.warning("XA PREPARE %s at %s: %s is already prepared (at %s); the earlier prepare is dropped", xid, seq,
                        xid, self.pending[xid].seq)
        tables = list(dict.fromkeys(r.topic for r in records))
        self.pending[xid] = Prepared(xid, seq, gtid.decode(), commit_ts, records, len(records),
                                     sum(len(r.value) for r in records), tables)
        return []

    def outcome(self, verb: str, xid: str, one_phase: bool, seq: Sequence, gtid: bytes, commit_ts: int,
                where: str) -> list[Record]:
        """``XA COMMIT`` or ``XA ROLLBACK`` of ``xid`` at ``seq`` (``where``: its binlog file and position, for
        messages): the records released (committed), re-sequenced at ``seq``."""
        capture = self.capture
        if capture is not None and capture.xid == xid:  # the body's own end, without a prepare
            self.capture = None
            return self._release(capture.take()) if verb == "COMMIT" else []
        prepared = self.pending.pop(xid, None)
        if prepared is None:
            if verb == "COMMIT" and not one_phase:
                log.warning("XA COMMIT %s at %s: its XA PREPARE is before where this daemon started streaming (e.g. "
                            "before its snapshot's point), so its changes were never read and are not published: "
                            "re-read the tables it changed (binlake snapshot --tables db.table,...)", xid, where)
            elif verb == "ROLLBACK":
                log.info("XA ROLLBACK %s at %s: prepared before where this daemon started streaming; nothing of it "
                         "was published", xid, where)
            return []
        if verb != "COMMIT":
            return []
        records = prepared.records if prepared.records is not None or not prepared.count else self._load(prepared)
        return self._release(resequenced(records or (), seq, gtid, commit_ts))

    # -- the daemon's commits

    def persist(self) -> list[tuple[Prepared, list[Record]]]:
        """At a Kafka commit: the prepared transactions not yet in _prepared, with their records as published there
        (the daemon sends them in the Kafka transaction of this checkpoint, then gives ``Prepared.offset``). Those
        already there are dropped from memory as ``memory_bytes`` needs."""
        if not self.pending:  # (every commit asks)
            return []
        out = []
        for prepared in self.pending.values():
            if not prepared.persisted:
                prepared.persisted = True
                assert prepared.records is not None  # in memory until persisted
                if prepared.records:  # (none: it changed no captured table)
                    out.append((prepared, [for_prepared_topic(r, prepared) for r in prepared.records]))
        held = sum(p.size for p in self.pending.values() if p.records is not None)
        for prepared in self.pending.values():  # the oldest first
            if held <= self.memory_bytes:
                break
            if prepared.records is not None:
                held -= prepared.size
                prepared.records = None
        return out

    def checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint's ``"prepared"`` (None: none pending)."""
        if not self.pending:
            return None
        return {xid: p.to_json() for xid, p in self.pending.items()}

    def resume(self, prepared: dict[str, Any] | None) -> None:
        """From a checkpoint's ``"prepared"``: their records are in _prepared."""
        self.pending = {xid: Prepared.from_json(xid, d) for xid, d in (prepared or {}).items()}

    # --

    def _load(self, prepared: Prepared) -> list[Record]:
        """A prepared transaction's records read back from _prepared, with the others' not in memory (one read)."""
        wanted = [prepared, *(p for p in self.pending.values() if p.records is None and p.count)]
        found = self.load(wanted)
        for p in wanted[1:]:
            if p.xid in found:
                p.records = found[p.xid]
        if prepared.xid not in found:
            raise RuntimeError(f"the records of prepared XA transaction {prepared.xid} were not read back")
        return found[prepared.xid]

    def _release(self, records: list[Record]) -> list[Record]:
        """The builder's open records closed (before these, in sequence order), then ``records``."""
        if not records:
            return []
        records[-1].complete = True
        return [*self.records.flush(), *records]


def resequenced(records: Iterable[Record], at: Sequence, gtid: bytes, commit_ts: int) -> list[Record]:
    """The records with every event sequenced at ``at`` (its file number and position; sub-index ``at.sub`` + k for
    the k-th event in binlog order, k = 1, 2, ...), with the commit time ``commit_ts`` and GTID ``gtid``: new
    headers, the same values."""
    records = list(records)
    entries = [(e.seq, i, j, e.type_code) for i, r in enumerate(records)
               for j, e in enumerate(read_index(dict(r.headers)["binlake.index"]))]
    entries.sort()
    subs: dict[tuple[int, int], int] = {(i, j): at.sub + k for k, (_, i, j, _) in enumerate(entries, start=1)}
    out = []
    for i, r in enumerate(records):
        codes = [e.type_code for e in read_index(dict(r.headers)["binlake.index"])]
        seqs = [Sequence(at.file_number, at.position, subs[i, j]).encode() for j in range(len(codes))]
        index = b"".join(_INDEX_ENTRY.pack(s, commit_ts, code, len(gtid)) + gtid for s, code in zip(seqs, codes,
                                                                                                      strict=True))
        new = {"binlake.seq": seqs[0], "binlake.commit_ts": str(commit_ts).encode(), "binlake.index": index}
        out.append(Record(r.topic, r.key, r.value, [(k, new.get(k, v)) for k, v in r.headers], Sequence.decode(seqs[0]),
                          r.complete))
    return out


def for_prepared_topic(record: Record, prepared: Prepared) -> Record:
    """A prepared transaction's record as published to _prepared: its headers and the xid's, the prepare's sequence
    and its own topic's."""
    headers = [*record.headers, (XID_HEADER, prepared.xid.encode()), (PREPARE_HEADER, str(prepared.seq).encode()),
               (TOPIC_HEADER, record.topic.encode("utf-8", "surrogateescape"))]
    return Record(PREPARED_TOPIC, prepared.xid.encode(), record.value, headers, record.seq)


def from_prepared_topic(headers: list[tuple[str, bytes]], value: bytes) -> tuple[str, str, Record]:
    """A (reassembled) record read from _prepared: its xid, the prepare's sequence (text) and the record itself."""
    named = dict(headers)
    topic = named[TOPIC_HEADER].decode("utf-8", "surrogateescape")
    own = [(k, v) for k, v in headers if k not in _OWN_HEADERS]
    return (named[XID_HEADER].decode(), named[PREPARE_HEADER].decode(),
            Record(topic, topic.encode("utf-8", "surrogateescape"), value, own, Sequence.decode(named["binlake.seq"])))
