"""The records being filled, one per topic, until they reach their size limit or the daemon commits.

The record builder (builder.py) and its native router (_router.c) add events here; _router.c reads and
writes the slots of ``OpenRecords`` and appends to RecordWriter as ``OpenRecords.add`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .format import RecordWriter, Sequence
from .statement import TableStatement, index_entry, statement_value


@dataclass
class Record:
    topic: str  # logical topic: "<db>.<table>" or SCHEMA_TOPIC; the daemon adds its prefix
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    seq: Sequence
    # every event fed before this record's last one is in it or in a record closed before it (the records of a
    # flush: the last one); what a format ordering events across tables may publish up to
    complete: bool = False


class OpenRecords:
    """One RecordWriter per topic, their total size bounded (memory), and what every record carries."""

    __slots__ = ("bytes", "fde", "file_number", "max_open_bytes", "max_record_bytes", "names", "open", "together")

    def __init__(self, max_record_bytes: int, max_open_bytes: int, together: bool = False) -> None:
        self.max_record_bytes = max_record_bytes
        self.max_open_bytes = max_open_bytes  # all open records together: flushed beyond this
        # close every open record when one is full (the last of them complete): a format that orders events across
        # tables then holds no more than the open records (else a table's small open record would hold back the
        # records of another filled meanwhile, a whole huge transaction's)
        self.together = together
        self.open: dict[str, RecordWriter] = {}
        self.bytes = 0  # the open records' sizes together
        self.fde = b""  # the format description every record starts with
        self.file_number = 0  # of the binlog file being read (sequences), with the failover offset
        self.names: dict[str, tuple[str, str]] = {}  # topic -> (database, table)

    def add(self, topic: str, raw: bytes, position: int, sub: int, table_map: bytes | None, in_payload: bool,
            commit_ts: int, gtid: bytes, schema: bytes = b"") -> list[Record] | tuple[()]:
        """Append an event to its topic's record: the records this closes (usually none)."""
        closed: list[Record] = []
        writer = self.open.get(topic)
        # An event that would take the record past its limit starts the next one: a record is larger than
        # the limit (and published in chunks) only when a single event is.
        if writer is not None and writer.size + 9 + len(raw) + len(table_map or b"") > self.max_record_bytes:
            if self.together or len(self.open) == 1:
                closed += self.flush()
            else:
                self.bytes -= writer.size
                closed.append(self._close(topic))
            writer = None
        if writer is None:
            writer = self.open[topic] = RecordWriter(self.fde)
        before = writer.size
        writer.add(Sequence(self.file_number, position, sub).encode(), commit_ts, gtid, bytes(raw), table_map,
                   in_payload, schema)
        self.bytes += writer.size - before
        if self.bytes > self.max_open_bytes:
            closed += self.flush()
        return closed or ()

    def flush(self) -> list[Record]:
        """Close every open record."""
        records = [self._close(topic) for topic in list(self.open)]
        self.bytes = 0
        if records:
            records[-1].complete = True
        return records

    def statements(self, topic: str, entries: list[tuple[Sequence, TableStatement]], commit_ts: int,
                   gtid: bytes) -> list[Record]:
        """A record of table statement entries of a topic (statement.py), after the topic's open record, closed
        first: the entries come after the table's earlier events and before its later ones."""
        closed = []
        writer = self.open.get(topic)
        if writer is not None:
            self.bytes -= writer.size
            closed.append(self._close(topic))
        closed.append(statement_record(topic, self.names.get(topic, ("", "")), entries, commit_ts, gtid))
        return closed

    def _close(self, topic: str) -> Record:
        writer = self.open.pop(topic)
        headers = self._headers(topic, writer.first_seq, writer.count, writer.last_commit_ts, writer.index_header())
        return Record(topic, topic.encode("utf-8", "surrogateescape"), writer.value(), headers,
                      Sequence.decode(writer.first_seq))

    def _headers(self, topic: str, first_seq: bytes, count: int, commit_ts: int,
                 index: bytes) -> list[tuple[str, bytes]]:
        return headers(self.names.get(topic, ("", "")), first_seq, count, commit_ts, index)


def statement_record(topic: str, name: tuple[str, str], entries: list[tuple[Sequence, TableStatement]],
                     commit_ts: int, gtid: bytes) -> Record:
    """A record of table statement entries (statement.py) of one table's topic."""
    index = b"".join(index_entry(seq.encode(), commit_ts, gtid) for seq, _ in entries)
    return Record(topic, topic.encode("utf-8", "surrogateescape"), statement_value([s for _, s in entries]),
                  headers(name, entries[0][0].encode(), len(entries), commit_ts, index), entries[0][0])


def headers(name: tuple[str, str], first_seq: bytes, count: int, commit_ts: int,
            index: bytes) -> list[tuple[str, bytes]]:
    """A record's headers (docs/FORMAT.md, "Headers")."""
    database, table = name
    return [
        ("binlake.v", b"2"),
        ("binlake.seq", first_seq),
        ("binlake.count", str(count).encode()),
        ("binlake.commit_ts", str(commit_ts).encode()),
        ("binlake.db", database.encode("utf-8", "surrogateescape")),
        ("binlake.table", table.encode("utf-8", "surrogateescape")),
        ("binlake.index", index),
    ]
