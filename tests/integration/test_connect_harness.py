"""The harness's Kafka Connect worker runs a real Debezium MariaDB connector (3.5.0.Final, Maven Central)
against the devstack's MariaDB and broker: the outside producer binlake's Debezium formats are compared
with (issue 24). What it publishes is checked against the server's own rows: a snapshot row (op r), an
insert, an update with its before image, a delete and its tombstone, in the Connect JSON layout."""

from __future__ import annotations

import base64
import datetime as dt
import time
from decimal import Decimal
from typing import Any

import orjson
import pytest
from harness import debezium as dbz
from kafka import KafkaConsumer

pytestmark = pytest.mark.integration


def _events(kafka, topic: str, count: int, timeout: float = 60.0) -> list[tuple[Any, Any]]:
    """(key, value) of the topic's first ``count`` records, decoded (None for a tombstone's value)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=1000)
    out: list[tuple[Any, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer:
                out.append((orjson.loads(message.key), None if message.value is None else orjson.loads(message.value)))
                if len(out) == count:
                    break
    finally:
        consumer.close()
    assert len(out) == count, out
    return out


def _row(value: dict[str, Any], image: str) -> dict[str, Any] | None:
    """A before/after image with its DECIMAL decoded (unscaled big-endian bytes, base64) and its
    TIMESTAMP parsed (ISO 8601 in UTC): plain values to compare with the server's."""
    row = value["payload"][image]
    if row is None:
        return None
    scale = next(int(f["parameters"]["scale"]) for s in value["schema"]["fields"] if s["field"] == image
                 for f in s["fields"] if f["field"] == "d")
    unscaled = int.from_bytes(base64.b64decode(row["d"]), "big", signed=True)
    return {**row, "d": Decimal(unscaled).scaleb(-scale),
            "ts": None if row["ts"] is None else dt.datetime.fromisoformat(row["ts"].replace("Z", "+00:00"))}


def test_a_real_debezium_connector_streams_what_the_server_has(make_mariadb, kafka, kafka_connect) -> None:
    server = make_mariadb()
    db, name = "dbzh", "dbzh"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, s VARCHAR(20), d DECIMAL(10,2), ts TIMESTAMP(3) NULL)")
    server.execute(f"INSERT INTO {db}.t VALUES (1, 'snapshot', 1.50, '2024-01-02 03:04:05.123')")
    try:
        dbz.start_connector(kafka_connect, server, kafka, name, db)
        server.execute(f"INSERT INTO {db}.t VALUES (2, 'insert', -3.25, NULL)")
        before = server.execute(f"SELECT id, s, d, CONVERT_TZ(ts, @@session.time_zone, '+00:00') FROM {db}.t "
                                "WHERE id = 1")[0]
        server.execute(f"UPDATE {db}.t SET s = 'update', d = d * 2 WHERE id = 1")
        after = server.execute(f"SELECT id, s, d, CONVERT_TZ(ts, @@session.time_zone, '+00:00') FROM {db}.t "
                               "WHERE id = 1")[0]
        server.execute(f"DELETE FROM {db}.t WHERE id = 2")
        events = _events(kafka, f"{name}.{db}.t", 5)
    finally:
        kafka_connect.delete(name)

    def plain(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
        if row is None:
            return None
        ts = None if row[3] is None else row[3].replace(tzinfo=dt.UTC)
        return {"id": row[0], "s": row[1], "d": row[2], "ts": ts}

    keys = [k["payload"] for k, _ in events]
    assert keys == [{"id": 1}, {"id": 2}, {"id": 1}, {"id": 2}, {"id": 2}]
    ops = [None if v is None else v["payload"]["op"] for _, v in events]
    assert ops == ["r", "c", "u", "d", None]  # the delete's tombstone: a key without a value
    snapshot, insert, update, delete, _ = (v for _, v in events)
    assert _row(snapshot, "after") == plain(before) and _row(snapshot, "before") is None
    assert _row(insert, "after") == {"id": 2, "s": "insert", "d": Decimal("-3.25"), "ts": None}
    assert _row(update, "before") == plain(before) and _row(update, "after") == plain(after)
    assert _row(delete, "before") == {"id": 2, "s": "insert", "d": Decimal("-3.25"), "ts": None}
    assert _row(delete, "after") is None
    source = update["payload"]["source"]
    assert (source["connector"], source["db"], source["table"], source["snapshot"]) == ("mariadb", db, "t", "false")
    assert snapshot["payload"]["source"]["snapshot"] in ("true", "first", "last", "first_in_data_collection",
                                                         "last_in_data_collection")
    gtid = server.execute("SELECT @@gtid_binlog_pos")[0][0]
    assert delete["payload"]["source"]["gtid"] == gtid  # the delete was the server's last transaction
