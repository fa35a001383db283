"""`binlake land --source-format debezium-avro` on binlake's own `kafka.format: debezium-avro` topics, their schemas
in a real registry (Apicurio, Confluent's API): a workload of inserts, updates, changed keys, deletes and
multi-row transactions, an ADD COLUMN between two runs of the daemon (the subject's second version), and change
events published again as an at-least-once producer does after a crash, plus a message that is not in the wire
format. Landed in two runs of many micro-batches (so landed positions are found again from the lake, their
events' digests read back through the registry): the mirrors read by delta-rs equal the server's SELECT, the
change log holds every change event once, and the stray message is quarantined naming its topic, partition and
offset."""

from __future__ import annotations

import collections
import datetime as dt
import functools
import os
import random
import subprocess
import sys

import pytest
from harness import avro
from harness import debezium as dbz
from harness.daemon import run_daemon
from harness.delta_rs import delta_rs_table
from harness.land import plain_rows, run_land_process
from kafka import KafkaProducer

from ingester.devstack import free_tcp_port

pytestmark = pytest.mark.integration

def _workload(server, seed: int, statements: int, also: str = "") -> None:
    rng = random.Random(seed)
    conn = server.connect("avland")
    conn.autocommit(True)
    with conn.cursor() as cur:
        for n in range(statements):
            dbz.random_change(cur, rng, n, 120, also)
    conn.close()


def _table_topics(kafka, prefix: str) -> dict[str, list]:
    return {t: items for t, items in dbz.messages(kafka, prefix).items() if t.count(".") == 2}


def _publish_again(kafka, runs: list[dict[str, list]], most: int) -> tuple[int, int]:
    """The last ``most`` messages of each table topic as each of ``runs`` left them published again (an
    at-least-once producer's repeats), then a message that is not in Confluent's wire format: its partition and
    offset."""
    with KafkaProducer(bootstrap_servers=kafka.bootstrap) as producer:
        for topics in runs:
            for topic, items in topics.items():
                for key, value in items[-most:]:
                    producer.send(topic, key=key, value=value)
        stray = producer.send("avland.avland.b", key=None, value=b'{"not":"avro"}').get(timeout=30)
        producer.flush()
    return stray.partition, stray.offset


def test_binlakes_debezium_avro_topics_land_once(make_mariadb, kafka, schema_registry, monkeypatch,
                                                 tmp_path) -> None:
    server = make_mariadb()
    dbz.create_changes_tables(server, "avland", 60, "first")
    prefix, lake = "avland", tmp_path / "lake"
    for name, value in {"BINLAKE_KAFKA_FORMAT": "debezium-avro", "BINLAKE_FILTERS_INCLUDE": "avland.*",
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url}.items():
        monkeypatch.setenv(name, value)
    land = ("--source-format", "debezium-avro", "--schema-registry-url", schema_registry.url)
    _workload(server, 3, 300)
    run_daemon(server, kafka, prefix)
    assert run_land_process(kafka, prefix, lake, *land, "--max-offsets-per-trigger", "250") == 0
    first = _table_topics(kafka, prefix)  # what the first landing saw

    # a nullable column: the table's next schema version, compatible under BACKWARD
    schema_registry.request("PUT", f"/config/{prefix}.avland.a-value", {"compatibility": "BACKWARD"})
    server.execute("ALTER TABLE avland.a ADD COLUMN note VARCHAR(20) NULL, ADD COLUMN n2 INT NULL")
    _workload(server, 4, 150, ", s = CONCAT(s, '+')")
    server.execute("UPDATE avland.a SET note = CONCAT('n', v), n2 = v * 2 WHERE id % 3 = 0")
    _workload(server, 5, 150)
    run_daemon(server, kafka, prefix)
    assert schema_registry.request("GET", f"/subjects/{prefix}.avland.a-value/versions") == [1, 2]
    stray = _publish_again(kafka, [first, _table_topics(kafka, prefix)], 40)
    assert run_land_process(kafka, prefix, lake, *land, "--max-offsets-per-trigger", "300", "--quarantine") == 0

    @functools.cache
    def schema_text(schema_id: int) -> str:
        return schema_registry.request("GET", f"/schemas/ids/{schema_id}")["schema"]

    seen: collections.Counter = collections.Counter()  # (table, file, pos, row, op) of each change event in Kafka
    for topic, items in dbz.messages(kafka, prefix).items():
        if topic.count(".") != 2:  # the tables' topics: not the schema change or the transaction topic
            continue
        for _, value in items:
            if value is not None and value[:1] == b"\x00":
                event = avro.read(value, schema_text)
                source = event["source"]
                seen[(source["table"], source["file"], source["pos"], source["row"], event["op"])] += 1
    assert sum(seen.values()) > len(seen), "no change event was published twice: nothing was tested"

    conn = server.connect("avland")
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")  # TIMESTAMP as the lake's UTC instants
    ops = {"c": "insert", "u": "update", "d": "delete"}
    for table in ("a", "b"):
        want = plain_rows(conn, table, "id")
        mirror = delta_rs_table(lake / "avland" / table).to_pylist()  # TIMESTAMP: UTC instants, naive here
        got = {(r["id"],): {k: v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for k, v in r.items()
                            if not k.startswith("_binlake")} for r in mirror}
        assert got == want, table
        changes = delta_rs_table(lake / "avland" / f"{table}__changes").select(
            ["position", "row_index", "op"]).to_pylist()
        landed = collections.Counter((r["position"], r["row_index"], r["op"]) for r in changes)
        assert max(landed.values()) == 1, [k for k, n in landed.items() if n > 1][:5]
        in_kafka = collections.Counter(ops[k[4]] for k in seen if k[0] == table)
        assert collections.Counter(r["op"] for r in changes) == in_kafka, table
    quarantined = delta_rs_table(lake / "_quarantine").to_pylist()
    assert [(r["topic"], r["partition"], r["offset"]) for r in quarantined] == [("avland.avland.b", *stray)]
    assert "not in Confluent's Avro wire format (first byte 0x7b" in quarantined[0]["error"]


def test_a_registry_that_does_not_answer_stops_the_job_with_its_line(kafka, tmp_path) -> None:
    """Without a registry setting the job does not start; with a registry nobody answers at, the first batch's
    decode task fails and the job stops with the registry's line (the URL's password masked), nothing landed."""
    kafka.create_topic("avdown.db.t")
    with KafkaProducer(bootstrap_servers=kafka.bootstrap) as producer:
        producer.send("avdown.db.t", value=b"\x00\x00\x00\x00\x01\x02").get(timeout=30)
    closed = free_tcp_port()  # a port nothing listens on
    lake = tmp_path / "lake"
    command = [sys.executable, "-m", "ingester.cli.main", "land", "--kafka", kafka.bootstrap, "--topic-prefix",
               "avdown", "--lake", str(lake), "--checkpoint", str(lake / "_checkpoint"), "--trigger",
               "available-now", "--source-format", "debezium-avro"]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    env.pop("BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL", None)
    unset = subprocess.run(command, env=env, timeout=120, capture_output=True, text=True)
    assert (unset.returncode, unset.stderr.splitlines()[-1]) == (2, (
        "binlake: error: debezium.schema_registry_url: land.source_format debezium-avro needs a schema registry "
        "(its Confluent-compatible API, http(s)://HOST:PORT[/path])"))
    down = subprocess.run([*command, "--schema-registry-url", f"http://u:secret@127.0.0.1:{closed}/apis/ccompat/v7"],
                          env=env, timeout=300, capture_output=True, text=True)
    assert down.returncode == 2 and "secret" not in down.stderr
    assert down.stderr.splitlines()[-1] == (
        f"binlake: error: schema registry http://u:***@127.0.0.1:{closed}/apis/ccompat/v7: [Errno 111] Connection "
        "refused; the micro-batch is not committed: run again once the registry answers")
    assert not (lake / "db" / "t__changes").exists()
