"""The transactional Kafka producer behind the publisher, as strategies of one interface.

``PythonProducer`` (kafka-python) serves binlake's format: few large records, where a client's cost per
message does not matter. ``RdkafkaProducer`` (confluent-kafka, librdkafka) serves the Debezium formats: a
message per row change, where kafka-python's pure-Python batching costs ~125 us a message and librdkafka
~6 us (bench/results/debezium.md). Both fence older instances with the transactional id and make every
message of a transaction visible with its checkpoint, or none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from .open_transactions import settle

_TRANSACTION_TIMEOUT_MS = 900_000  # a huge binlog transaction is one Kafka transaction: the broker maximum
_RETRY_BACKOFF_MS = 10
UNACKNOWLEDGED_BYTES = 16 << 20  # at most this much (keys and values) sent and not yet acknowledged in memory
_HELD_TIMEOUT = 30.0  # seconds, the delivery timeout: a broker silent that long is down (retried)
_ADMIN_TIMEOUT = 15.0  # seconds for a metadata or CreateTopics answer


# how a topic keeps its messages: Kafka's default (deleted after the broker's retention), compacted (the last of each
# key), or kept (never deleted: retention.ms=-1)
Cleanup = Literal["delete", "compact", "keep"]


class ProducerError(Exception):
    """A send or transaction step failed (retried by the daemon from its last checkpoint)."""


class TopicAdmin(Protocol):
    def __init__(self, bootstrap: str, options: Mapping[str, Any], producer: Any) -> None:
        """``producer``: the producer strategy it serves (whose connection may answer for it)."""

    def names(self) -> set[str]:
        """The topics the cluster has."""

    def create(self, topics: Sequence[str], cleanup: Cleanup) -> set[str]:
        """Create the topics (one partition each) in one request; returns those created (the others existed).
        Raises ProducerError naming the first topic the broker refused and its reason."""

    def create_soon(self, topics: Sequence[str], cleanup: Cleanup) -> None:
        """Ask for the topics now where the client can without waiting (``create`` then waits for the answer);
        thread-safe."""

    def close(self) -> None: ...


class Producer(Protocol):
    def ready(self) -> None:
        """Until the producer has fenced older instances of its transactional id (raises why it could not)."""

    def begin(self) -> None: ...

    def send(self, topic: str, key: bytes | None, value: bytes | None,
             headers: Sequence[tuple[str, bytes]]) -> None: ...

    def flush(self, timeout: float) -> None:
        """Until every message sent is acknowledged; raises ProducerError for one that failed."""

    def prepare(self, topics: Sequence[str]) -> None:
        """Topics just created that messages will go to: the client learns their partitions together."""

    def commit(self) -> None: ...

    def abort(self) -> None: ...

    def close(self, timeout: float | None = None) -> None: ...


class PythonAdmin:
    def __init__(self, bootstrap: str, options: Mapping[str, Any], producer: Any) -> None:
        from kafka.admin import KafkaAdminClient

        self._client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="binlake-admin", **options)

    def names(self) -> set[str]:
        return set(self._client.list_topics())

    def create(self, topics: Sequence[str], cleanup: Cleanup) -> set[str]:
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError, for_code

        result = self._client.create_topics(
            [NewTopic(t, num_partitions=1, replication_factor=1, topic_configs=_configs(cleanup)) for t in topics],
            raise_errors=False)
        created = set(topics)
        for answer in result.get("topics", ()):
            if answer["error_code"]:
                created.discard(answer["name"])
                error = for_code(answer["error_code"])
                if error is not TopicAlreadyExistsError:
                    raise _refused(answer["name"], answer.get("error_message") or error.__name__)
        return created

    def create_soon(self, topics: Sequence[str], cleanup: Cleanup) -> None:
        pass  # kafka-python's admin client waits for its answers (and is not thread-safe): create() asks

    def close(self) -> None:
        self._client.close()


class RdkafkaAdmin:
    def __init__(self, bootstrap: str, options: Mapping[str, Any], producer: RdkafkaProducer) -> None:
        from confluent_kafka.admin import AdminClient

        self._producer = producer

        config: dict[str, Any] = {**rdkafka_options(options), "bootstrap.servers": bootstrap,
                                  "client.id": "binlake-admin", "reconnect.backoff.ms": 10,
                                  "logger": logging.getLogger("kafka.librdkafka")}
        self._client = AdminClient(config)
        self._lock = threading.RLock()  # (a future already answered calls back at once)
        self._asking = False  # a request under way
        self._pending: dict[str, Any] = {}  # topic: the future of its CreateTopics answer
        self._wanted: dict[str, Cleanup] = {}  # topics asked for while a request was under way

    def names(self) -> set[str]:
        from confluent_kafka import KafkaException

        try:  # the producer's connection, already under way (the admin's own connects meanwhile)
            return set(self._producer.metadata().topics)
        except KafkaException as exc:
            raise ProducerError(f"listing topics: {exc.args[0] if exc.args else exc}") from None

    def create(self, topics: Sequence[str], cleanup: Cleanup) -> set[str]:
        from confluent_kafka import KafkaError, KafkaException

        with self._lock:  # these, with every topic wanted so far: asked for now (a request under way or not)
            self._wanted.update(dict.fromkeys((t for t in topics if t not in self._pending), cleanup))
            if self._wanted:
                self._ask_wanted()
        created = set()
        for topic in topics:
            with self._lock:
                future = self._pending.pop(topic)
            try:
                future.result()
                created.add(topic)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if not isinstance(error, KafkaError):
                    raise _refused(topic, str(exc)) from None
                if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise _refused(topic, error.str()) from None
        return created

    def create_soon(self, topics: Sequence[str], cleanup: Cleanup) -> None:
        with self._lock:
            new = [t for t in topics if t not in self._pending and t not in self._wanted]
            if not new:
                return
            self._wanted.update(dict.fromkeys(new, cleanup))
            if not self._asking:
                self._ask_wanted()

    def _ask_wanted(self) -> None:
        """Every topic wanted so far in one request (one per cleanup policy), and again when it is answered: the
        controller takes requests one after another and answers one of many topics about as soon as one of one
        (300 tables' topics asked for one by one took 8 s). The lock is held."""
        wanted, self._wanted = self._wanted, {}
        self._asking = False
        for cleanup in dict.fromkeys(wanted.values()):
            futures = self._request([t for t, c in wanted.items() if c == cleanup and t not in self._pending], cleanup)
            if futures:
                self._asking = True
                next(iter(futures)).add_done_callback(self._answered)

    def _answered(self, _: Any) -> None:  # on the admin client's thread
        with self._lock:
            self._asking = False
            if self._wanted:
                self._ask_wanted()

    def _request(self, topics: list[str], cleanup: Cleanup) -> list[Any]:
        """One CreateTopics request (the lock is held): its answers' futures."""
        from confluent_kafka.admin import NewTopic

        if not topics:
            return []
        futures = self._client.create_topics(
            [NewTopic(t, num_partitions=1, replication_factor=1, config=_configs(cleanup)) for t in topics],
            request_timeout=_ADMIN_TIMEOUT, operation_timeout=_ADMIN_TIMEOUT)
        self._pending.update(futures)
        return list(futures.values())

    def close(self) -> None:
        pass  # librdkafka's client goes with its last reference


class PythonProducer:
    admin: type[TopicAdmin] = PythonAdmin
    settle = staticmethod(settle)  # transactions a broker left open, before the producer starts (open_transactions.py)

    def __init__(self, bootstrap: str, transactional_id: str, compression: str | None, max_request_size: int,
                 options: Mapping[str, Any]) -> None:
        from kafka import KafkaProducer

        self._futures: list[Any] = []
        self._held = 0  # bytes sent since the last flush: kafka-python has no bounded send buffer, so a huge binlog
        # transaction would otherwise pile up in memory and its oldest batches expire
        self._producer = KafkaProducer(
            **options, bootstrap_servers=bootstrap, transactional_id=transactional_id, enable_idempotence=True,
            acks="all", compression_type=compression, max_request_size=max_request_size, linger_ms=5,
            client_id=f"binlake-{transactional_id}",
            # A transaction's first send right after the previous commit is answered "concurrent
            # transactions" until the broker has written the commit markers, then retried after this
            # backoff: kafka-python's default (100 ms) would put 100 ms into every commit.
            retry_backoff_ms=_RETRY_BACKOFF_MS,
            # Fail fast when the broker is gone, so the daemon backs off instead of hanging.
            max_block_ms=15_000, request_timeout_ms=10_000, delivery_timeout_ms=30_000,
            transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS)
        try:
            self._producer.init_transactions()  # fences any older instance with the same id
        except BaseException:
            # else it would go on in the background and, once the broker is back, take the transactional id
            # from the daemon's next producer (fencing it mid-transaction)
            self.close(0)
            raise

    def ready(self) -> None:
        pass  # kafka-python's init_transactions ran in the constructor

    def begin(self) -> None:
        self._producer.begin_transaction()

    def prepare(self, topics: Sequence[str]) -> None:
        # kafka-python (3.0.12) learns a new topic's partitions when the first message to it is sent, waiting for a
        # metadata refresh each time, and its metadata refreshes at most every 100 ms (ClusterMetadata is made
        # without the producer's retry_backoff_ms): 100 ms per topic, 30 s for a first commit of 300 tables. Its
        # sender is told of all of them at once and the refreshes follow our backoff (both where the client has
        # them: without, it is only slower).
        metadata, sender = getattr(self._producer, "_metadata", None), getattr(self._producer, "_sender", None)
        config = getattr(metadata, "config", None)
        if isinstance(config, dict) and "retry_backoff_ms" in config:
            config["retry_backoff_ms"] = _RETRY_BACKOFF_MS
        add_topic = getattr(sender, "add_topic", None)
        if add_topic is not None:
            for topic in topics:
                add_topic(topic)

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]) -> None:
        self._futures.append(self._producer.send(topic, key=key, value=value, headers=list(headers)))
        self._held += len(value or b"") + len(key or b"")
        if self._held > UNACKNOWLEDGED_BYTES:
            self.flush(_HELD_TIMEOUT)

    def flush(self, timeout: float) -> None:
        self._held = 0
        self._producer.flush(timeout=timeout)
        for future in self._futures:
            future.get(timeout=0)
        self._futures.clear()

    def commit(self) -> None:
        self._producer.commit_transaction()

    def abort(self) -> None:
        self._futures.clear()
        self._held = 0
        self._producer.abort_transaction()

    def close(self, timeout: float | None = None) -> None:
        self._producer.close(timeout=timeout)


def rdkafka_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python's security keywords (``KafkaConfig.client_options()``) as librdkafka's settings."""
    names = {"security_protocol": "security.protocol", "sasl_mechanism": "sasl.mechanism",
             "sasl_plain_username": "sasl.username", "sasl_plain_password": "sasl.password",
             "ssl_cafile": "ssl.ca.location", "ssl_certfile": "ssl.certificate.location",
             "ssl_keyfile": "ssl.key.location", "reconnect_backoff_max_ms": "reconnect.backoff.max.ms"}
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key == "ssl_check_hostname":
            out["ssl.endpoint.identification.algorithm"] = "https" if value else "none"
        elif value is not None:
            out[names[key]] = value
    return out


class RdkafkaProducer:
    admin: type[TopicAdmin] = RdkafkaAdmin
    settle = staticmethod(settle)  # (with kafka-python's admin and producer: librdkafka has no such calls)

    def __init__(self, bootstrap: str, transactional_id: str, compression: str | None, max_request_size: int,
                 options: Mapping[str, Any]) -> None:
        from confluent_kafka import Producer as Client

        self._errors: list[str] = []
        self._client = Client({
            **rdkafka_options(options), "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
            "enable.idempotence": True, "acks": "all", "compression.type": compression or "none", "linger.ms": 5,
            "message.max.bytes": max_request_size, "client.id": f"binlake-{transactional_id}",
            "retry.backoff.ms": _RETRY_BACKOFF_MS, "request.timeout.ms": 10_000, "message.timeout.ms": 30_000,
            "transaction.timeout.ms": _TRANSACTION_TIMEOUT_MS, "reconnect.backoff.max.ms": 1000,
            # librdkafka connects to the brokers the bootstrap server names only after its sparse-connect interval
            # (half this backoff): 50 ms of every start with the default 100 ms
            "reconnect.backoff.ms": 10,
            # One produce request at a time per broker. With several in flight, a partition's first batch refused
            # as retriable (NOT_LEADER_OR_FOLLOWER: a topic just created, whose leader the broker has not taken up
            # yet) while its next batch, already sent, is accepted (a broker takes any first sequence number from a
            # producer the partition has no state of) is "implicitly acked" by librdkafka: reported delivered, never
            # retried, and committed without it (a table's first change event lost). One in flight: the refused
            # batch is sent again before anything after it.
            "max.in.flight.requests.per.connection": 1,
            # its queue bounded as kafka-python's sends are (a full queue: send serves deliveries until there is room),
            # without stopping the pipeline for a flush
            "queue.buffering.max.kbytes": UNACKNOWLEDGED_BYTES >> 10,
            # a key's partition as Kafka's Java producer (Debezium's, and kafka-python's for binlake's format) picks
            # it on topics of several partitions, not librdkafka's own CRC32 default
            "partitioner": "murmur2_random",
            # its log lines go where kafka-python's do (cli/logs.py: a file, not the terminal)
            "error_cb": self._client_error, "logger": logging.getLogger("kafka.librdkafka"),
            # a report of the failed deliveries only (a Python callback for each message: ~0.4 us of each)
            "on_delivery": self._delivered, "delivery.report.only.error": True})
        self._sent = 0
        # The transactional start-up (two round trips or more) runs beside the daemon's own (the admin's topics, the
        # source's connection): librdkafka waits without the GIL; the first transaction waits for it (ready)
        self._failed: BaseException | None = None
        self._starting: threading.Thread | None = threading.Thread(target=self._start, name="binlake-kafka-init",
                                                                   daemon=True)
        self._starting.start()

    def _start(self) -> None:
        try:
            # init_transactions before any broker is up finds no coordinator and waits for librdkafka's 500 ms
            # coordinator timer: the cluster's metadata first (a broker connection), which takes a few milliseconds
            self._call(self._client.list_topics, None, _ADMIN_TIMEOUT)
            self._call(self._client.init_transactions, _ADMIN_TIMEOUT)  # fences any older instance with the same id
        except BaseException as exc:  # raised by ready()
            self._failed = exc

    def metadata(self) -> Any:
        """The cluster's metadata (confluent-kafka's ClusterMetadata), through the producer's connection."""
        return self._client.list_topics(None, _ADMIN_TIMEOUT)

    def ready(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None
        if self._failed is not None:
            raise self._failed

    def _client_error(self, error: Any) -> None:
        if error.fatal():
            self._errors.append(str(error))

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self._errors.append(f"{message.topic()}: {error}")

    @staticmethod
    def _call(step: Any, *args: Any) -> None:
        from confluent_kafka import KafkaException

        try:
            step(*args)
        except KafkaException as exc:
            raise ProducerError(str(exc.args[0] if exc.args else exc)) from None

    def begin(self) -> None:
        self.ready()
        self._call(self._client.begin_transaction)

    def prepare(self, topics: Sequence[str]) -> None:
        pass  # librdkafka asks for the metadata of the new topics of its queued messages together

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]) -> None:
        while True:
            try:
                if headers:  # confluent-kafka takes a list (or dict), not a tuple
                    self._client.produce(topic, value, key, headers=list(headers))
                else:
                    self._client.produce(topic, value, key)
                break
            except BufferError:  # librdkafka's queue is full: serve deliveries until there is room
                self._client.poll(0.05)
        self._sent += 1
        if not self._sent % 1000:
            self._client.poll(0)
        if self._errors:
            raise ProducerError(self._errors[0])

    def flush(self, timeout: float) -> None:
        left = self._client.flush(timeout)
        if self._errors:
            raise ProducerError(self._errors[0])
        if left:
            raise ProducerError(f"{left} messages not acknowledged within {timeout:g} s")

    def commit(self) -> None:
        self._call(self._client.commit_transaction, 30)

    def abort(self) -> None:
        # librdkafka aborts only once the delivery reports of what was sent are served: the queued and in-flight
        # messages are purged (none of them commits), their reports polled, then the transaction aborted
        self._client.purge()
        self._client.flush(10)
        self._errors.clear()
        self._call(self._client.abort_transaction, 30)

    def close(self, timeout: float | None = None) -> None:
        from confluent_kafka import KafkaException

        self._client.purge()  # what is still queued belongs to an aborted or unfinished transaction: never committed
        try:
            self._client.flush(0 if timeout is None else timeout)
        except KafkaException as exc:  # a producer fenced or in a fatal state reports it here too: already handled
            logging.getLogger(__name__).debug("closing the producer: %s", exc)


def _configs(cleanup: Cleanup) -> dict[str, str]:
    return {"compact": {"cleanup.policy": "compact"}, "keep": {"retention.ms": "-1", "retention.bytes": "-1"}}.get(
        cleanup, {})


def _refused(topic: str, reason: str) -> ProducerError:
    return ProducerError(f"creating topic {topic}: {reason}")
