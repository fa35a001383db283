"""A task's side of binlake's Kafka source (kafka_source.py): the committed records of a batch's spans, read by
one consumer per Spark Python worker.

A worker serves many tasks, so its consumer is kept between them (a consumer costs a connection and a metadata
round trip per broker), but only one that finished its last read whole: a read left early (Spark closed its
generator) or failed closes its consumer, whose fetch state (paused partitions, parked and in-flight fetches) is
then not to be trusted. A read that gets nothing for _STALL_S while records are due gets a new consumer once, from
where it was (its records so far kept); one that gets nothing for _READ_TIMEOUT_S stops the query naming the
partitions, its position and Kafka's last stable offsets.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

log = logging.getLogger("binlake.land")

# The columns of Spark's Kafka source (includeHeaders), in its order
_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                    ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.timestamp("us", "UTC")),
                    ("timestampType", pa.int32()), ("headers", _HEADERS)])
_BATCH_BYTES = 32 << 20  # a task's output is handed on in Arrow batches of about this size
_POLL_MS = 200
_STALL_S = 15.0  # nothing for this long while records are due: a new consumer (once per read)
_READ_TIMEOUT_S = 120.0  # nothing for this long: the read fails (Spark's kafkaConsumer.pollTimeoutMs)


class SourceError(RuntimeError):
    """Records of a batch are not in Kafka any more (or a topic was deleted), or Kafka does not give them."""


class TooLarge(SourceError):
    """A read bounded in bytes (read_spans' max_bytes) found more."""


@dataclass(frozen=True)
class Span:
    """Offsets [start, end) of one topic partition."""
    topic: str
    partition: int
    start: int
    end: int


def consumer(bootstrap: str):  # type: ignore[no-untyped-def]
    """A read_committed consumer without a group, assigned partitions by hand."""
    from kafka import KafkaConsumer

    chatty = logging.getLogger("kafka")
    if chatty.level == logging.NOTSET:  # a Spark Python worker's (nobody set it): while Kafka is away, a
        chatty.setLevel(logging.ERROR)  # warning every retry_backoff_ms, and a line per metadata update

    return KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                         group_id=None, auto_offset_reset="none", fetch_max_wait_ms=10,
                         max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20, check_crcs=True,
                         # a task's consumer, assigned partitions it has no metadata for yet, waits this long
                         # between metadata refreshes before it fetches (kafka-python's default 100 ms was
                         # most of a small batch's read)
                         retry_backoff_ms=10, client_id="binlake-land")


_IDLE: dict[str, Any] = {}  # a Python worker's consumer between reads (one that finished its last read whole)


def close_readers() -> None:
    """This process's kept consumers closed (the tests' process, which reads with read_spans itself)."""
    while _IDLE:
        _IDLE.popitem()[1].close()


def read_spans(bootstrap: str, spans: Sequence[Span], quiet_s: float = _READ_TIMEOUT_S,
               max_bytes: int = 0) -> Iterator[pa.RecordBatch]:
    """The committed records of ``spans``, in offset order per partition, as Arrow batches of SCHEMA. The read fails
    (SourceError) after ``quiet_s`` without records while some are due, and (TooLarge) once it has read more than
    ``max_bytes`` (0: no bound)."""
    if len({(s.topic, s.partition) for s in spans}) != len(spans):  # pieces of one partition: one at a time
        for s in spans:
            yield from read_spans(bootstrap, [s], quiet_s, max_bytes)
        return
    read = _Read(bootstrap, _IDLE.pop(bootstrap, None) or consumer(bootstrap), spans, quiet_s, max_bytes)
    try:
        yield from read.batches()
    except BaseException:  # closed early (GeneratorExit) or failed: its consumer's state is not to be trusted
        with contextlib.suppress(Exception):  # (the read's own error is the one to tell)
            read.kafka.close()
        raise
    read.kafka.assign([])
    _IDLE[bootstrap] = read.kafka


class _Read:
    """One read of spans: the next offset due of each partition not finished, and the records not handed on."""

    def __init__(self, bootstrap: str, kafka: Any, spans: Sequence[Span], quiet_s: float, max_bytes: int) -> None:
        from kafka import TopicPartition

        self.bootstrap = bootstrap
        self.quiet_s = quiet_s
        self.max_bytes = max_bytes
        self.handed = 0  # bytes handed on so far
        self.kafka = kafka
        self.spans = {TopicPartition(s.topic, s.partition): s for s in spans}
        self.due = {tp: s.start for tp, s in self.spans.items()}  # an open partition -> its next offset to read
        self.columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
        self.size = 0
        self.renewed = False
        self._assign()

    def _assign(self) -> None:
        # a new assignment keeps the state of partitions in the last one (kafka-python 3, as Java's consumer)
        self.kafka.assign([])
        self.kafka.assign(list(self.due))
        for tp, offset in self.due.items():
            self.kafka.seek(tp, offset)

    def batches(self) -> Iterator[pa.RecordBatch]:
        quiet_since = time.monotonic()
        while self.due:
            if self._poll():
                quiet_since = time.monotonic()
            if self.max_bytes and self.handed + self.size > self.max_bytes:
                raise TooLarge(f"more than {self.max_bytes} bytes of records")
            if self.size >= _BATCH_BYTES or (not self.due and self.columns["offset"]):
                yield pa.RecordBatch.from_pydict(self.columns, schema=SCHEMA)
                self.columns = {name: [] for name in SCHEMA.names}
                self.handed += self.size
                self.size = 0
            quiet = time.monotonic() - quiet_since
            if self.due and quiet > self.quiet_s:
                raise SourceError(f"Kafka did not give the committed records of {self._late()} for "
                                  f"{self.quiet_s:.0f} s")
            if self.due and quiet > _STALL_S and not self.renewed:
                log.warning("binlake_kafka: nothing from Kafka for %.0f s of %s: a new consumer", quiet, self._late())
                self.kafka.close()
                self.kafka = consumer(self.bootstrap)
                self.renewed = True
                self._assign()

    def _poll(self) -> bool:
        """One poll: its records kept, finished partitions paused; whether the read moved on."""
        from kafka.errors import OffsetOutOfRangeError

        try:
            polled = self.kafka.poll(timeout_ms=_POLL_MS)
        except OffsetOutOfRangeError as exc:
            lost = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            where = ", ".join(f"{tp.topic}-{tp.partition} from offset {o}" for tp, o in lost.items()) or str(exc)
            raise SourceError(f"records of Kafka topic partition {where} are not in Kafka any more (retention?): "
                              "they have not landed") from None
        moved = False
        columns = self.columns
        for tp, records in polled.items():
            span = self.spans[tp] if tp in self.due else None
            if span is None:
                continue
            for r in records:
                if r.offset >= span.end:
                    break
                columns["key"].append(r.key)
                columns["value"].append(r.value)
                columns["topic"].append(tp.topic)
                columns["partition"].append(tp.partition)
                columns["offset"].append(r.offset)
                columns["timestamp"].append(r.timestamp * 1000)
                columns["timestampType"].append(r.timestamp_type)
                columns["headers"].append([{"key": k, "value": v} for k, v in r.headers])
                self.size += len(r.value or b"") + 64
                self.due[tp] = r.offset + 1
                moved = True
        for tp in list(self.due):
            position = self.kafka.position(tp)
            if position > self.due[tp]:  # past transaction markers and aborted records too
                self.due[tp] = position
                moved = True
            if self.due[tp] >= self.spans[tp].end:
                del self.due[tp]
                self.kafka.pause(tp)
        return moved

    def _late(self) -> str:
        """The open partitions (five at most): their spans, where the read is, Kafka's last stable offsets."""
        late = list(self.due)[:5]
        try:
            stable = self.kafka.end_offsets(late)
        except Exception:  # Kafka away: the message goes without it
            stable = {}
        return ", ".join(f"{tp.topic}-{tp.partition} (offsets {self.spans[tp].start} to {self.spans[tp].end}: at "
                         f"{self.due[tp]}, last stable offset {stable.get(tp)})" for tp in late)
