"""What the daemon's records become on Kafka: the strategy behind ``kafka.format``.

The record builder always makes binlake records (records/format.py); an ``Outbound`` turns each into the
Kafka messages of the chosen format, inside the Kafka transaction that commits them with their checkpoint.
``BinlakeOut`` publishes a record as it is (in chunks beyond the size limit); the Debezium formats
(records/debezium/) publish a change event per row. Pure: no Kafka client here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, Protocol

from ..codec.table_map import TableMap
from .open_records import Record


class BinlogNames:
    """Binlog file names by the file numbers of sequences (which add the failover offset): what a format that
    names source coordinates (Debezium's source.file) needs. The record builder tells it every file it reads."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}

    def saw(self, number: int, name: str) -> None:
        if len(self._names) >= 1024:
            self._names.clear()
        self._names[number] = name

    def __call__(self, number: int) -> str:
        name = self._names.get(number)
        if name is not None:
            return name
        return self._guess(number)

    def _guess(self, number: int) -> str:
        # not seen (e.g. after a restart, before the file's ROTATE): the pattern of the latest file seen
        if not self._names:
            return f"binlog.{number:06d}"
        known = max(self._names)
        stem, _, digits = self._names[known].rpartition(".")
        return f"{stem}.{int(digits) + number - known:0{len(digits)}d}"


class Message(NamedTuple):
    topic: str  # the whole Kafka topic name
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: Sequence[tuple[str, bytes]]


class Outbound(Protocol):
    # publishes events in binlog order across tables: it holds records until a complete one (Record.complete),
    # which the record builder then closes together (RecordBuilder.together) to keep that short
    across_tables: bool
    # the bytes of records worth queuing for it (None: the publisher's limit): a format whose messages are many times
    # its records' size is the slower side, and a long queue of records would only be memory
    max_queued_bytes: int | None

    @property
    def held_bytes(self) -> int:
        """The bytes of records it holds back (published later in the open Kafka transaction)."""

    def messages(self, record: Record) -> Iterable[Message]:
        """What a record becomes, published at once in the open Kafka transaction (possibly nothing yet)."""

    def before_commit(self) -> Iterable[Message]:
        """What it held back, published just before the checkpoint commits with it."""

    def topics(self, record_topics: Iterable[str]) -> Iterable[str]:
        """The Kafka topics of the messages of records of these topics (``Record.topic``; the publisher creates them
        ahead, in one request)."""

    def mapped(self, record_topic: str, table_map: TableMap, schema_entry: bytes) -> None:
        """A table map of a record topic first decoded, with the schema history's entry its records carry (b"":
        none): make ready what their messages will need, ahead of them (called on the daemon's thread)."""

    def discard(self) -> None:
        """The open Kafka transaction was aborted: forget what was held back."""

    def describe(self, message: Message) -> str:
        """Where one of its messages comes from, for an error that names it."""


def chunks(size: int, max_record_bytes: int) -> int:
    """The messages a record of ``size`` bytes is published as in binlake's format (chunks beyond the limit)."""
    return max(1, -(-size // max_record_bytes))


class BinlakeOut:
    """binlake's record format: one message per record; a record larger than ``max_record_bytes`` goes as
    consecutive chunks (header ``binlake.chunk: i/n``) of one partition."""

    across_tables = False
    max_queued_bytes: int | None = None
    held_bytes = 0

    def __init__(self, prefix: str, max_record_bytes: int) -> None:
        self.prefix = prefix
        self.max_record_bytes = max_record_bytes

    def messages(self, record: Record) -> Iterator[Message]:
        topic, value, size = f"{self.prefix}.{record.topic}", record.value, self.max_record_bytes
        if len(value) <= size:
            yield Message(topic, record.key, value, record.headers)
            return
        n = chunks(len(value), size)
        for i in range(n):
            yield Message(topic, record.key, value[i * size : (i + 1) * size],
                          [*record.headers, ("binlake.chunk", f"{i}/{n}".encode())])

    def before_commit(self) -> tuple[()]:
        return ()

    def topics(self, record_topics: Iterable[str]) -> set[str]:
        return {f"{self.prefix}.{t}" for t in record_topics}

    def mapped(self, record_topic: str, table_map: TableMap, schema_entry: bytes) -> None:
        pass

    def discard(self) -> None:
        pass

    def describe(self, message: Message) -> str:
        return f"a record of {message.topic}"
