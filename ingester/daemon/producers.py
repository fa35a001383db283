"""The transactional Kafka producer behind the publisher, as strategies of one interface.

``PythonProducer`` (kafka-python) serves binlake's format: few large records, where a client's cost per
message does not matter. ``RdkafkaProducer`` (confluent-kafka, librdkafka) serves the Debezium formats: a
message per row change, where kafka-python's pure-Python batching costs ~125 us a message and librdkafka
~6 us (bench/results/debezium.md). Both fence older instances with the transactional id and make every
message of a transaction visible with its checkpoint, or none.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

_TRANSACTION_TIMEOUT_MS = 900_000  # a huge binlog transaction is one Kafka transaction: the broker maximum
_RETRY_BACKOFF_MS = 10


class ProducerError(Exception):
    """A send or transaction step failed (retried by the daemon from its last checkpoint)."""


class Producer(Protocol):
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


class PythonProducer:
    def __init__(self, bootstrap: str, transactional_id: str, compression: str | None, max_request_size: int,
                 options: Mapping[str, Any]) -> None:
        from kafka import KafkaProducer

        self._futures: list[Any] = []
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

    def flush(self, timeout: float) -> None:
        self._producer.flush(timeout=timeout)
        for future in self._futures:
            future.get(timeout=0)
        self._futures.clear()

    def commit(self) -> None:
        self._producer.commit_transaction()

    def abort(self) -> None:
        self._futures.clear()
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
            # a key's partition as Kafka's Java producer (Debezium's, and kafka-python's for binlake's format) picks
            # it on topics of several partitions, not librdkafka's own CRC32 default
            "partitioner": "murmur2_random",
            # its log lines go where kafka-python's do (cli/logs.py: a file, not the terminal)
            "error_cb": self._client_error, "logger": logging.getLogger("kafka.librdkafka")})
        self._sent = 0
        # init_transactions before any broker is up finds no coordinator and waits for librdkafka's 500 ms
        # coordinator timer: the cluster's metadata first (a broker connection), which takes a few milliseconds
        self._call(self._client.list_topics, None, 15)
        self._call(self._client.init_transactions, 15)  # fences any older instance with the same id

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
        self._call(self._client.begin_transaction)

    def prepare(self, topics: Sequence[str]) -> None:
        pass  # librdkafka asks for the metadata of the new topics of its queued messages together

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]) -> None:
        extra: Any = list(headers) if headers else None  # confluent-kafka takes a list (or dict), not a tuple
        while True:
            try:
                self._client.produce(topic, value, key, headers=extra, on_delivery=self._delivered)
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
        self._client.purge()
        self._client.flush(0 if timeout is None else timeout)
