"""The local Kafka harness: a KRaft broker from Maven Central jars serves producers, consumer groups and
transactions, keeps its data across restarts, and leaves no process or temporary datadir behind."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource

from ingester.devstack import free_tcp_port
from ingester.devstack.kafka import KafkaBroker

pytestmark = pytest.mark.integration

READ_TIMEOUT = 30.0


def read_to_end(broker: KafkaBroker, topic: str, **config: Any) -> list[bytes]:
    """Every record value of the topic up to its current end, partition by partition; with
    isolation_level="read_committed" the end is the last stable offset."""
    with KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, **config) as consumer:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        end = consumer.end_offsets(partitions)
        values: dict[TopicPartition, list[bytes]] = {tp: [] for tp in partitions}
        deadline = time.monotonic() + READ_TIMEOUT
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"{topic} not read to {end} within {READ_TIMEOUT:g}s"
            for tp, records in consumer.poll(timeout_ms=500).items():
                values[tp] += [record.value for record in records]
        return [value for tp in partitions for value in values[tp]]


def topic_config(broker: KafkaBroker, topic: str, key: str) -> str:
    with broker.admin() as admin:
        configs = admin.describe_configs([ConfigResource("topic", topic, {key: None})], config_filter="all")
    return configs["topic"][topic][key]["value"]


def test_records_round_trip_through_a_consumer_group(kafka: KafkaBroker) -> None:
    kafka.create_topic("harness-group", partitions=2)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap) as producer:
        sent = [producer.send("harness-group", key=b"k%d" % (i % 3), value=b"v%d" % i) for i in range(20)]
        producer.flush()
    partition_of_key = {}
    for i, future in enumerate(sent):
        meta = future.get(timeout=10)
        assert partition_of_key.setdefault(i % 3, meta.partition) == meta.partition  # keys stay on one partition

    received: list[bytes] = []
    with KafkaConsumer(
        "harness-group", bootstrap_servers=kafka.bootstrap, group_id="harness", auto_offset_reset="earliest"
    ) as consumer:
        deadline = time.monotonic() + READ_TIMEOUT
        while len(received) < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                received += [record.value for record in records]
        consumer.commit()
        committed = sum(consumer.committed(TopicPartition("harness-group", p)) or 0 for p in (0, 1))
    assert sorted(received) == sorted(b"v%d" % i for i in range(20))
    assert committed == 20


def test_read_committed_sees_only_committed_transactions(kafka: KafkaBroker) -> None:
    kafka.create_topic("harness-txn")
    with KafkaProducer(bootstrap_servers=kafka.bootstrap, transactional_id="harness-txn") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("harness-txn", b"committed-1")
        producer.send("harness-txn", b"committed-2")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("harness-txn", b"aborted")
        producer.flush()  # the aborted record reaches the log: abort alone would drop it unsent
        producer.abort_transaction()

    assert read_to_end(kafka, "harness-txn", isolation_level="read_committed") == [b"committed-1", b"committed-2"]
    assert read_to_end(kafka, "harness-txn", isolation_level="read_uncommitted") == [
        b"committed-1",
        b"committed-2",
        b"aborted",
    ]


def test_compacted_topics(kafka: KafkaBroker) -> None:
    kafka.create_topic("harness-compacted", compacted=True)
    kafka.create_topic("harness-deleted")
    assert topic_config(kafka, "harness-compacted", "cleanup.policy") == "compact"
    assert topic_config(kafka, "harness-deleted", "cleanup.policy") == "delete"


def test_restart_keeps_the_data(make_kafka: Callable[..., KafkaBroker], tmp_path: Path) -> None:
    broker = make_kafka(datadir=tmp_path / "kafka", options={"log.retention.ms": 123456789})
    broker.create_topic("harness-kept", partitions=3)
    with KafkaProducer(bootstrap_servers=broker.bootstrap) as producer:
        for i in range(30):
            producer.send("harness-kept", b"r%d" % i, partition=i % 3)
    before = read_to_end(broker, "harness-kept")

    broker.stop()
    assert not broker.is_running()
    broker.start()

    assert sorted(read_to_end(broker, "harness-kept")) == sorted(before) == sorted(b"r%d" % i for i in range(30))
    assert topic_config(broker, "harness-kept", "retention.ms") == "123456789"


def test_persistent_datadir_is_stoppable_from_another_process(tmp_path: Path) -> None:
    """The `binlake devstack up|down|status` pattern: a fixed datadir and port, a detached broker."""
    datadir, port = tmp_path / "kafka", free_tcp_port()
    up = KafkaBroker(datadir=datadir, port=port).start(detach=True)
    try:
        up.create_topic("harness-detached")
        with KafkaProducer(bootstrap_servers=up.bootstrap) as producer:
            producer.send("harness-detached", b"kept")
        status = KafkaBroker(datadir=datadir, port=port)
        assert status.is_running()
        with pytest.raises(RuntimeError, match="already runs"):
            status.start()
        status.stop()
        assert not up.is_running()
    finally:
        up.stop()

    with KafkaBroker(datadir=datadir, port=port) as again:
        assert again.bootstrap == f"127.0.0.1:{port}"
        assert read_to_end(again, "harness-detached") == [b"kept"]
    assert datadir.exists()
    assert not again.is_running()


def test_close_ends_the_process_and_removes_the_temporary_datadir() -> None:
    with KafkaBroker() as broker:
        datadir = broker.datadir
        pid = int((datadir / "kafka.pid").read_text())
        assert Path(f"/proc/{pid}").exists()
        assert broker.log_file.read_text().count("Kafka Server started") == 1
    assert not Path(f"/proc/{pid}").exists()
    assert not datadir.exists()
