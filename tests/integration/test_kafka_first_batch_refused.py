"""A partition's first produce request refused as retriable (NOT_LEADER_OR_FOLLOWER, as a broker answers for a
topic it has just created) while the producer's next request to it is accepted: the Debezium formats' producer
(librdkafka) must send the refused batch again, never count it delivered because a later one was (its "implicit
ack" of a producer with several requests in flight), or a table's first change event is committed without it.
binlake's own format's producer (kafka-python) either sends it again too or fails the commit (the daemon then
aborts and publishes the transaction again): never a commit without it."""

from __future__ import annotations

import pytest
from harness import debezium as dbz
from harness.kafka_proxy import RefuseFirstProduce

from ingester.daemon.producers import ProducerError, PythonProducer, RdkafkaProducer
from ingester.devstack.kafka import KafkaBroker

pytestmark = pytest.mark.integration

TOPIC = "refused.first"


@pytest.mark.parametrize("kind", [RdkafkaProducer, PythonProducer], ids=["librdkafka", "kafka-python"])
def test_a_first_batch_refused_while_the_next_is_accepted_is_sent_again(tmp_path, kind) -> None:
    broker: KafkaBroker | None = None
    with RefuseFirstProduce(lambda: broker.port, TOPIC) as proxy:  # type: ignore[union-attr]
        # every client connection (the broker's own too) through the proxy
        broker = KafkaBroker(tmp_path / "kafka", options={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
        with broker:
            producer = kind(broker.bootstrap, "refused-first", None, 1 << 20, {})
            admin = kind.admin(broker.bootstrap, {}, producer)
            try:
                assert admin.create([TOPIC], "delete") == {TOPIC}
                # the partition led and written to (by another producer): its leader takes writes; the transactional
                # producer is still one it has no state of (any first sequence number accepted)
                from kafka import KafkaProducer

                other = KafkaProducer(bootstrap_servers=broker.bootstrap)
                other.send(TOPIC, b"before").get(timeout=30)
                other.close()
                proxy.armed.set()
                producer.ready()
                producer.begin()
                producer.send(TOPIC, b"k", b"first", ())
                assert proxy.held.wait(30), "the first produce request never came"
                producer.send(TOPIC, b"k", b"second", ())  # sent at once where several requests may be in flight
                try:
                    producer.flush(30)
                    producer.commit()
                except ProducerError:  # refused as a whole: nothing of it committed, the daemon publishes it again
                    assert kind is PythonProducer
                    expected = [b"before"]
                else:
                    expected = [b"before", b"first", b"second"]
                assert proxy.refused.is_set()
            finally:
                producer.close(10)
                admin.close()
            values = [value for _, value in dbz.messages(broker, "refused")[TOPIC]]
            assert values == expected, f"overtaken by the next request: {proxy.overtaken}"
