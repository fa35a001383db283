"""A real Debezium MariaDB connector in the harness's Kafka Connect, and the messages of a topic prefix: what
binlake's Debezium formats are compared with (issue 24)."""

from __future__ import annotations

import time
from typing import Any

import orjson


def start_connector(kafka_connect, server, kafka, name: str, db: str, **options: str) -> None:
    """Debezium's MariaDB connector named ``name`` (its topic prefix too) on database ``db``, streaming once this
    returns; ``options`` add to or replace its configuration (dots as underscores allowed)."""
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "tasks.max": "1",
        "database.hostname": "127.0.0.1", "database.port": str(server.port), "database.user": "root",
        "database.password": "", "database.server.id": "7101", "topic.prefix": name,
        "database.include.list": db, "snapshot.mode": "initial",
        "schema.history.internal.kafka.bootstrap.servers": kafka.bootstrap,
        "schema.history.internal.kafka.topic": f"{name}.history",
        "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1"}
    config |= {key.replace("_", "."): value for key, value in options.items()}
    log = kafka_connect.log_file
    start = log.stat().st_size
    kafka_connect.create(name, config)
    kafka_connect.wait_running(name)
    # RUNNING comes before the snapshot: writes made then would be in it (op r, not the changes compared)
    deadline = time.monotonic() + 60
    while b"Keepalive thread is running" not in log.read_bytes()[start:]:
        assert time.monotonic() < deadline, f"connector {name} did not start streaming within 60 s"
        time.sleep(0.2)


def messages(kafka, prefix: str, headers: bool = False) -> dict[str, list[Any]]:
    """Every committed message of the prefix's topics (``<prefix>.`` and the prefix itself), per topic in
    order: (key, value) bytes, with ``headers`` (key, value, headers)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    try:
        topics = [t for t in consumer.topics() if t == prefix or t.startswith(prefix + ".")]
        parts = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        if not parts:
            return {}
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        out: dict[str, list[Any]] = {t: [] for t in topics}
        while any(consumer.position(tp) < end[tp] for tp in parts):
            for tp, batch in consumer.poll(timeout_ms=1000).items():
                out[tp.topic] += [(m.key, m.value, m.headers) if headers else (m.key, m.value) for m in batch]
        return out
    finally:
        consumer.close()


def wait_for(kafka, prefix: str, topic: str, count: int, kafka_connect, timeout: float = 90.0) -> None:
    """Until ``<prefix>.<topic>`` holds ``count`` messages (else the connector's state and errors)."""
    deadline = time.monotonic() + timeout
    have = 0
    while time.monotonic() < deadline:
        have = len(messages(kafka, prefix).get(f"{prefix}.{topic}", []))
        if have >= count:
            return
        time.sleep(0.5)
    errors = [line for line in kafka_connect.log_file.read_text(errors="replace").splitlines()
              if " ERROR " in line][-3:]
    status = kafka_connect._get(f"/connectors/{prefix}/status")
    trace = [line for task in status["tasks"] for line in task.get("trace", "").splitlines()]
    last = max((i for i, line in enumerate(trace) if line.startswith("Caused by")), default=0)
    causes = [line for line in trace[:last] if line.startswith("Caused by")] + trace[last:last + 8]
    raise AssertionError(f"{prefix}.{topic} has {have} messages after {timeout} s, not {count}; connector "
                         f"{status['connector']['state']}, tasks {[t['state'] for t in status['tasks']]}: "
                         + "\n".join(causes) + f"; errors logged: {errors}")


def decoded(message: tuple[bytes | None, bytes | None]) -> tuple[Any, Any]:
    key, value = message
    return (None if key is None else orjson.loads(key)), (None if value is None else orjson.loads(value))
