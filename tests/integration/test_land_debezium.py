"""`binlake land --source-format debezium-json` on a real Debezium MariaDB connector's topics: Kafka Connect is
killed -9 and restarted mid-stream, so Kafka holds repeats of the change events published after its last
committed offset; the lake lands each change once (by its source position) and the mirrors equal the server's
SELECT, read by Spark and by delta-rs. The land job runs twice (mid-stream and at the end, many micro-batches
each), so positions landed are found again both from the lake and from the batches before; between the two,
columns are added with defaults, which the mirror gives its older rows. The connector publishes truncates too
(skipped.operations none; Debezium skips them by default): a TRUNCATE TABLE empties the table's mirror."""

from __future__ import annotations

import collections
import datetime as dt
import random
import signal
import threading
import time

import pytest
from harness import debezium as dbz
from harness.delta_rs import delta_rs_table
from harness.land import lake_frame, mirror_rows, plain_rows, run_land

from ingester.devstack.connect import DEBEZIUM_MARIADB, KafkaConnect

pytestmark = pytest.mark.integration

OPTIONS = {"tombstones.on.delete": "true", "skipped.operations": "none"}  # truncates published (op t)

def _writer(server, stop: threading.Event) -> None:
    rng = random.Random(11)
    conn = server.connect("dbzland")
    conn.autocommit(True)
    with conn.cursor() as cur:
        n = 0
        while not stop.is_set():
            dbz.random_change(cur, rng, n, 300)
            n += 1
            time.sleep(0.002)
    conn.close()


def _positions(kafka, prefix: str) -> tuple[collections.Counter, int]:
    """Per table, the change events in Kafka by source position (file, pos, row, op), and their number."""
    seen: collections.Counter = collections.Counter()
    total = 0
    for topic, items in dbz.messages(kafka, prefix).items():
        if topic.count(".") != 2:
            continue
        for message in items:
            _, value = dbz.decoded(message)
            if value is None or value["payload"]["op"] == "r":
                continue
            source = value["payload"]["source"]
            seen[(source["table"], source["file"], source["pos"], source["row"], value["payload"]["op"])] += 1
            total += 1
    return seen, total


def test_debezium_topics_land_once_across_a_connector_killed_9(make_mariadb, kafka, spark, tmp_path) -> None:
    server = make_mariadb()
    dbz.create_changes_tables(server, "dbzland", 100, "snap")
    prefix, lake = "dbzland", tmp_path / "lake"
    # offsets committed every 4 s: a kill -9 between two commits leaves up to 4 s of events to be published again
    worker = KafkaConnect(kafka.bootstrap, [DEBEZIUM_MARIADB], datadir=tmp_path / "connect", offset_flush_ms=4000)
    stop = threading.Event()
    writer = threading.Thread(target=_writer, args=(server, stop))
    try:
        worker.start()
        dbz.start_connector(worker, server, kafka, prefix, "dbzland", **OPTIONS)
        writer.start()
        time.sleep(5.5)
        assert worker._proc is not None
        worker._proc.send_signal(signal.SIGKILL)
        worker._proc.wait()
        worker.start()
        dbz.start_connector(worker, server, kafka, prefix, "dbzland", **OPTIONS)
        time.sleep(2)
        assert run_land(kafka, prefix, lake, "--source-format", "debezium-json",
                        "--max-offsets-per-trigger", "700") == 0
        # columns added with defaults: the server gives its rows the defaults, Debezium's schemas carry them, and
        # the mirror gives them to the rows it holds from before (the table then has rows of both schemas)
        server.execute("ALTER TABLE dbzland.a ADD COLUMN extra INT NOT NULL DEFAULT 7, "
                       "ADD COLUMN note VARCHAR(10) DEFAULT 'n-o', ADD COLUMN since DATE DEFAULT '2024-02-29'")
        time.sleep(2)
        stop.set()
        writer.join()
        server.execute("CREATE TABLE dbzland.c (id INT PRIMARY KEY, v VARCHAR(10))")
        server.execute("INSERT INTO dbzland.c VALUES (1, 'x'), (2, 'y'), (3, 'z')")
        server.execute("TRUNCATE TABLE dbzland.c")  # Debezium's op t
        server.execute("INSERT INTO dbzland.c VALUES (7, 'after')")
        server.execute("CREATE TABLE dbzland.done (id INT PRIMARY KEY)")
        server.execute("INSERT INTO dbzland.done VALUES (1)")
        dbz.wait_for(kafka, prefix, "dbzland.done", 1, worker)
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        worker.close()

    seen, total = _positions(kafka, prefix)
    assert total > len(seen), "the kill -9 left no repeated change events in Kafka: nothing was tested"
    assert run_land(kafka, prefix, lake, "--source-format", "debezium-json", "--max-offsets-per-trigger",
                    "900") == 0

    conn = server.connect("dbzland")
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")  # TIMESTAMP as the lake's UTC instants
    for table in ("a", "b"):
        want = plain_rows(conn, table, "id")
        got, _ = mirror_rows(spark, lake, "dbzland", table)
        assert got == want, f"{table}: " + "; ".join(
            f"{k}: " + (", ".join(f"{c} {(got.get(k) or {}).get(c)!r} != {(want.get(k) or {}).get(c)!r}"
                                  for c in {*(got.get(k) or {}), *(want.get(k) or {})}
                                  if (got.get(k) or {}).get(c) != (want.get(k) or {}).get(c)))
            for k in sorted({*got, *want}) if got.get(k) != want.get(k))[:600]
        by_delta_rs = delta_rs_table(lake / "dbzland" / table).to_pylist()  # TIMESTAMP: UTC instants, naive here
        assert {(r["id"],): {k: v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v for k, v in r.items()
                             if not k.startswith("_binlake")} for r in by_delta_rs} == want, table
        changes = (lake_frame(spark, lake, "dbzland", f"{table}__changes").where("op <> 'read'")
                   .select("position", "row_index", "op").collect())
        landed = collections.Counter((r.position, r.row_index, r.op) for r in changes)
        assert max(landed.values()) == 1, [k for k, n in landed.items() if n > 1][:5]
        # every change event Debezium published for the table, once (a changed key: a delete and an insert)
        in_kafka = sum(1 for k in seen if k[0] == table)
        assert len(changes) == in_kafka, (table, len(changes), in_kafka)
    # the truncated table: its mirror holds the row written after the TRUNCATE alone, its change log every event
    assert mirror_rows(spark, lake, "dbzland", "c")[0] == plain_rows(conn, "c", "id") == {(7,): {"id": 7, "v": "after"}}
    assert sorted(r.op for r in lake_frame(spark, lake, "dbzland", "c__changes").collect()) \
        == ["insert"] * 4 + ["truncate"]
