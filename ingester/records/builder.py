"""From binlog events to Kafka records and checkpoints (sans-I/O: no Kafka, no sockets).

The builder follows transactions: rows events become records on their table's topic, DDL and
other statements become records on the schema topic, and at every transaction boundary it emits
a checkpoint (file, next position, executed GTIDs) that is safe to resume from. The daemon puts
a transaction's records and its checkpoint into one Kafka transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..codec import BinlogDecoder
from ..codec import events as E
from ..codec.events import EVENT_NAMES
from .format import Sequence, encode_value, file_number
from .gtid import MariadbGtidState, MysqlGtidSet

SCHEMA_TOPIC = "_schema"
_TRANSACTION_CONTROL = re.compile(rb"^\s*(BEGIN|COMMIT|XA\s+(START|END|PREPARE|COMMIT|ROLLBACK))\b", re.I)


@dataclass
class Record:
    topic: str  # logical topic: "<db>.<table>" or SCHEMA_TOPIC; the daemon adds its prefix
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    seq: Sequence


@dataclass
class Checkpoint:
    """A transaction boundary: resume at (file, position) with the executed GTIDs."""

    file: str
    position: int
    gtid_set: str
    seq: Sequence


@dataclass
class RecordBuilder:
    """Feed every event of the stream in order; collect records and checkpoints."""

    accept: Callable[[str, str], bool] = lambda db, table: True
    file: str = ""
    mysql_gtids: MysqlGtidSet = field(default_factory=MysqlGtidSet)
    mariadb_gtids: MariadbGtidState = field(default_factory=MariadbGtidState)
    _fde: bytes = b""
    _maps: dict[int, bytes] = field(default_factory=dict)
    _in_transaction: bool = False
    _gtid: str = ""
    _pending_gtid: tuple | None = None
    _commit_ts: int = 0
    _standalone: bool = False

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    @property
    def gtid_set(self) -> str:
        return str(self.mariadb_gtids) if self.mariadb_gtids.domains else str(self.mysql_gtids)

    def feed(self, dec: BinlogDecoder, raw: bytes, ev: E.Event) -> Iterator[Record | Checkpoint]:
        """Records (and a checkpoint at a transaction's end) for one outer event of the stream."""
        if type(ev) is E.TransactionPayloadEvent:
            for sub, inner_raw in enumerate(dec.payload_raw_events(ev), start=1):
                inner = dec.decode(inner_raw, ev.position, in_payload=True)
                yield from self._event(inner_raw, inner, sub)
        else:
            yield from self._event(raw, ev, 0)
        if ev.log_pos and not self._in_transaction and not isinstance(ev, (E.RotateEvent, E.HeartbeatEvent)):
            yield Checkpoint(self.file, ev.log_pos, self.gtid_set, self._seq(ev, 0))

    def _seq(self, ev: E.Event, sub: int) -> Sequence:
        return Sequence(file_number(self.file) if self.file else 0, ev.position, sub)

    def _event(self, raw: bytes, ev: E.Event, sub: int) -> Iterator[Record]:
        kind = type(ev)
        if kind is E.FormatDescriptionEvent:
            self._fde = bytes(raw)
            self._maps.clear()
        elif kind is E.RotateEvent:
            self.file = ev.next_file
        elif kind is E.TableMapEvent:
            self._maps[ev.table_map.table_id] = bytes(raw)
        elif isinstance(ev, E.RowsEvent):
            self._in_transaction = True
            tm = ev.table_map
            if self.accept(tm.database, tm.table):
                yield self._record(f"{tm.database}.{tm.table}", raw, ev, sub, self._maps.get(ev.table_id),
                                   tm.database, tm.table)
        elif isinstance(ev, E.GtidEvent):
            self._begin()
            if not isinstance(ev, E.AnonymousGtidEvent):
                sid = f"{ev.uuid}:{ev.tag}" if ev.tag else ev.uuid
                self._gtid, self._pending_gtid = ev.gtid, ("mysql", sid, ev.gno)
            self._commit_ts = ev.original_commit_timestamp or ev.timestamp * 1_000_000
        elif kind is E.MariadbGtidEvent:
            self._begin()
            self._gtid, self._pending_gtid = ev.gtid, ("mariadb", ev.domain_id, ev.server_id, ev.sequence)
            self._commit_ts = ev.timestamp * 1_000_000
            self._standalone = bool(ev.gtid_flags & 1)  # FL_STANDALONE: no COMMIT follows
        elif isinstance(ev, E.QueryEvent):
            text = ev.query.encode("utf-8", "surrogateescape")
            control = _TRANSACTION_CONTROL.match(text)
            if control and control.group(1).upper() == b"BEGIN":
                self._in_transaction = True
                if not self._gtid:
                    self._commit_ts = ev.timestamp * 1_000_000
            elif control and control.group(1).upper() == b"COMMIT":
                self._commit()
            else:
                if not self._gtid and not self._in_transaction:
                    self._commit_ts = ev.timestamp * 1_000_000
                yield self._record(SCHEMA_TOPIC, raw, ev, sub, None, ev.database, "")
                if not self._in_transaction or self._standalone:
                    self._commit()
        elif kind is E.XidEvent or kind is E.XaPrepareEvent:
            self._commit()

    def _begin(self) -> None:
        self._in_transaction = True
        self._standalone = False

    def _commit(self) -> None:
        pending = self._pending_gtid
        if pending is not None:
            if pending[0] == "mysql":
                self.mysql_gtids.add(pending[1], pending[2])
            else:
                self.mariadb_gtids.add(pending[1], pending[2], pending[3])
        self._in_transaction = False
        self._standalone = False
        self._pending_gtid = None
        self._gtid = ""

    def _record(self, topic: str, raw: bytes, ev: E.Event, sub: int, table_map: bytes | None,
                database: str, table: str) -> Record:
        seq = self._seq(ev, sub)
        headers = [
            ("binlake.v", b"1"),
            ("binlake.seq", seq.encode()),
            ("binlake.file", self.file.encode()),
            ("binlake.pos", str(ev.position).encode()),
            ("binlake.gtid", self._gtid.encode()),
            ("binlake.commit_ts", str(self._commit_ts).encode()),
            ("binlake.type", EVENT_NAMES.get(ev.type_code, "unknown").encode()),
            ("binlake.db", database.encode("utf-8", "surrogateescape")),
            ("binlake.table", table.encode("utf-8", "surrogateescape")),
        ]
        key = f"{database}.{table}".encode("utf-8", "surrogateescape")
        return Record(topic, key, encode_value(self._fde, table_map, bytes(raw), ev.in_payload), headers, seq)
