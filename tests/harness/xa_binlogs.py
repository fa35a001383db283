"""Binlogs of XA transactions written by hand, as MySQL 8.0 and MariaDB 10.11 write them (records/xa.py's
docstring; tests/integration/test_xa.py reads the servers' own), and the record builder run over them."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ingester.codec import BinlogDecoder
from ingester.records.builder import Checkpoint, Record, RecordBuilder
from ingester.records.format import record_events
from tests.harness.binlogs import MARIADB_FDE, MYSQL_FDE, binlog_event, format_description, name_row, name_table_map

UUID = bytes.fromhex("3e11fa4771ca11e19e33c80aa9429562")
TABLES = {b"t": 0x2A, b"u": 0x2B}  # db.t and db.u, name_table_map's columns (id INT, name VARCHAR(20))


def xid_parts(xid: str) -> tuple[int, bytes, bytes]:
    """(formatID, gtrid, bqual) of a test's xid ``gtrid[,bqual[,formatID]]`` (plain text)."""
    parts = xid.split(",")
    return (int(parts[2]) if len(parts) > 2 else 1), parts[0].encode(), (parts[1] if len(parts) > 1 else "").encode()


def xid_sql(xid: str) -> str:
    """The xid as the servers log it in XA statements."""
    fmt, gtrid, bqual = xid_parts(xid)
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{fmt}"


@dataclass
class XaBinlog:
    """Events of one binlog file (binlog.000001), each transaction added by a method; ``mariadb`` writes them as
    MariaDB 10.11 does (GTIDs flagged FL_PREPARED_XA / FL_COMPLETED_XA, no XA START statement), else as MySQL 8.0
    (GTID, XA START, ..., XA_PREPARE)."""

    mariadb: bool = False
    events: list[tuple[int, bytes]] = field(default_factory=list)
    gno: int = 0
    positions: dict[str, int] = field(default_factory=dict)  # a label -> the position of its event (``at``)

    def _gtid(self, flags: int = 0, xid: str | None = None) -> None:
        self.gno += 1
        if self.mariadb:
            body = struct.pack("<QIB", self.gno, 0, flags | 8 | (4 if flags & 1 == 0 else 0))
            if xid is not None:
                fmt, gtrid, bqual = xid_parts(xid)
                body += struct.pack("<IBB", fmt, len(gtrid), len(bqual)) + gtrid + bqual
            else:
                body += bytes(6)
            self.events.append((162, body))
        else:
            ts = 1_700_000_000_000_000 + self.gno
            body = b"\0" + UUID + struct.pack("<qBqq", self.gno, 2, 0, self.gno) + ts.to_bytes(7, "little")
            self.events.append((33, body))

    def _query(self, text: str, label: str | None = None) -> None:
        if label is not None:
            self.positions[label] = len(self.events)
        self.events.append((2, struct.pack("<IIBHH", 1, 0, 0, 0, 0) + b"\0" + text.encode()))

    def _rows(self, table: bytes, ids: list[int]) -> None:
        table_id = TABLES[table]
        self.events.append((19, name_table_map(table_id, table)))
        head = table_id.to_bytes(6, "little") + b"\x01\0" + (b"" if self.mariadb else b"\x02\0") + b"\x02\x03"
        self.events.append((23 if self.mariadb else 30, head + b"".join(name_row(i, b"r%d" % i) for i in ids)))

    def plain(self, rows: dict[bytes, list[int]]) -> XaBinlog:
        """An ordinary transaction inserting ``rows`` (table -> ids)."""
        self._gtid()
        if not self.mariadb:
            self._query("BEGIN")
        for table, ids in rows.items():
            self._rows(table, ids)
        self.events.append((16, bytes(8)))
        return self

    def prepare(self, xid: str, rows: dict[bytes, list[int]], one_phase: bool = False) -> XaBinlog:
        """An XA transaction's body and XA_PREPARE (``one_phase``: XA COMMIT ... ONE PHASE; MariaDB logs that as an
        ordinary transaction)."""
        if self.mariadb and one_phase:
            return self.plain(rows)
        self._gtid(64, xid) if self.mariadb else self._gtid()
        if not self.mariadb:
            self._query(f"XA START {xid_sql(xid)}")
        for table, ids in rows.items():
            self._rows(table, ids)
        self._query(f"XA END {xid_sql(xid)}")
        self.positions[f"prepare {xid}"] = len(self.events)
        fmt, gtrid, bqual = xid_parts(xid)
        self.events.append((38, struct.pack("<BIII", one_phase, fmt, len(gtrid), len(bqual)) + gtrid + bqual))
        return self

    def outcome(self, xid: str, commit: bool = True) -> XaBinlog:
        """``XA COMMIT`` (or ``XA ROLLBACK``) of ``xid``: its own GTID transaction."""
        self._gtid(128 | 1, xid) if self.mariadb else self._gtid()
        self._query(f"XA {'COMMIT' if commit else 'ROLLBACK'} {xid_sql(xid)}", f"{'commit' if commit else 'rollback'} "
                    f"{xid}")
        return self

    def raw(self) -> list[tuple[bytes, int]]:
        """(raw event, position) of each event, the format description first."""
        fde = format_description(MARIADB_FDE if self.mariadb else MYSQL_FDE)
        out = [(fde, 4)]
        pos = 4 + len(fde)
        for code, body in self.events:
            raw = binlog_event(code, body, pos, crc=True)
            out.append((raw, pos))
            pos += len(raw)
        return out

    def index(self, label: str) -> int:
        """The index in ``raw`` of a labelled event (``prepare <xid>``, ``commit <xid>``, ``rollback <xid>``)."""
        return self.positions[label] + 1

    def at(self, label: str) -> int:
        """The position of a labelled event."""
        return self.raw()[self.index(label)][1]


@dataclass
class Fed:
    """What the builder gave for a binlog: records and checkpoints in order."""

    builder: RecordBuilder
    out: list[Record | Checkpoint]

    def records(self, topic: str | None = None) -> list[Record]:
        return [r for r in self.out if isinstance(r, Record) and (topic is None or r.topic == topic)]

    def rows(self, topic: str = "db.t") -> list[tuple[Any, ...]]:
        """(id, sequence (file, position, sub), GTID, commit time) of every row of the topic's records, in order."""
        rows = []
        for r in self.records(topic):
            for item in record_events(dict(r.headers), r.value):
                for change in item.event.rows:
                    rows.append((change["after"]["id"], (item.seq.file_number, item.seq.position, item.seq.sub),
                                 item.gtid, item.commit_ts))
        return rows


def feed(binlog: XaBinlog, builder: RecordBuilder | None = None, first: int = 1, last: int | None = None,
         commit: Callable[[RecordBuilder, Checkpoint], list[Record]] | None = None) -> Fed:
    """The builder (a new one by default) fed the format description, then the binlog's events ``first:last`` (indexes
    of ``XaBinlog.raw``), a checkpoint taken after each event as the daemon would (its open records flushed, and
    ``commit``'s records, e.g. those for _prepared, before it); at the end the open records flushed."""
    builder = builder or RecordBuilder(file="binlog.000001")
    dec = BinlogDecoder("binlog.000001")
    out: list[Record | Checkpoint] = []
    events = binlog.raw()
    for raw, pos in [events[0], *events[first:last]]:
        out += builder.feed(dec, raw, pos)
        checkpoint = builder.checkpoint()
        if checkpoint is not None:
            out += builder.flush()
            if commit is not None:
                out += commit(builder, checkpoint)
            out.append(checkpoint)
    out += builder.flush()
    return Fed(builder, out)
