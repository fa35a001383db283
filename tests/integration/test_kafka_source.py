"""binlake's Kafka source (streaming_job/source/kafka_source.py) against a real broker: it reads what Spark's own
Kafka source reads (committed records only, with their headers), stops on records gone from Kafka, one
checkpoint goes on from either source to the other with every change landed once, and a running job lands a
backlog built while it runs in bounded batches."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streaming_job.source.kafka_read import KafkaReader
from streaming_job.source.kafka_tasks import SourceError, Span, close_readers, read_spans
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import run_daemon
from tests.harness.land import (
    assert_change_log,
    change_log_rows,
    committed_batches,
    kill_group,
    land_command,
    landed_everything,
    mirror_rows,
    plain_rows,
    run_land,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _readers() -> Iterator[None]:
    """read_spans keeps a consumer per broker for the process's next reads: closed after each test."""
    yield
    close_readers()


def _produce(kafka, topics: list[str]) -> dict[str, list[tuple[int, bytes, list]]]:
    """Transactions over ``topics`` (two partitions each), committed and aborted, interleaved: the committed
    records sent, by topic partition, as (partition, value, headers), in order."""
    for t in topics:
        kafka.create_topic(t, partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, transactional_id=f"src-{uuid.uuid4().hex}",
                             enable_idempotence=True, acks="all")
    producer.init_transactions()
    sent: dict[str, list[tuple[int, bytes, list]]] = {t: [] for t in topics}
    for i in range(40):
        producer.begin_transaction()
        batch = []
        for k, t in enumerate(topics):
            if (i + k) % 3 == 0:
                continue
            value = f"{t}:{i}".encode() * (1 + i % 5)
            headers = [("binlake.db", b"d"), ("n", str(i).encode())] if i % 2 else []
            partition = (i + k) % 2
            producer.send(t, value, headers=headers, partition=partition)
            batch.append((t, (partition, value, headers)))
        if i % 7 == 3:
            producer.abort_transaction()  # never read
        else:
            producer.commit_transaction()
            for t, record in batch:
                sent[t].append(record)
    producer.close()
    return sent


def test_it_reads_the_committed_records_spark_reads(kafka, spark) -> None:
    topics = [f"srcread{uuid.uuid4().hex[:6]}.t{i}" for i in range(3)]
    sent = _produce(kafka, topics)
    reader = KafkaReader(spark, kafka.bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed")
    for topic in topics:
        theirs = reader.read(topic, "earliest", "latest").collect()
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in (0, 1)])  # past the last marker
        spans = [Span(topic, tp.partition, 0, end) for tp, end in ends.items()]
        ours = [row for batch in read_spans(kafka.bootstrap, spans) for row in batch.to_pylist()]
        key = lambda r: (r["partition"], r["offset"])  # noqa: E731
        assert [(r.partition, r.offset, bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers or ()])
                for r in sorted(theirs, key=lambda r: (r.partition, r.offset))] == [
            (r["partition"], r["offset"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
            for r in sorted(ours, key=key)]
        # and what was committed, in order, per partition (not derived from either reader)
        for p in (0, 1):
            assert [(r["value"], [(h["key"], h["value"]) for h in r["headers"]])
                    for r in sorted(ours, key=key) if r["partition"] == p] == [
                (v, h) for q, v, h in sent[topic] if q == p]
    consumer.close()


def test_records_gone_from_kafka_stop_the_read_with_the_partition_named(kafka) -> None:
    topic = f"srcgone{uuid.uuid4().hex[:6]}.t"
    _produce(kafka, [topic])
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)  # the records before offset 4 deleted
    try:
        admin.delete_records({TopicPartition(topic, 0): 4})
    finally:
        admin.close()
    with pytest.raises(SourceError, match=rf"{topic}-0.* not in Kafka any more"):
        list(read_spans(kafka.bootstrap, [Span(topic, 0, 0, 10)]))
    assert sum(len(b) for b in read_spans(kafka.bootstrap, [Span(topic, 0, 4, 10)])) > 0  # what is left reads


def test_a_read_left_before_its_end_leaves_the_next_read_whole(kafka, monkeypatch) -> None:
    """A worker's consumer serves its next tasks, but only one that finished its read: a read whose generator was
    closed early (one partition done and paused, another not) closes its consumer, and the next read of that
    partition (a new consumer) gets all of it (CI: 'did not give the committed records of mixdelta.mx.w-0 within
    120 s'); a read that finished hands its consumer on."""
    import streaming_job.source.kafka_tasks as tasks

    topics = [f"srcleft{uuid.uuid4().hex[:6]}.t{i}" for i in range(2)]
    sent = _produce(kafka, topics)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed")
    ends = consumer.end_offsets([TopicPartition(t, 0) for t in topics])
    consumer.close()
    first, second = (ends[TopicPartition(t, 0)] for t in topics)
    assert first > 2
    # this test's own key among the kept consumers (the same broker named twice): a read of kafka.bootstrap that
    # another test's query still makes in this process (CI) neither takes nor leaves one of this test's
    bootstrap = f"{kafka.bootstrap},{kafka.bootstrap}"
    made: list = []
    new = tasks.consumer

    def consumer(servers: str):
        kept = new(servers)
        if servers == bootstrap:
            made.append(kept)
        return kept

    monkeypatch.setattr(tasks, "consumer", consumer)
    monkeypatch.setattr(tasks, "_BATCH_BYTES", 1)  # a batch per poll: the read yields before its end
    monkeypatch.setattr(tasks, "_READ_TIMEOUT_S", 20.0)
    reading = read_spans(bootstrap, [Span(topics[0], 0, 0, 2), Span(topics[1], 0, 0, second)])
    done = TopicPartition(topics[0], 0)
    next(reading)
    while done not in made[0].paused():
        next(reading)
    reading.close()  # the task stopped early: the other partition still open
    assert made[0]._closed and bootstrap not in tasks._IDLE
    for _ in range(2):
        got = [r["value"] for batch in read_spans(bootstrap, [Span(topics[0], 0, 0, first)])
               for r in batch.to_pylist()]
        assert got == [v for q, v, _ in sent[topics[0]] if q == 0]
    assert len(made) == 2 and tasks._IDLE.pop(bootstrap) is made[1]  # kept after a whole read, and reused
    made[1].close()


def test_a_read_that_kafka_leaves_waiting_goes_on_with_a_new_consumer(kafka, monkeypatch, caplog) -> None:
    """A consumer whose fetches give nothing while records are due (a client stuck, whatever the cause) is replaced
    once after _STALL_S, from where the read was: every committed record once, in order; a read that gets nothing
    for _READ_TIMEOUT_S stops naming the partition, where it is and Kafka's last stable offset."""
    import streaming_job.source.kafka_tasks as tasks

    topic = f"srcstall{uuid.uuid4().hex[:6]}"
    sent = _produce(kafka, [topic])
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed")
    end = consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    consumer.close()
    made: list = []
    new = tasks.consumer

    def stuck(bootstrap: str, first: bool):  # a consumer whose polls give nothing (after a first of 3 records)
        kafka = new(bootstrap)
        made.append(kafka)
        real, polls = kafka.poll, []

        def poll(timeout_ms: int) -> dict:
            polls.append(timeout_ms)
            if first and len(polls) == 1:
                return real(timeout_ms=timeout_ms, max_records=3)
            time.sleep(timeout_ms / 1000)
            return {}

        kafka.poll = poll
        return kafka

    monkeypatch.setattr(tasks, "consumer", lambda bootstrap: stuck(bootstrap, True) if not made else new(bootstrap))
    monkeypatch.setattr(tasks, "_STALL_S", 1.0)
    got = [(r["offset"], r["value"]) for batch in read_spans(kafka.bootstrap, [Span(topic, 0, 0, end)])
           for r in batch.to_pylist()]
    assert [v for _, v in got] == [v for q, v, _ in sent[topic] if q == 0]
    assert len(made) == 1 and "nothing from Kafka" in caplog.text  # the second one's not counted: not stuck
    made.clear()
    close_readers()
    monkeypatch.setattr(tasks, "_READ_TIMEOUT_S", 3.0)
    monkeypatch.setattr(tasks, "consumer", lambda bootstrap: stuck(bootstrap, not made))  # its renewal stuck too
    with pytest.raises(SourceError, match=rf"{topic}-0 \(offsets 0 to {end}: at \d+, last stable offset {end}\)"):
        list(read_spans(kafka.bootstrap, [Span(topic, 0, 0, end)]))
    assert len(made) == 2


def test_one_checkpoint_goes_on_from_either_kafka_source_to_the_other(make_mariadb, kafka, spark, capfd,
                                                                       tmp_path: Path) -> None:
    """``--max-offsets-per-trigger`` takes Spark's Kafka source (it bounds batches in records); a bound in bytes
    (``--max-batch-bytes``, a batch of ~6 records here) binlake's, where Kafka holds more than a batch past where the
    checkpoint's next batch starts (``auto``; ``--kafka-source binlake`` always): each run of it lands its backlog in
    rounds, starting where the checkpoint's last batch ended, as Spark hands it to a restarted Python source.
    Their offsets are the same JSON: a job restarted with the other keeps its checkpoint."""
    server = make_mariadb()
    db = "srcswitch"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    prefix = "srcswitch"
    lake = tmp_path / "lake"
    with conn.cursor() as cur:
        for t in ("a", "b"):
            cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(20))")
    auto = ("--max-batch-bytes", "1500")
    for step, extra in enumerate([("--max-offsets-per-trigger", "3"), auto, ("--max-offsets-per-trigger", "2"),
                                  ("--kafka-source", "binlake", *auto)]):
        with conn.cursor() as cur:
            for i in range(6):
                cur.execute("INSERT INTO a VALUES (%s, %s)", (step * 10 + i, f"s{step}"))
                cur.execute("INSERT INTO b VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)", (i, f"s{step}"))
            cur.execute("DELETE FROM a WHERE id = %s", (step * 10,))
        run_daemon(server, kafka, prefix)
        capfd.readouterr()
        assert run_land(kafka, prefix, lake, *extra) == 0
        said = capfd.readouterr().err
        if "--max-batch-bytes" in extra:  # binlake's source, bounded: the backlog in several runs of the query
            assert "Kafka source: BinlakeKafka" in said and said.count("ended short of what Kafka held") >= 2, said
        else:
            assert "Kafka source: SparkKafka" in said, said
        for t in ("a", "b"):
            assert mirror_rows(spark, lake, db, t)[0] == plain_rows(conn, t, "id"), (step, t)
    server.flush_logs()
    assert_change_log(spark, lake, db, verbose_counts(server.binlog_files()[:-1], db), ["a", "b"])


def test_a_backlog_built_while_a_caught_up_job_runs_lands_in_bounded_batches(make_mariadb, kafka, spark,
                                                                            tmp_path: Path, monkeypatch) -> None:
    """A running job reads with binlake's Kafka source (``auto``), even started caught up (Spark's would plan its next
    batch up to Kafka's end): about 900 KB of transactions published at once while it runs, after a first batch of
    small records, land in batches of about ``--max-batch-bytes``, every change once, and the mirror equals the
    server's SELECT."""
    server = make_mariadb()
    db = prefix = "flood"
    server.execute(f"CREATE DATABASE {db}")
    conn = server.connect(db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(4000))")
        cur.execute("INSERT INTO t VALUES (0, 'first')")
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")  # records of a few rows: a batch holds several
    run_daemon(server, kafka, prefix)
    lake, log = tmp_path / "lake", tmp_path / "land.log"
    bound, value = 100_000, 3000  # bytes: a batch of about 33 rows
    cmd, env = land_command(kafka, prefix, lake)
    with log.open("w") as out:
        proc = subprocess.Popen([*cmd, "--trigger", "1s", "--max-batch-bytes", str(bound)], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while committed_batches(lake / "_checkpoint") < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        with conn.cursor() as cur:
            for i in range(1, 301):
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"{i:06d}" * (value // 6)))
        run_daemon(server, kafka, prefix)  # all of it in Kafka at once, past one batch
        while not landed_everything(kafka, prefix, lake / "_checkpoint") and time.monotonic() < deadline \
                and proc.poll() is None:
            time.sleep(0.5)
        assert proc.poll() is None and landed_everything(kafka, prefix, lake / "_checkpoint"), log.read_text()
    finally:
        kill_group(proc)
    text = log.read_text()
    assert re.findall(r"Kafka source: (\w+)", text) == ["BinlakeKafka"], text
    rows = [int(n) for n in re.findall(r"batch \d+: \d+ records in, (\d+) row changes", text)]
    assert sum(rows) == 301 and len(rows) >= 5 and max(rows) <= 2 * bound // value, rows  # (the estimate's slack)
    assert mirror_rows(spark, lake, db, "t")[0] == plain_rows(conn, "t", "id")
    changes = change_log_rows(spark, lake, db, "t")
    assert len(changes) == len({(bytes(c.seq), c.row_index) for c in changes}) == 301  # each insert once
