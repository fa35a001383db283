"""Transactions Kafka left open (ingester/daemon/open_transactions.py): a broker that completes a transaction without
writing one partition's marker (seen when a killed single broker restarts and is fenced for a few seconds: it takes
the leaderless partitions for deleted) leaves that partition's records open; the producer's next marker there decides
them. Here the broker is made to leave them open deterministically: with partition verification off it takes a
transaction's records for a partition the transaction never added, and its commit or abort writes no marker there.
Proof: the daemon's start gives them the outcome the coordinator recorded, read by a read_committed consumer (the land
job's isolation) against read_uncommitted's; an outcome the coordinator no longer holds stops with one line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from ingester.cli.main import main
from ingester.daemon.open_transactions import UnknownOutcome, settle

pytestmark = pytest.mark.integration
UNVERIFIED = {"transaction.partition.verification.enable": "false"}  # (the broker's guard against this, off)


@contextmanager
def _unjoined(topic: str) -> Iterator[None]:
    """While inside, kafka-python's transactional producers send to ``topic`` without adding its partition to their
    transaction: the coordinator never learns of it, so no marker is written there."""
    from kafka.producer.transaction_manager import TransactionManager

    add = TransactionManager.maybe_add_partition_to_transaction
    allowed = TransactionManager.is_send_to_partition_allowed
    TransactionManager.maybe_add_partition_to_transaction = (  # type: ignore[method-assign]
        lambda self, tp: None if tp.topic == topic else add(self, tp))
    TransactionManager.is_send_to_partition_allowed = (  # type: ignore[method-assign]
        lambda self, tp: tp.topic == topic or allowed(self, tp))
    try:
        yield
    finally:
        TransactionManager.maybe_add_partition_to_transaction = add  # type: ignore[method-assign]
        TransactionManager.is_send_to_partition_allowed = allowed  # type: ignore[method-assign]


def _values(broker: Any, topic: str, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation, group_id=None,
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end, values = consumer.end_offsets([tp])[tp], []
        while consumer.position(tp) < end:
            values += [m.value for records in consumer.poll(1000).values() for m in records]
        return values
    finally:
        consumer.close()


def _leave_open(broker: Any, tid: str, commit: bool) -> None:
    """One transaction of ``tid`` over ``p.kept`` and ``p.open``, the latter left open whatever its outcome."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid, enable_idempotence=True)
    producer.init_transactions()
    with _unjoined("p.open"):
        producer.begin_transaction()
        producer.send("p.kept", b"kept")
        producer.send("p.open", b"open").get(10)
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()


@pytest.mark.parametrize("commit", [True, False])
def test_a_transaction_left_open_gets_the_outcome_its_coordinator_recorded(make_kafka, commit) -> None:
    broker = make_kafka(options=UNVERIFIED)
    for topic in ("p.kept", "p.open"):
        broker.create_topic(topic)
    _leave_open(broker, "p-source", commit)
    assert _values(broker, "p.open", "read_committed") == []  # the record is open: a reader stops before it
    assert _values(broker, "p.open", "read_uncommitted") == [b"open"]

    settled = settle(broker.bootstrap, "p", "p-source", {})
    assert [(o.topic, o.partition) for o in settled] == [("p.open", 0)]
    assert _values(broker, "p.open", "read_committed") == ([b"open"] if commit else [])
    assert _values(broker, "p.kept", "read_committed") == ([b"kept"] if commit else [])
    assert settle(broker.bootstrap, "p", "p-source", {}) == []  # nothing open now


def test_one_whose_outcome_the_coordinator_no_longer_holds_is_named(make_kafka) -> None:
    broker = make_kafka(options=UNVERIFIED)
    for topic in ("p.kept", "p.open"):
        broker.create_topic(topic)
    _leave_open(broker, "p-source", commit=True)
    later = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="p-source", enable_idempotence=True)
    later.init_transactions()  # a new epoch: the coordinator's record is now of no transaction (Empty)
    later.close()
    with pytest.raises(UnknownOutcome, match=r"open in p\.open\[0\] from offset 0 .* kafka-transactions\.sh abort"):
        settle(broker.bootstrap, "p", "p-source", {})


def test_the_daemon_commits_the_records_a_broker_left_open_before_it_resumes(make_kafka, make_mariadb, capsys) -> None:
    """The daemon's transactions commit but one table's topic never gets their markers (its partition is left out, as
    a broker skipping it would): that table's changes stay invisible to read_committed readers until the next daemon
    start settles them, with nothing new on the source."""
    broker, server = make_kafka(options=UNVERIFIED), make_mariadb()
    db = "opentx"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.a (id INT PRIMARY KEY)")
        cur.execute(f"CREATE TABLE {db}.b (id INT PRIMARY KEY)")
        for i in range(3):
            cur.execute(f"INSERT INTO {db}.a VALUES ({i})")
            cur.execute(f"INSERT INTO {db}.b VALUES ({i})")
    run = ["run", "--source", server.url, "--kafka", broker.bootstrap, "--topic-prefix", db, "--server-id", "4949",
           "--exit-at-end"]
    with _unjoined(f"{db}.{db}.b"):
        assert main(run) == 0
    published = _values(broker, f"{db}.{db}.b", "read_uncommitted")
    assert published and _values(broker, f"{db}.{db}.b", "read_committed") == []
    assert _values(broker, f"{db}.{db}.a", "read_committed") == _values(broker, f"{db}.{db}.a", "read_uncommitted")

    assert "retrying" not in capsys.readouterr().err  # (a new cluster's coordinator is waited for quietly)
    assert main(run) == 0
    assert _values(broker, f"{db}.{db}.b", "read_committed") == published
    assert f"{db}.{db}.b[0] from offset 0 of the last transaction" in capsys.readouterr().err
