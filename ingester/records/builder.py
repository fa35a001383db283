"""From binlog events to Kafka records and checkpoints (sans-I/O: no Kafka, no sockets).

The builder follows transactions: rows events go into an open record of their table's topic, DDL and
other statements into one of the schema topic, and at every transaction boundary it emits a
checkpoint (file, next position, executed GTIDs) that is safe to resume from. Open records are
closed when they reach their size limit or when the daemon commits (``flush``): a Kafka transaction
then holds whole binlog transactions, their records and the checkpoint. Rows events are routed by
their table id without decoding their row images: the consumer decodes them. An XA transaction's events are
held back from its body to its outcome and published at its XA COMMIT (xa.py).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ..codec import BinlogDecoder, BinlogError
from ..codec import events as E
from ..codec import header as H
from ..codec.constants import HEADER_V3
from ..codec.decoder import CHECKSUM_CRC32, ROUTABLE_ROWS
from ..codec.table_map import TableMap
from ..column_rules import ColumnRules
from ..extensions import load as load_extension
from ..schema.history import HISTORY_TOPIC, SchemaHistory, enrich, history_key
from .format import RecordWriter, Sequence, file_number
from .mask import Masked, Rewriter
from .open_records import OpenRecords, Record
from .outbound import BinlogNames
from .table_statements import ROW_ACTIONS, Plan, plan, statement_fields
from .txn import TABLE, Input, Phase, Transaction
from .xa import XaTransactions, statement_xid, xid_text

SCHEMA_TOPIC = "_schema"
_QUERY, _XID, _TABLE_MAP, _MARIADB_GTID = 2, 16, 19, 162
_FAST = ROUTABLE_ROWS | {_XID, _TABLE_MAP, _MARIADB_GTID}
_MARIADB_GTID_BODY = struct.Struct("<QIB").unpack_from  # sequence, domain, flags
_TRANSACTION_CONTROL = re.compile(rb"^\s*(BEGIN|COMMIT|ROLLBACK|XA\s+(START|END|PREPARE|COMMIT|ROLLBACK))\b", re.I)
# Account and server-credential statements: MariaDB binlogs them as written, passwords in plain text.
# They change no table, so they are not published (the transaction still commits its checkpoint).
_CREDENTIALS = re.compile(rb"^(\s|/\*.*?\*/)*(GRANT|REVOKE|SET\s+PASSWORD|(CREATE|ALTER|DROP|RENAME)(\s+OR\s+REPLACE)?"
                          rb"\s+(USER|ROLE|SERVER))\b", re.I | re.S)

@dataclass
class Checkpoint:
    """A transaction boundary: resume at (file, position) with the executed GTIDs."""

    file: str
    position: int
    gtid_set: str
    seq: Sequence
    snapshot: dict[str, Any] | None = None  # progress of an unfinished snapshot (daemon/snapshot.py)
    prepared: dict[str, Any] | None = None  # XA transactions prepared and not resolved (records/xa.py)
    resnapshot: dict[str, Any] | None = None  # progress of an on-demand re-snapshot (daemon/resnapshot.py)
    source: str = ""  # host:port the position belongs to (failover across source.hosts)
    file_offset: int = 0  # added to the source's binlog file numbers in sequences (daemon/failover.py)


# What a table id maps to: its TABLE_MAP bytes, topic (None when filtered out) and the schema history's
# entry for the map (b"" with FULL row metadata). A plain tuple: the native router (_router.c) reads and
# writes these too, and leaves routes with a schema entry to Python.
_Route = tuple[bytes, str | None, bytes | Masked]


# A table map's body once decoded: its table id, topic and attachment (the route's, for every later map).
_Known = tuple[int, str | None, bytes | Masked]

_native = load_extension("ingester.records._router")


class Routed(NamedTuple):
    """What ``RecordBuilder.route`` consumed (_router.c's RouteResult has these fields, in this order)."""

    pos: int  # in the buffer, after the packets routed
    next_seq: int  # the packet sequence id expected next
    events: int
    bytes: int
    next_position: int  # the last nonzero log position routed, 0 if none
    timestamp: int  # of the last event routed
    stopped: bool  # at a transaction's end, as asked
    boundary_log_pos: int  # the last transaction boundary passed (0 if none): resume at this log position
    boundary_position: int  # ... and that event's position


if _native is not None:
    _native.configure(Transaction, OpenRecords, RecordWriter, Routed, TABLE, tuple(Phase))


@dataclass
class RecordBuilder:
    """Feed every event of the stream in order; collect records and checkpoints."""

    accept: Callable[[str, str], bool] = lambda db, table: True
    file: str = ""
    max_record_bytes: int = 900_000
    max_open_bytes: int = 16 << 20  # all open records together: flushed beyond this (bounded memory)
    schema: SchemaHistory | None = None  # follows DDL (TABLE_MAPs without column names, table statements' columns)
    # whether TABLE_MAPs with column names of their own carry the history's entry too where it has column defaults
    # (schema.history: always; with auto only maps without names carry one)
    named_entries: bool = True
    # asked of each table whose rows partition maintenance removed or moved (ROW_ACTIONS): True where the daemon
    # reads the table again (a re-snapshot queued with this statement's checkpoint): a reload entry follows then
    reload: Callable[[str, str], bool] | None = None
    masks: ColumnRules | None = None  # filters.columns: rows events of their tables are rewritten (mask.py)
    file_offset: int = 0  # added to binlog file numbers: sequences keep growing after a failover
    txn: Transaction = field(default_factory=Transaction)  # the transaction in progress (txn.py)
    names: BinlogNames | None = None  # told every binlog file's name (source coordinates of output formats)
    together: bool = False  # close all open records when one is full (OpenRecords.together)
    # told each table map of a captured table as it is first decoded (its topic, the map, the schema history's entry
    # the records carry with it): the daemon asks for the topic and has the format make ready what its records need
    mapped: Callable[[str, TableMap, bytes], None] | None = None
    _routes: dict[int, _Route] = field(default_factory=dict)
    _table_maps: dict[bytes, _Known] = field(default_factory=dict)  # body -> id, topic, schema
    _begins: set[bytes] = field(default_factory=set)  # bodies of QUERY events decoded as BEGIN (for _router)
    _resume: tuple[str, int, int] | None = None  # the last transaction boundary: file, next position, event
    _records: OpenRecords = field(init=False)
    xa: XaTransactions = field(init=False)  # XA transactions: bodies captured, prepared ones held back (xa.py)
    _routable: tuple[dict[int, int] | None, bytes] = (None, b"")  # post-header lengths -> _router's flags
    _mariadb: bool = False  # the server's flavour (its format description's version)

    def __post_init__(self) -> None:
        self._records = OpenRecords(self.max_record_bytes, self.max_open_bytes, self.together)
        self.xa = XaTransactions(self._records, self.max_open_bytes * 4)

    @property
    def in_transaction(self) -> bool:
        return self.txn.phase is not Phase.IDLE

    @property
    def transactions(self) -> int:
        """Binlog transactions ended so far."""
        return self.txn.count

    @property
    def gtid_set(self) -> str:
        return self.txn.executed

    def feed(self, dec: BinlogDecoder, raw: bytes, position: int) -> list[Record] | tuple[()]:
        """Records closed by one outer event of the stream (usually none: records fill up over many)."""
        code = raw[H.TYPE]
        if dec.plain_v4 and code in _FAST:  # the events of every transaction, routed without decoding
            if code != _TABLE_MAP and code != _XID and code != _MARIADB_GTID:
                table_id = dec.rows_table_id(raw, position)
                if table_id is not None:
                    self.txn.step(Input.ROWS)
                    return self._rows(dec, raw, position, 0, table_id, False)
            elif code == _TABLE_MAP:
                end = dec.verify(raw, position)
                body = raw[HEADER_V3:end]
                known = self._table_maps.get(body)
                if known is None:  # decode it once; later maps of the same table are recognised by their bytes
                    ev = dec.decode(raw, position)
                    assert type(ev) is E.TableMapEvent
                    self._event(raw, ev, 0)
                    if len(self._table_maps) >= 4096:
                        self._table_maps.clear()
                    route = self._routes[ev.table_map.table_id]
                    known = self._table_maps[body] = (ev.table_map.table_id, route[1], route[2])
                self._routes[known[0]] = (raw, known[1], known[2])
                self._boundary(raw, position)
                return ()
            elif code == _XID:
                if dec.verify(raw, position) == HEADER_V3 + 8:
                    self.txn.step(Input.END)
                    self._boundary(raw, position)
                    return ()
            elif dec.verify(raw, position) == HEADER_V3 + 19:  # MariaDB GTID with its usual padding
                seq, domain, flags = _MARIADB_GTID_BODY(raw, HEADER_V3)
                if not flags & (2 | 64 | 128):  # no commit id, not XA: nothing more to read
                    self.txn.mariadb_gtid(domain, H.server_id(raw), seq, bool(flags & 1), H.timestamp(raw))
                    return ()
        records: list[Record] = []
        ev = dec.decode(raw, position)
        if type(ev) is E.TransactionPayloadEvent:
            for sub, inner_raw in enumerate(dec.payload_raw_events(ev), start=1):
                inner_id = dec.rows_table_id(inner_raw, position, in_payload=True)
                if inner_id is not None:
                    self.txn.step(Input.ROWS)
                    records += self._rows(dec, inner_raw, position, sub, inner_id, True)
                else:
                    records += self._event(inner_raw, dec.decode(inner_raw, position, in_payload=True), sub)
        else:
            records += self._event(raw, ev, 0)
            if code == _QUERY and type(ev) is E.QueryEvent and dec.plain_v4:
                self._remember_begin(dec, raw, position, ev)
        if type(ev) is not E.RotateEvent and type(ev) is not E.HeartbeatEvent:
            self._boundary(raw, position)
        return records

    @property
    def routes_natively(self) -> bool:
        """Whether ``route`` can take events (the native core is built and not switched off)."""
        return _native is not None

    def route(self, dec: BinlogDecoder, buf: bytes, pos: int, next_seq: int,
              stop_at_commit: bool) -> Routed | None:
        """Feed the events of the replication packets in ``buf[pos:]`` natively, exactly as ``feed`` would,
        until one that ``feed`` must handle (or, with ``stop_at_commit``, a transaction's end): the packets
        consumed, or None without the native core. Records never close here: the event that closes one is
        left to ``feed``."""
        if _native is None or not dec.plain_v4 or self.xa.capture is not None:  # an XA body: Python captures it
            return None
        posts, routable = self._routable
        if posts is not dec.post_header_lengths:
            posts = dec.post_header_lengths
            routable = bytes(code in ROUTABLE_ROWS and posts.get(code, 0) >= 8 for code in range(256))
            self._routable = (posts, routable)
        routed = _native.route(buf, pos, next_seq, self.txn, self._records, self._routes, self._table_maps,
                               self._begins, dec.checksum == CHECKSUM_CRC32, dec.verify_checksums, routable,
                               stop_at_commit)
        if routed.boundary_log_pos:
            self._resume = (self.file, routed.boundary_log_pos, routed.boundary_position)
        return routed

    def _remember_begin(self, dec: BinlogDecoder, raw: bytes, position: int, ev: E.QueryEvent) -> None:
        """A BEGIN statement: the native router recognises the same bytes again (MySQL sends the same BEGIN
        for every transaction of a session), as the same statement."""
        control = _TRANSACTION_CONTROL.match(ev.query.encode("utf-8", "surrogateescape"))
        if control and control.group(1).upper() == b"BEGIN":
            if len(self._begins) >= 4096:
                self._begins.clear()
            self._begins.add(bytes(raw[HEADER_V3 : dec.verify(raw, position)]))

    def _boundary(self, raw: bytes, position: int) -> None:
        """After an event outside any transaction, the stream can resume right after it."""
        if self.txn.phase is Phase.IDLE:
            log_pos = H.log_pos(raw)
            if log_pos:
                self._resume = (self.file, log_pos, position)

    def checkpoint(self) -> Checkpoint | None:
        """Where to resume after everything fed so far, if that is a new transaction boundary (taken
        once: the next call returns None until another boundary passes). Call between transactions."""
        resume = self._resume
        if resume is None or self.txn.phase is not Phase.IDLE:
            return None
        self._resume = None
        return Checkpoint(resume[0], resume[1], self.txn.executed, Sequence(self._records.file_number, resume[2], 0),
                          file_offset=self.file_offset)

    def flush(self) -> list[Record]:
        """Close every open record (before a commit): they are all the events fed so far."""
        return self._records.flush()

    def _rows(self, dec: BinlogDecoder, raw: bytes, position: int, sub: int, table_id: int,
              in_payload: bool) -> list[Record] | tuple[()]:
        route = self._routes.get(table_id)
        if route is None:
            raise BinlogError(f"rows event for table id {table_id} without a preceding TABLE_MAP event", position,
                              dec.source)
        if route[1] is None:
            return ()
        attached = route[2]
        if isinstance(attached, Masked):
            raw = attached.rewriter.rewrite(raw, dec.post_header_lengths.get(raw[H.TYPE], 0),
                                            dec.checksum == CHECKSUM_CRC32 and not in_payload, position, dec.source)
            return self._add(route[1], raw, position, sub, route[0], in_payload, attached.schema)
        return self._add(route[1], raw, position, sub, route[0], in_payload, attached)

    def _add(self, topic: str, raw: bytes, position: int, sub: int, table_map: bytes | None,
             in_payload: bool, schema: bytes = b"") -> list[Record] | tuple[()]:
        records = self._records if self.xa.capture is None else self.xa.capture  # an XA body's events: held back
        return records.add(topic, raw, position, sub, table_map, in_payload, self.txn.commit_ts, self.txn.gtid, schema)

    def _event(self, raw: bytes, ev: E.Event, sub: int) -> list[Record] | tuple[()]:
        if type(ev) is E.FormatDescriptionEvent:
            self._routes.clear()
            self._table_maps.clear()
            self._begins.clear()
            self._mariadb = "mariadb" in ev.server_version.lower()
            if bytes(raw) != self._records.fde:
                flushed = self.flush()  # records carry one format description
                self._records.fde = bytes(raw)
                return flushed
        elif type(ev) is E.RotateEvent:
            self.file = ev.next_file
            self._records.file_number = file_number(ev.next_file) + self.file_offset
            if self.names is not None:
                self.names.saw(self._records.file_number, ev.next_file)
        elif type(ev) is E.TableMapEvent:
            tm = ev.table_map
            topic = f"{tm.database}.{tm.table}" if self.accept(tm.database, tm.table) else None
            entry = b""
            if topic is not None and self.schema is not None and (
                    not tm.has_names or (self.named_entries and self.schema.has_defaults((tm.database, tm.table)))):
                attachment = self.schema.attachment(tm, f"{self.file}:{ev.position}")
                topic, entry = (None, b"") if attachment is None else (topic, attachment)
            attached: bytes | Masked = entry
            if topic is not None:
                self._records.names[topic] = (tm.database, tm.table)
                if self.masks is not None:
                    attached = self._masked(tm, entry, ev.position)
                if self.mapped is not None:
                    self.mapped(topic, tm, entry)
            self._routes[tm.table_id] = (bytes(raw), topic, attached)

        elif isinstance(ev, E.RowsEvent):  # layouts without the routing fast path (pre-GA, old ids)
            self.txn.step(Input.ROWS)
            route = self._routes.get(ev.table_id)
            if route is not None and route[1] is not None:
                attached = route[2]
                if isinstance(attached, Masked):
                    raise BinlogError(f"cannot mask columns in this rows event layout (type {ev.type_code})",
                                      ev.position)
                return self._add(route[1], raw, ev.position, sub, route[0], ev.in_payload, attached)
        elif isinstance(ev, E.GtidEvent):
            sid = None if isinstance(ev, E.AnonymousGtidEvent) else f"{ev.uuid}:{ev.tag}" if ev.tag else ev.uuid
            self.txn.mysql_gtid(sid, ev.gno, ev.gtid.encode(), ev.original_commit_timestamp or ev.timestamp * 1_000_000)
        elif type(ev) is E.MariadbGtidEvent:
            self.txn.mariadb_gtid(ev.domain_id, ev.server_id, ev.sequence, bool(ev.gtid_flags & 1), ev.timestamp)
            if ev.gtid_flags & 64 and ev.xid is not None:  # FL_PREPARED_XA: an XA transaction's body follows
                self.xa.start(xid_text(ev.xid["format_id"], ev.xid["gtrid"], ev.xid["bqual"]))
        elif isinstance(ev, E.QueryEvent):
            text = ev.query.encode("utf-8", "surrogateescape")
            control = _TRANSACTION_CONTROL.match(text)
            if control:
                word, xa = control.group(1).upper(), (control.group(2) or b"").upper()
                if word == b"BEGIN" or xa == b"START":
                    self.txn.begin(ev.timestamp)
                    if xa:
                        self._xa_statement(text, ev, sub)
                elif word in (b"COMMIT", b"ROLLBACK") or xa in (b"COMMIT", b"ROLLBACK"):
                    released = self._xa_statement(text, ev, sub) if xa else []
                    self.txn.step(Input.END)
                    return released
                # XA END and XA PREPARE: the XA_PREPARE event that follows ends the transaction
            else:
                self.txn.statement_time(ev.timestamp)
                closed: list[Record] | tuple[()] = () if _CREDENTIALS.match(text) else self._add(
                    SCHEMA_TOPIC, raw, ev.position, sub, None, ev.in_payload)
                closed = [*closed, *self._schema_changes(ev, sub)]
                self.txn.step(Input.STATEMENT)  # the whole transaction unless in a body (txn.py)
                return closed
        elif type(ev) is E.XidEvent:
            self.txn.step(Input.END)
        elif type(ev) is E.XaPrepareEvent:  # ends the binlog transaction; the XA transaction is pending (xa.py)
            released = self.xa.prepare(xid_text(ev.format_id, ev.gtrid, ev.bqual), ev.one_phase,
                                       Sequence(self._records.file_number, ev.position, sub), self.txn.gtid,
                                       self.txn.commit_ts)
            self.txn.step(Input.END)
            return released
        return ()

    def _xa_statement(self, text: bytes, ev: E.QueryEvent, sub: int) -> list[Record]:
        """XA START, COMMIT or ROLLBACK (xa.py): the records an outcome releases."""
        parsed = statement_xid(text)
        if parsed is None:
            raise BinlogError(f"cannot read the xid of {ev.query[:200]!r}", ev.position, self.file or "<binlog>")
        verb, xid, one_phase = parsed
        if verb == "START":
            self.xa.start(xid)
            return []
        return self.xa.outcome(verb, xid, one_phase, Sequence(self._records.file_number, ev.position, sub),
                               self.txn.gtid, self.txn.commit_ts, f"{self.file}:{ev.position}")

    def _masked(self, tm: TableMap, schema: bytes, position: int) -> bytes | Masked:
        """The route's attachment for a table map: with a rewriter when rules name some of its columns."""
        assert self.masks is not None
        named = enrich(tm, schema) if schema else tm
        if not named.has_names and not schema:
            if self.masks.applies_to(tm.database, tm.table):
                raise BinlogError(f"filters.columns: the TABLE_MAP of `{tm.database}`.`{tm.table}` has no column "
                                  "names (set binlog_row_metadata=FULL or schema.history)", position,
                                  self.file or "<binlog>")
            return schema
        actions = self.masks.for_table(named)
        if not actions:
            return schema
        try:
            return Masked(schema, Rewriter(named, actions, self.masks.key))
        except BinlogError as exc:  # a rule this table's columns cannot take: name the binlog and the map
            raise BinlogError(exc.reason, position, self.file or "<binlog>") from None

    def _schema_changes(self, ev: E.QueryEvent, sub: int) -> list[Record]:
        """History entries of the tables a statement changed (records of the history topic), then its table
        statement entries in the topics of the captured tables it changed (table_statements.py)."""
        seq = Sequence(self._records.file_number, ev.position, sub)
        # a history captured after this statement holds its effect already: not applied again
        history = self.schema if self.schema is not None and self.schema.applies(seq.encode()) else None
        planned = plan(ev, self.accept, history, self._records.names.values(), self._mariadb)
        records = []
        if history is not None:
            changed = history.apply(ev.database, ev.query, f"{self.file}:{ev.position}",
                                    ev.status_vars.get("collation_server"))
            if changed:
                self._table_maps.clear()  # the same map bytes may now need another schema entry
            records = [Record(HISTORY_TOPIC, history_key(name), history.entry(name, str(seq), ev.query),
                              [("binlake.seq", seq.encode())], seq) for name in changed]
        return records if planned is None else records + self._statements(planned, ev, seq)

    def _statements(self, planned: Plan, ev: E.QueryEvent, seq: Sequence) -> list[Record]:
        """A statement's table statement entries, a record per topic (after the topic's open record); after
        partition maintenance that removed or moved rows, a reload entry for each such table the daemon reads
        again (``reload``), after the statement's own entries."""
        topics: dict[str, list[tuple[Sequence, Any]]] = {}
        entries = planned.entries(statement_fields(ev), self._mariadb, self.masks)
        after = max((k for k, _ in entries), default=0) + 1
        for k, entry in list(entries):
            if self.reload is not None and entry.op == "partition" and entry.partition is not None \
                    and entry.partition.get("action") in ROW_ACTIONS and self.reload(entry.database, entry.table):
                entries[entries.index((k, entry))] = (k, replace(entry, partition={**entry.partition, "reload": True}))
                entries.append((after, replace(entry, op="reload", partition=None)))
                after += 1
        for k, entry in entries:
            topic = f"{entry.database}.{entry.table}"
            self._records.names.setdefault(topic, (entry.database, entry.table))
            topics.setdefault(topic, []).append((Sequence(seq.file_number, seq.position, seq.sub + k), entry))
        return [r for topic, entries in topics.items()
                for r in self._records.statements(topic, entries, self.txn.commit_ts, self.txn.gtid)]
