"""The Kafka adapter: transactional publishing, topic creation, checkpoint reading (kafka-python)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..codec.errors import BinlogError
from ..codec.table_map import TableMap
from ..records.builder import Checkpoint, Record
from ..records.format import ChunkAssembler, chunk_index
from ..records.outbound import BinlakeOut, Message, Outbound, chunks
from ..records.xa import PREPARED_TOPIC, Prepared, from_prepared_topic
from .producers import Cleanup, Producer, ProducerError, PythonProducer, RdkafkaProducer, TopicAdmin

log = logging.getLogger("binlake.kafka")
OFFSETS_TOPIC = "_offsets"
_FLUSH_TIMEOUT = 30.0  # seconds, the producer's delivery timeout: a broker silent that long is down (retried)
_READ_TIMEOUT = 60.0  # seconds to read a compacted topic (checkpoints, schema history) to its end


class KafkaError(Exception):
    """Kafka refused or failed an operation; the message names the broker and what to check."""


class ClientErrors(logging.Handler):
    """kafka-python's logged failures (on the ``kafka`` logger, whose lines go to a log file): its exceptions
    say "unable to bootstrap", its log says why (a wrong password, an unknown CA)."""

    _CAUSES = ("authenticat", "certificate", "sasl", "handshake")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.messages) < 100:
            self.messages.append(record.getMessage())

    def cause(self) -> str:
        """The first message that names a security failure, else the first one."""
        named = [m for m in self.messages if any(c in m.lower() for c in self._CAUSES)]
        return (named or self.messages or [""])[0]

    def take(self) -> str:
        """``cause()``, and forget the messages (the next failure names its own)."""
        found = self.cause()
        self.messages.clear()
        return found


def offsets_topic(prefix: str) -> str:
    return f"{prefix}.{OFFSETS_TOPIC}"


def prepared_topic(prefix: str) -> str:
    return f"{prefix}.{PREPARED_TOPIC}"


class Publisher:
    """One transactional producer per source: records and checkpoints commit together.

    ``send`` and ``commit`` only queue the work: a thread of the publisher's own talks to Kafka, so
    the daemon keeps reading the source while a Kafka transaction commits (the commit round trips
    are hidden instead of stalling the stream). The queue is bounded in bytes: a slow or absent
    broker stops the daemon's reading (back-pressure). A failure of the thread is raised by the
    next ``send``, ``commit`` or ``wait``; ``abort`` then drops what was not committed.
    """

    def __init__(self, bootstrap: str, prefix: str, transactional_id: str, *, compression: str | None = None,
                 max_record_bytes: int = 900_000, max_queued_bytes: int = 32 << 20,
                 security: Mapping[str, Any] | None = None, out: Outbound | None = None,
                 producer: type[PythonProducer] | type[RdkafkaProducer] | None = None) -> None:
        """``security``: kafka-python's TLS/SASL options (``KafkaConfig.client_options()``); ``out``: what records
        become on Kafka (``kafka.format``; binlake's records by default); ``producer``: the client strategy
        (producers.py; kafka-python by default), with its topic administration."""
        self.prefix = prefix
        self.bootstrap = bootstrap
        self.security = security
        self.transactional_id = transactional_id
        self.max_record_bytes = max_record_bytes
        self.max_message_bytes = max(max_record_bytes * 2, 1 << 20)  # the producer's largest request
        self.max_queued_bytes = max_queued_bytes
        self.out = out if out is not None else BinlakeOut(prefix, max_record_bytes)
        client = producer or PythonProducer
        # A broker that comes back is reconnected to within a second (kafka-python's backoff grows to 30 s,
        # all of it lag once the broker is back after an outage).
        options = {"reconnect_backoff_max_ms": 1000, **(security or {})}
        try:
            client.settle(bootstrap, prefix, transactional_id, options)  # before any checkpoint is read
            # the producer first: librdkafka's transactional start-up goes on while the admin makes sure of topics
            self.producer: Producer = client(bootstrap, transactional_id, compression, self.max_message_bytes,
                                             options)
            self.admin: TopicAdmin = client.admin(bootstrap, options, self.producer)
            self._known = self.admin.names()
            self._admin_lock = threading.Lock()
            # no checkpoint topic, no checkpoint to read back: the publisher's thread creates it before anything else
            # (beside the source's connection) and stops (the daemon retries, and reads it) should another instance
            # of this source have created it meanwhile (the server_id claim and the transactional id keep them away)
            self.new_checkpoints = offsets_topic(prefix) not in self._known
            if not self.new_checkpoints:
                self.producer.ready()  # older instances fenced before their last checkpoint is read
        except Exception as exc:  # a producer whose init failed has closed itself (producers.py)
            for made in ("producer", "admin"):
                if hasattr(self, made):
                    _close_quietly(getattr(self, made), **({"timeout": 0} if made == "producer" else {}))
            raise KafkaError(f"kafka {bootstrap}: {exc}") from None
        self._open = False
        self._cond = threading.Condition()
        # the topics of records queued (as records name them) since their Kafka topics were last made sure of: all
        # of them are created in one request when one is needed (a new table each round trip would add up)
        self._record_topics: dict[str, None] = {}
        self._work: deque[tuple[str, Any, int]] = deque([("offsets", None, 0)] if self.new_checkpoints else [])
        self._queued = 0
        self._busy = False
        self._commits = 0  # queued or under way
        self._closing = False
        self._error: BaseException | None = None
        # where the next message to _prepared goes at the earliest: its end offset when first needed, plus the
        # messages queued for it since (None: to be read again; every queued message takes an offset, so it stays a
        # lower bound until an abort drops some of them)
        self._prepared_next: int | None = None
        self._thread = threading.Thread(target=self._run, name="binlake-kafka", daemon=True)
        self._thread.start()

    # -- the daemon's side

    def send(self, record: Record) -> None:
        """Queue a record for the open Kafka transaction."""
        self._put("send", record, len(record.value), record.topic)

    def send_prepared(self, record: Record) -> int:
        """Queue a record of a prepared XA transaction for _prepared (records/xa.py): where it will be, at the
        earliest (its offset or a lower one)."""
        if self._prepared_next is None:
            topic = prepared_topic(self.prefix)
            self.ensure_topics([topic], "keep")
            self._prepared_next = end_offset(self.bootstrap, topic, self.security)
        offset = self._prepared_next
        self._prepared_next += chunks(len(record.value), self.max_record_bytes)
        self.send(record)
        return offset

    def commit(self, checkpoint: Checkpoint, done: Callable[[], None] | None = None) -> None:
        """Queue the checkpoint and the commit of everything sent before it; ``done`` runs once committed."""
        self._put("commit", (checkpoint, done), 0)

    @property
    def across_tables(self) -> bool:
        """The format orders events across tables (Outbound.across_tables): records are best closed together."""
        return self.out.across_tables

    @property
    def committing(self) -> bool:
        """A commit is queued or under way: the daemon lets the next batch grow meanwhile (group commit)."""
        return self._commits > 0

    def wait(self) -> None:
        """Until everything queued is done (committed or sent); raises the thread's failure."""
        with self._cond:
            while (self._work or self._busy) and self._error is None:
                self._cond.wait()
            self._raise_failure()

    def abort(self) -> None:
        """Drop everything not yet committed (it never becomes visible to read_committed)."""
        with self._cond:
            self._drop_queued()
            while self._busy:
                self._cond.wait()
            self._error = None
            self._prepared_next = None
        self.out.discard()
        if self._open:
            self.producer.abort()
            self._open = False

    def discard(self) -> None:
        """After a Kafka failure: drop the producer without waiting for the broker."""
        self._stop_thread(wait=False)
        _close_quietly(self.producer, timeout=0)
        _close_quietly(self.admin)

    def close(self) -> None:
        try:
            self.abort()
        except ProducerError as exc:  # a fenced or fatal producer cannot abort: the broker aborts its transaction
            # (nothing of it was committed), and the error that ended the run is the one to report
            log.warning("closing: the open Kafka transaction could not be aborted (the broker aborts it): %s", exc)
            self._open = False
        finally:
            self._stop_thread(wait=True)
            self.producer.close()
            self.admin.close()

    def expect(self, record_topics: Iterable[str]) -> None:
        """Records of these topics are coming (``Record.topic``): their Kafka topics are asked for now where the
        client can (librdkafka's), and waited for only when the publisher's thread comes to them."""
        self.admin.create_soon([t for t in self.out.topics(record_topics) if t not in self._known], "delete")

    def mapped(self, record_topic: str, table_map: TableMap, schema_entry: bytes) -> None:
        """A table's map first decoded (RecordBuilder.mapped; the daemon's thread): its Kafka topic asked for, and
        what its records will need made ready by the format meanwhile (Debezium's Avro: its schemas registered)."""
        self.expect([record_topic])
        self.out.mapped(record_topic, table_map, schema_entry)

    def ensure_topic(self, topic: str, cleanup: Cleanup = "delete") -> None:
        if topic not in self._known:
            self.ensure_topics([topic], cleanup)

    def ensure_topics(self, topics: Iterable[str], cleanup: Cleanup = "delete") -> set[str]:
        """The topics that do not exist yet created in one request (a round trip to the controller each: the
        tables of a first commit would otherwise wait for one another); returns those it created."""
        with self._admin_lock:  # the daemon's thread and the publisher's (kafka-python's admin is not thread-safe)
            new = sorted({t for t in topics if t not in self._known})
            if not new:
                return set()
            created = self.admin.create(new, cleanup)
            self._known.update(new)
            self.producer.prepare(new)
            return created

    @property
    def queue_limit(self) -> int:
        """The bytes of records queued beyond which ``send`` waits: the format's own limit if it has a lower one (a
        record becomes many times its size in messages, one at a time: a long queue of them is only memory)."""
        return min(self.max_queued_bytes, self.out.max_queued_bytes or self.max_queued_bytes)

    @property
    def held_bytes(self) -> int:
        """What the publisher holds: the records queued and those its format holds back (the producer bounds the
        messages sent and not yet acknowledged itself: producers.UNACKNOWLEDGED_BYTES)."""
        return self._queued + self.out.held_bytes

    def _put(self, op: str, arg: Any, size: int, topic: str | None = None) -> None:
        limit = self.queue_limit
        with self._cond:
            while self._queued > limit and self._error is None:
                self._cond.wait()
            self._raise_failure()
            self._work.append((op, arg, size))
            if topic is not None and topic not in self._record_topics:
                self._record_topics[topic] = None
                self.expect([topic])
            self._queued += size
            self._commits += op == "commit"
            self._cond.notify_all()

    def _drop_queued(self) -> None:
        """Forget the queued work (the lock is held); a commit under way still finishes or fails."""
        self._commits -= sum(1 for op, _, _ in self._work if op == "commit")
        self._work.clear()
        self._queued = 0

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise self._error

    def _stop_thread(self, wait: bool) -> None:
        with self._cond:
            self._closing = True
            self._work.clear()
            self._cond.notify_all()
        if wait:
            self._thread.join()

    # -- the publisher's thread

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._work and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                op, arg, size = self._work.popleft()
                self._busy = True
            try:
                if op == "send":
                    self._send_now(arg)
                elif op == "commit":
                    self._commit_now(*arg)
                else:
                    self._confirm_offsets()
            except BaseException as exc:  # handed to the daemon's thread, which aborts and retries
                with self._cond:
                    self._error = exc
                    self._drop_queued()
            finally:
                with self._cond:
                    self._busy = False
                    if op == "commit":
                        self._commits -= 1
                    self._queued = max(0, self._queued - size)
                    self._cond.notify_all()

    def _ensure_queued_topics(self) -> None:
        """The Kafka topics of the records queued so far made sure of, in one request."""
        with self._cond:
            topics, self._record_topics = self._record_topics, {}
        self.ensure_topics(self.out.topics(topics))

    def _confirm_offsets(self) -> None:
        """The checkpoint topic the daemon found missing made (once, before the first commit): by this publisher,
        or by another instance of the source, whose checkpoints the daemon then reads (a retry: KafkaError)."""
        if not self.new_checkpoints or offsets_topic(self.prefix) in self._known:
            return
        if offsets_topic(self.prefix) not in self.ensure_topics([offsets_topic(self.prefix)], "compact"):
            raise KafkaError(f"topic {offsets_topic(self.prefix)} was created by another instance of this source "
                             "meanwhile: starting again from its checkpoints")

    def _begin(self) -> None:
        if not self._open:
            self.producer.begin()
            self._open = True

    def _send_now(self, record: Record) -> None:
        """Publish what a record becomes in the output format (``self.out``)."""
        self._send_messages(self.out.messages(record))

    def _send_messages(self, messages: Iterable[Message]) -> None:
        """Send messages in the open Kafka transaction (one per change event in Debezium's formats: kept lean)."""
        known, limit, send = self._known, self.max_message_bytes, self.producer.send
        for message in messages:
            size = 0 if message.value is None else len(message.value)
            if size > limit:
                # binlake's records come in chunks of max_record_bytes; one change event per message (Debezium's
                # formats) cannot be split: stop, naming it. Nothing of the open Kafka transaction is committed, and
                # a restart stops here again until the limit is raised
                raise BinlogError(f"{size:,} bytes, over the largest message the producer sends ({limit:,} bytes: "
                                  "twice kafka.max_record_bytes): raise kafka.max_record_bytes (and the topics' "
                                  "max.message.bytes) to publish it", None, self.out.describe(message))
            if message.topic not in known:
                self._ensure_queued_topics()
                self.ensure_topic(message.topic)
            if not self._open:
                self._begin()
            send(*message)  # the producer bounds what it holds unacknowledged (producers.py)

    def _commit_now(self, checkpoint: Checkpoint, done: Callable[[], None] | None) -> None:
        """Write the checkpoint and commit everything sent since the last commit, atomically."""
        self._confirm_offsets()
        self._ensure_queued_topics()
        self._send_messages(self.out.before_commit())
        self._begin()
        fields = {"file": checkpoint.file, "position": checkpoint.position, "gtid_set": checkpoint.gtid_set,
                  "seq": str(checkpoint.seq)}
        if checkpoint.source:
            fields["source"] = checkpoint.source
        if checkpoint.file_offset:
            fields["file_offset"] = checkpoint.file_offset
        if checkpoint.snapshot is not None:
            fields["snapshot"] = checkpoint.snapshot
        if checkpoint.resnapshot is not None:
            fields["resnapshot"] = checkpoint.resnapshot
        if checkpoint.prepared:
            fields["prepared"] = checkpoint.prepared
        value = json.dumps(fields).encode()
        self.producer.send(offsets_topic(self.prefix), self.transactional_id.encode(), value, [])
        # Every record must be acknowledged before the commit: a failed send must never be followed
        # by a checkpoint that claims it (the error propagates; the daemon aborts and retries).
        self._drain()
        self.producer.commit()
        self._open = False
        if done is not None:
            done()

    def _drain(self) -> None:
        """Wait until everything sent so far is acknowledged (still inside the open transaction)."""
        self.producer.flush(_FLUSH_TIMEOUT)


def _close_quietly(client: Any, **options: Any) -> None:
    """Close a Kafka client after a failure (``options``: its close's, e.g. the producer's timeout=0)."""
    try:
        client.close(**options)
    except Exception as exc:  # the connection is already broken
        log.debug("closing after failure: %s", exc)


def read_checkpoint(bootstrap: str, prefix: str, source_id: str,
                    security: Mapping[str, Any] | None = None, exists: bool = False) -> dict[str, Any] | None:
    """The last committed checkpoint of ``source_id`` (read_committed), or None. ``exists``: the offsets
    topic is known to exist (the daemon's publisher made sure): one the broker does not show yet (metadata
    just after a restart) is an error to retry, never "no checkpoint" (which would start over)."""
    value = read_compacted(bootstrap, offsets_topic(prefix), security, exists).get(source_id.encode())
    return json.loads(value) if value else None


def read_compacted(bootstrap: str, topic: str, security: Mapping[str, Any] | None = None,
                   exists: bool = False) -> dict[bytes, bytes]:
    """The last committed value of each key of a compacted topic ({} when the topic does not exist)."""
    return {key: value for key, (value, _) in read_compacted_records(bootstrap, topic, security, exists).items()}


def read_compacted_records(bootstrap: str, topic: str, security: Mapping[str, Any] | None = None,
                           exists: bool = False) -> dict[bytes, tuple[bytes, int]]:
    """The last committed value of each key of a compacted topic and its record's timestamp (ms).
    ``exists``: raise KafkaError where the broker does not show the topic and its partitions."""
    consumer = _consumer(bootstrap, security)
    try:
        deadline = time.monotonic() + _READ_TIMEOUT
        partitions = _partitions(consumer, bootstrap, topic, exists, deadline)
        if not partitions:
            return {}
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        latest: dict[bytes, tuple[bytes, int]] = {}
        for msg in _to_the_end(consumer, bootstrap, topic, partitions, deadline):
            if msg.key is not None and msg.value:
                latest[msg.key] = (msg.value, msg.timestamp)
        return latest
    finally:
        consumer.close()


def end_offset(bootstrap: str, topic: str, security: Mapping[str, Any] | None = None) -> int:
    """The end of a topic's (only) partition for read_committed readers (its last stable offset)."""
    consumer = _consumer(bootstrap, security)
    try:
        partitions = _partitions(consumer, bootstrap, topic, True, time.monotonic() + _READ_TIMEOUT)
        return int(consumer.end_offsets(partitions[:1])[partitions[0]])
    finally:
        consumer.close()


def read_prepared(bootstrap: str, prefix: str, security: Mapping[str, Any] | None,
                  wanted: list[Prepared]) -> dict[str, list[Record]]:
    """The records of prepared XA transactions read back from ``<prefix>._prepared`` (read_committed, from the
    lowest of their offsets): xid -> records, in order. Raises KafkaError when one's records are not all there."""
    topic = prepared_topic(prefix)
    want = {(p.xid, str(p.seq)): p for p in wanted}
    found: dict[str, list[Record]] = {}
    consumer = _consumer(bootstrap, security)
    try:
        deadline = time.monotonic() + _READ_TIMEOUT
        partitions = _partitions(consumer, bootstrap, topic, True, deadline)
        consumer.assign(partitions)
        consumer.seek(partitions[0], min(p.offset or 0 for p in wanted))
        assembler = ChunkAssembler()
        for msg in _to_the_end(consumer, bootstrap, topic, partitions, deadline):
            headers = list(msg.headers or ())
            chunk = chunk_index(dict(headers))
            if chunk is not None and chunk[0] and not assembler.pending:
                continue  # the end of a record that began before the offset read from
            value = assembler.feed(topic, dict(headers), msg.value, topic, msg.offset)
            if value is None:
                continue
            xid, prepare, record = from_prepared_topic(headers, value)
            if (xid, prepare) in want:
                found.setdefault(xid, []).append(record)
            if all(len(found.get(p.xid, ())) >= p.count for p in wanted):
                break
    finally:
        consumer.close()
    for p in wanted:
        if len(found.get(p.xid, ())) != p.count:
            raise KafkaError(f"kafka {bootstrap}: {topic} holds {len(found.get(p.xid, ()))} of the {p.count} records "
                             f"of prepared XA transaction {p.xid} (prepared at {p.seq}) from offset {p.offset}")
    return found


def _consumer(bootstrap: str, security: Mapping[str, Any] | None) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**(security or {}), bootstrap_servers=bootstrap, isolation_level="read_committed",
                         enable_auto_commit=False, group_id=None, consumer_timeout_ms=2000)


def _partitions(consumer: Any, bootstrap: str, topic: str, exists: bool, deadline: float) -> list[Any]:
    """The topic's partitions ([] when it does not exist); ``exists``: it does, so wait until the broker shows
    them (metadata lags just after a creation or a restart), raising KafkaError at ``deadline``."""
    from kafka import TopicPartition

    while True:
        shown = topic in consumer.topics()
        partitions = [TopicPartition(topic, p) for p in (consumer.partitions_for_topic(topic) or ())] \
            if shown else []
        if partitions or not exists:
            return partitions
        if time.monotonic() > deadline:
            raise KafkaError(f"kafka {bootstrap}: topic {topic} exists but the broker does not show its "
                             f"partitions after {_READ_TIMEOUT:.0f} s")
        time.sleep(0.1)


def _to_the_end(consumer: Any, bootstrap: str, topic: str, partitions: list[Any], deadline: float) -> Iterator[Any]:
    """The assigned consumer's messages up to the partitions' ends as they are now (KafkaError at ``deadline``)."""
    end = consumer.end_offsets(partitions)
    while any(consumer.position(tp) < end[tp] for tp in partitions):
        if time.monotonic() > deadline:  # the broker went away while we read
            raise KafkaError(f"kafka {bootstrap}: topic {topic} not read to its end in {_READ_TIMEOUT:.0f} s")
        for records in consumer.poll(timeout_ms=1000).values():
            yield from records
