"""`kafka.format: debezium-json` stays exactly once: a snapshot (op r), then a steady workload while the daemon is
killed -9 and restarted at once, several times. Every row change of the server's binlog is one change event in
Kafka (by its source coordinates), every snapshot row one op r, and the events replayed give the server's
SELECT."""

from __future__ import annotations

import collections
import random
import signal
import threading
import time

import orjson
import pytest
from harness import debezium as dbz
from harness.daemon import caught_up, start_daemon
from harness.delta_rs import delta_rs_table
from harness.land import run_land_process

from ingester.codec import events as E
from ingester.daemon.kafka_io import read_checkpoint
from ingester.sources.binlog_file import read_binlog_file

pytestmark = pytest.mark.integration


def _writer(server, stop: threading.Event, done: list[int]) -> None:
    rng = random.Random(7)
    conn = server.connect("once")
    conn.autocommit(True)
    with conn.cursor() as cur:
        n = 0
        while not stop.is_set():
            key = rng.randrange(1, 400)
            choice = rng.random()
            if choice < 0.5:
                cur.execute("INSERT INTO t VALUES (%s, %s, 'w') ON DUPLICATE KEY UPDATE v = v + 1", (key, n))
            elif choice < 0.8:
                cur.execute("UPDATE t SET v = v + 1, s = CONCAT(s, 'u') WHERE id = %s", (key,))
            elif choice < 0.9:
                cur.execute("DELETE FROM t WHERE id = %s", (key,))
            else:  # a transaction over several rows
                cur.execute("BEGIN")
                cur.executemany("INSERT INTO t VALUES (%s, %s, 'b') ON DUPLICATE KEY UPDATE v = -v",
                                [(rng.randrange(1, 400), n) for _ in range(5)])
                cur.execute("COMMIT")
            n += 1
            time.sleep(0.002)
    conn.close()
    done.append(n)


def test_change_events_exactly_once_across_kill_9(make_mariadb, kafka, tmp_path) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE once CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE once.t (id INT PRIMARY KEY, v INT, s VARCHAR(200))")
    server.execute("INSERT INTO once.t VALUES " + ", ".join(f"({i}, {i}, 'snap')" for i in range(1, 201)))
    snapshot_rows = {row[0]: row for row in server.execute("SELECT id, v, s FROM once.t")}
    prefix, env = "dbzonce", {"BINLAKE_KAFKA_FORMAT": "debezium-json", "BINLAKE_FILTERS_INCLUDE": "once.*",
                              "BINLAKE_SNAPSHOT": "initial", "BINLAKE_SNAPSHOT_CHUNK_ROWS": "50"}
    log = open(tmp_path / "run.log", "wb")
    stop, done = threading.Event(), []
    writer = threading.Thread(target=_writer, args=(server, stop, done))
    proc = None
    try:  # whatever fails, the daemon and the writer stop
        proc = start_daemon(server, kafka, prefix, 6161, log, env)
        caught_up(server, kafka, prefix, proc)  # the snapshot done: streaming from here
        start = server.current_binlog_position()
        writer.start()
        for delay in (1.5, 0.7, 2.2, 1.1):
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc = start_daemon(server, kafka, prefix, 6161, log, env)  # at once
        time.sleep(1)
        stop.set()
        writer.join()
        caught_up(server, kafka, prefix, proc)
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        log.close()
    assert done and done[0] > 200, done

    events = [dbz.decoded(m) for m in dbz.messages(kafka, prefix)[f"{prefix}.once.t"]]
    changes = [(key["payload"]["id"], value["payload"]) for key, value in events if value is not None]
    reads = collections.Counter(p["after"]["id"] for _, p in changes if p["op"] == "r")
    assert reads == collections.Counter(list(snapshot_rows)), "each snapshot row once"
    assert all((p["after"]["id"], p["after"]["v"], p["after"]["s"]) == snapshot_rows[p["after"]["id"]]
               for _, p in changes if p["op"] == "r")
    # the snapshot's one table: its first row and its last marked as Debezium marks them
    markers = [p["source"]["snapshot"] for _, p in changes if p["op"] == "r"]
    assert markers == ["first", *["true"] * (len(markers) - 2), "last"], collections.Counter(markers)
    # every row change the server wrote after the snapshot's start, once, by its coordinates
    server.flush_logs()
    expected = collections.Counter()
    for path in server.binlog_files():
        if path.name < start.file:
            continue
        for ev in read_binlog_file(path):
            if isinstance(ev, E.RowsEvent) and ev.database == "once" and (path.name, ev.position) >= tuple(start):
                for row, change in enumerate(ev.rows):
                    before, after = change.get("before"), change.get("after")
                    moved = before is not None and after is not None and before["id"] != after["id"]
                    expected[(path.name, ev.position, row)] += 2 if moved else 1
    streamed = collections.Counter((p["source"]["file"], p["source"]["pos"], p["source"]["row"])
                                   for _, p in changes if p["op"] != "r")
    assert streamed == expected
    state: dict[int, tuple] = {}  # the events replayed, in order
    for key, payload in changes:
        if payload["op"] == "d":
            state.pop(key, None)
        else:
            after = payload["after"]
            state[after["id"]] = (after["id"], after["v"], after["s"])
    assert state == {row[0]: row for row in server.execute("SELECT id, v, s FROM once.t")}
    # landed from these topics (`binlake land --source-format debezium-json`): the mirror is the server's table, and
    # the change log holds each snapshot read and each change event once (landed by a process of its own, read by
    # delta-rs: no Spark session is left in this process)
    lake = tmp_path / "lake"
    assert run_land_process(kafka, prefix, lake, "--source-format", "debezium-json") == 0
    mirror = delta_rs_table(lake / "once" / "t").select(["id", "v", "s"]).to_pylist()
    assert {r["id"]: (r["id"], r["v"], r["s"]) for r in mirror} == state
    landed = collections.Counter(delta_rs_table(lake / "once" / "t__changes").column("op").to_pylist())
    ops = {"c": "insert", "u": "update", "d": "delete", "r": "read"}
    assert landed == collections.Counter(ops[p["op"]] for _, p in changes)


def test_a_change_event_over_the_message_limit_stops_the_daemon_naming_it(make_mariadb, kafka, tmp_path) -> None:
    """A row of 2.5 MB is one change event that cannot be split: the daemon stops with one line naming the table
    and the row's binlog position; its Kafka transaction is aborted, so no checkpoint claims the row."""
    server = make_mariadb()
    server.execute("CREATE DATABASE big CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE big.t (id INT PRIMARY KEY, b LONGBLOB)")
    server.execute("INSERT INTO big.t VALUES (1, 'small')")
    start = server.current_binlog_position()
    server.execute("INSERT INTO big.t VALUES (2, REPEAT('x', 2500000))")
    prefix, env = "dbzbig", {"BINLAKE_KAFKA_FORMAT": "debezium-json", "BINLAKE_FILTERS_INCLUDE": "big.*"}
    with open(tmp_path / "run.log", "wb") as log:
        proc = start_daemon(server, kafka, prefix, 6262, log, env, "--exit-at-end")
        assert proc.wait(timeout=60) != 0
    lines = (tmp_path / "run.log").read_text().splitlines()
    errors = [line for line in lines if line.startswith("binlake: error:")]
    want = (f"binlake: error: the change event of `big`.`t` at binlog {start.file}:")
    assert len(errors) == 1 and errors[0].startswith(want), lines[-5:]
    assert "over the largest message the producer sends (1,800,000 bytes" in errors[0], errors
    ids = [dbz.decoded(m)[0]["payload"]["id"] for m in dbz.messages(kafka, prefix).get(f"{prefix}.big.t", [])]
    assert 2 not in ids
    checkpoint = read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")
    assert checkpoint is None or (checkpoint["file"], checkpoint["position"]) <= (start.file, start.position)


def test_a_huge_transaction_killed_mid_stream_is_published_once(make_mariadb, kafka, tmp_path) -> None:
    """A transaction's change events go to the broker as they come, in the open Kafka transaction (memory holds a
    few records, not the transaction): a read_committed reader sees none of them before the commit, and after a
    kill -9 in the middle of it and a restart each row change is one change event, the transaction topic's BEGIN
    and END once (transaction metadata: records closed together, released at each complete one)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    rows = 60_000
    server = make_mariadb()
    server.execute("CREATE DATABASE huge CHARACTER SET utf8mb4")
    for table in ("t", "u"):
        server.execute(f"CREATE TABLE huge.{table} (id INT PRIMARY KEY, s VARCHAR(20))")
    prefix = "dbzhuge"
    env = {"BINLAKE_KAFKA_FORMAT": "debezium-json", "BINLAKE_FILTERS_INCLUDE": "huge.*",
           "BINLAKE_KAFKA_MAX_RECORD_BYTES": "100000", "BINLAKE_DEBEZIUM_SCHEMAS_ENABLE": "false",
           "BINLAKE_DEBEZIUM_PROVIDE_TRANSACTION_METADATA": "true"}
    log = open(tmp_path / "run.log", "wb")
    proc = start_daemon(server, kafka, prefix, 6363, log, env)
    caught_up(server, kafka, prefix, proc)
    # the table's topic made ahead (as a user may), so the readers below know it from the first message on: the
    # daemon publishes the transaction in well under a second, which a reader still learning of a new topic misses
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:  # (the daemon asks for a captured table's topic once it sees the table's CREATE: it may be there already)
        admin.create_topics([NewTopic(f"{prefix}.huge.t", num_partitions=1, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    part = TopicPartition(f"{prefix}.huge.t", 0)
    seen = {}
    try:
        for isolation in ("read_uncommitted", "read_committed"):  # connected, and knowing the topic, before
            seen[isolation] = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level=isolation,
                                            enable_auto_commit=False, group_id=None)
            assert seen[isolation].end_offsets([part])[part] == 0
        with server.connect("huge") as conn, conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO u VALUES (0, 'first')")
            cur.execute(f"INSERT INTO t SELECT seq, CONCAT('row ', seq) FROM seq_1_to_{rows}")
            cur.execute("INSERT INTO u VALUES (1, 'last')")
            cur.execute("COMMIT")
        deadline = time.monotonic() + 60
        while True:  # until change events are on the broker, not committed: then kill -9
            assert time.monotonic() < deadline and proc.poll() is None, "no uncommitted change event seen"
            try:
                written = seen["read_uncommitted"].end_offsets([part])[part]
            except Exception:  # the topic is not there yet
                written = 0
            if written:
                visible = seen["read_committed"].end_offsets([part])[part]
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert visible == 0, "change events visible before their transaction's commit"
        proc = start_daemon(server, kafka, prefix, 6363, log, env)
        caught_up(server, kafka, prefix, proc)
    finally:
        for consumer in seen.values():
            consumer.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    published = dbz.messages(kafka, prefix)
    ids = collections.Counter(orjson.loads(v)["after"]["id"] for _, v in published[f"{prefix}.huge.t"])
    assert ids == collections.Counter(range(1, rows + 1))
    assert [orjson.loads(v)["after"]["id"] for _, v in published[f"{prefix}.huge.u"]] == [0, 1]
    tx = [orjson.loads(v) for _, v in published[f"{prefix}.transaction"]]
    assert [(m["status"], m["event_count"]) for m in tx] == [("BEGIN", None), ("END", rows + 2)]


def test_the_publisher_holds_a_few_records_of_a_huge_transaction(kafka, tmp_path) -> None:
    """What the publisher holds (Publisher.held_bytes: records queued, records its format holds back; the producer
    bounds the messages not acknowledged itself) stays within its limits through a transaction of 40,000 rows whose
    change events are ~18 MB, with transaction metadata; a read_committed reader then sees them all."""
    from kafka import KafkaConsumer, TopicPartition

    from ingester.codec import BinlogDecoder
    from ingester.daemon import kafka_io
    from ingester.daemon.producers import RdkafkaProducer
    from ingester.records.builder import RecordBuilder
    from ingester.records.debezium.encoder import DebeziumJson, DebeziumOptions
    from ingester.sources.binlog_file import binlog_frames
    from tests.harness.binlogs import two_table_binlog

    path, prefix, record_bytes = two_table_binlog(tmp_path, 2000), "dbzheld", 50_000
    out = DebeziumJson(DebeziumOptions(prefix, schemas=False, transactions=True), lambda n: path.name, record_bytes)
    publisher = kafka_io.Publisher(kafka.bootstrap, prefix, f"{prefix}.test", max_record_bytes=record_bytes,
                                   max_queued_bytes=128 << 10, out=out, producer=RdkafkaProducer)
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(file=path.name, max_record_bytes=record_bytes, together=publisher.across_tables)
    held, sent = [], 0
    try:
        for pos, raw in binlog_frames(path, dec):
            for record in builder.feed(dec, raw, pos):
                publisher.send(record)
                sent += len(record.value)
                held.append((publisher.held_bytes, out.held_bytes))
        for record in builder.flush():
            publisher.send(record)
        checkpoint = builder.checkpoint()
        assert checkpoint is not None
        publisher.commit(checkpoint)
        publisher.wait()
    finally:
        publisher.close()
    assert sent > 4 * publisher.queue_limit
    # queued: the limit and the record being sent; held back: two records (one of each table)
    assert max(h for h, _ in held) <= publisher.queue_limit + 4 * record_bytes
    assert max(o for _, o in held) <= 2 * record_bytes
    # committed: every change event of db.t, then the commit's marker (what read_committed readers see; the events
    # themselves are read back in the test above, through the daemon)
    part = TopicPartition(f"{prefix}.db.t", 0)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed")
    try:
        deadline = time.monotonic() + 30
        while (end := consumer.end_offsets([part])[part]) < 2000 * 20 + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        consumer.close()
    assert end == 2000 * 20 + 1 + 1


def test_keys_go_to_the_partitions_javas_producer_picks(make_mariadb, kafka, monkeypatch) -> None:
    """On a table topic of several partitions (created ahead by its user), each change event goes to the partition
    Kafka's Java producer (Debezium's) gives its key: murmur2 of the key's bytes, made positive, modulo the
    partitions; so a switch between Debezium and binlake keeps each key's events in one partition, in order."""
    from harness.daemon import run_daemon
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.partitioner.default import murmur2

    server = make_mariadb()
    server.execute("CREATE DATABASE parts CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE parts.t (id INT PRIMARY KEY, v VARCHAR(20))")
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        admin.create_topics([NewTopic("parts.parts.t", num_partitions=5, replication_factor=1)])
    finally:
        admin.close()
    server.execute("INSERT INTO parts.t VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(1, 201)))
    server.execute("UPDATE parts.t SET v = 'w' WHERE id % 3 = 0")
    for name, value in {"BINLAKE_KAFKA_FORMAT": "debezium-json", "BINLAKE_FILTERS_INCLUDE": "parts.*"}.items():
        monkeypatch.setenv(name, value)
    run_daemon(server, kafka, "parts")
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    try:
        parts = [TopicPartition("parts.parts.t", p) for p in range(5)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        placed = []
        while any(consumer.position(tp) < end[tp] for tp in parts):
            for tp, batch in consumer.poll(timeout_ms=1000).items():
                placed += [(tp.partition, m.key) for m in batch]
    finally:
        consumer.close()
    assert len(placed) == 200 + 66
    assert all(partition == (murmur2(key) & 0x7FFFFFFF) % 5 for partition, key in placed)
    assert len({partition for partition, _ in placed}) == 5
