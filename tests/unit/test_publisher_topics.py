"""The publisher's checkpoint topic: made by its own thread before the first commit (beside the daemon's start-up),
and a retry (which reads the checkpoints) should another instance of the source have made it meanwhile. The client
strategies here stand in for the broker's answers to the two orders of events; tests/integration/test_daemon_kafka.py
runs the publisher against a real broker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ingester.daemon.kafka_io import KafkaError, Publisher, offsets_topic
from ingester.records.builder import Checkpoint
from ingester.records.open_records import Record


class _Admin:
    existing: set[str] = set()  # what the cluster has when the publisher starts
    made_by_others: set[str] = set()  # made by someone else between the publisher's listing and its request

    def __init__(self, bootstrap: str, options: Mapping[str, Any], producer: Any) -> None:
        self.asked: list[list[str]] = []

    def names(self) -> set[str]:
        return set(self.existing)

    def create(self, topics: Sequence[str], compacted: bool) -> set[str]:
        self.asked.append(list(topics))
        return {t for t in topics if t not in self.made_by_others}

    def create_soon(self, topics: Sequence[str], compacted: bool) -> None:
        pass

    def close(self) -> None:
        pass


class _Producer:
    admin = _Admin
    settle = staticmethod(lambda *_: [])  # (no broker: nothing left open)

    def __init__(self, bootstrap: str, transactional_id: str, compression: str | None, max_request_size: int,
                 options: Mapping[str, Any]) -> None:
        self.sent: list[str] = []
        self.commits = 0
        self.readied = 0

    def ready(self) -> None:
        self.readied += 1

    def begin(self) -> None:
        pass

    def send(self, topic: str, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]) -> None:
        self.sent.append(topic)

    def flush(self, timeout: float) -> None:
        pass

    def prepare(self, topics: Sequence[str]) -> None:
        pass

    def commit(self) -> None:
        self.commits += 1

    def abort(self) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


@pytest.fixture
def cluster() -> Any:
    yield _Admin
    _Admin.existing, _Admin.made_by_others = set(), set()


def _publish(cluster: type[_Admin]) -> Publisher:
    publisher = Publisher("kafka:9092", "p", "p.source", producer=_Producer)  # type: ignore[arg-type]
    publisher.send(Record(topic="db.t", key=b"k", value=b"v", headers=[], seq=(1, 0)))
    publisher.commit(Checkpoint("binlog.000001", 4, "", (1, 0)))
    return publisher


def test_a_missing_checkpoint_topic_is_made_before_the_first_commit(cluster: type[_Admin]) -> None:
    publisher = _publish(cluster)
    publisher.wait()
    assert publisher.new_checkpoints
    assert publisher.admin.asked[0] == [offsets_topic("p")]  # type: ignore[attr-defined]
    producer: Any = publisher.producer
    assert producer.sent == ["p.db.t", offsets_topic("p")] and producer.commits == 1
    assert producer.readied == 0  # nothing to read back: the fencing waits for the first transaction
    publisher.close()


def test_a_checkpoint_topic_another_instance_made_meanwhile_stops_before_committing(cluster: type[_Admin]) -> None:
    cluster.made_by_others = {offsets_topic("p")}
    publisher = Publisher("kafka:9092", "p", "p.source", producer=_Producer)  # type: ignore[arg-type]
    with pytest.raises(KafkaError, match="created by another instance of this source meanwhile"):
        # raised by whichever call comes after the thread's failure
        publisher.send(Record(topic="db.t", key=b"k", value=b"v", headers=[], seq=(1, 0)))
        publisher.commit(Checkpoint("binlog.000001", 4, "", (1, 0)))
        publisher.wait()
    assert publisher.producer.commits == 0  # type: ignore[attr-defined]
    publisher.close()


def test_an_existing_checkpoint_topic_is_read_after_the_fencing(cluster: type[_Admin]) -> None:
    cluster.existing = {offsets_topic("p")}
    publisher = _publish(cluster)
    publisher.wait()
    producer: Any = publisher.producer
    assert not publisher.new_checkpoints and producer.readied == 1 and producer.commits == 1
    assert publisher.admin.asked == [["p.db.t"]]  # type: ignore[attr-defined]
    publisher.close()
