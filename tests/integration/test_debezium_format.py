"""`kafka.format: debezium-json` against a real Debezium: the type zoo's binlog through Debezium's MariaDB
connector 3.5.0.Final (in Kafka Connect) and through binlake, every change event compared field by field
(key, schema, before, after, op, source, transaction block) and the transaction topics' BEGIN/END. Each
intended difference is listed here and in docs/DEBEZIUM.md."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from harness import debezium as dbz
from harness import zoo
from harness.daemon import run_daemon

pytestmark = pytest.mark.integration

_F32 = struct.Struct("<f")
# the JSON converter without schemas, as binlake's schemas_enable: false
NO_SCHEMAS = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}
SETTINGS = {"defaults": dbz.SETTINGS["defaults"], "modes": dbz.SETTINGS["modes"] | NO_SCHEMAS}


def _binlake_settings(options: dict[str, str]) -> dict[str, str]:
    env = dbz.binlake_settings(options)
    if options.get("value.converter.schemas.enable") == "false":
        env["BINLAKE_DEBEZIUM_SCHEMAS_ENABLE"] = "false"
    return env


def _debezium_view(event: dict[str, Any]) -> dict[str, Any]:
    """binlake's change event as Debezium shows it where a difference is intended: ENUM/SET text with NON_BMP
    (the values, and the allowed list in the schema)."""
    payload = dict(event["payload"])
    for image in ("before", "after"):
        if payload[image] is not None:
            payload[image] = {k: dbz.as_debezium_reads(v) if k in zoo.ENUMS else v for k, v in payload[image].items()}
    schema = event.get("schema")
    for row in schema["fields"][:2] if schema else ():
        for f in row["fields"]:
            if f["field"] in zoo.ENUMS:
                f["parameters"]["allowed"] = dbz.as_debezium_reads(f["parameters"]["allowed"])
    return {**event, "payload": payload}


def _comparable(event: dict[str, Any], schemas: bool) -> dict[str, Any]:
    """A change event (``{"schema", "payload"}``, or the payload without schemas) without what is processing
    time (the envelope's ts_ms/us/ns), its FLOAT columns as the float32 values they are: Java 17's
    Float.toString writes some with a digit more than the shortest text (Float.MIN_NORMAL: 1.17549435E-38, not
    1.1754944E-38), Java 19 and later, like binlake, the shortest."""
    payload = dict(event["payload"] if schemas else event)
    for name in ("ts_ms", "ts_us", "ts_ns"):
        payload.pop(name)
    for image in ("before", "after"):
        if payload[image] is not None:
            payload[image] = {k: _F32.unpack(_F32.pack(v))[0] if k in zoo.FLOAT32 and v is not None else v
                              for k, v in payload[image].items()}
    return {"schema": event["schema"] if schemas else None, "payload": payload}


@pytest.mark.parametrize(("settings", "metadata"), [("defaults", "FULL"), ("modes", "FULL"), ("defaults", "NO_LOG")])
def test_the_type_zoo_as_debezium_publishes_it(make_mariadb, kafka, kafka_connect, monkeypatch, settings,
                                               metadata) -> None:
    """With NO_LOG (MariaDB's default) binlake's names, charsets and ENUM members come from its schema history."""
    options = SETTINGS[settings]
    schemas = options.get("value.converter.schemas.enable") != "false"
    theirs, ours = f"dzoo{settings}{metadata}", f"bzoo{settings}{metadata}"
    published, real = dbz.zoo_through_both(make_mariadb, kafka, kafka_connect, monkeypatch, ours, theirs,
                                           {"BINLAKE_KAFKA_FORMAT": "debezium-json", **_binlake_settings(options)},
                                           options, metadata, headers=True)

    assert (f"{ours}.transaction" in published) == (f"{theirs}.transaction" in real)
    for table in zoo.TABLES:
        mine, debezium = published[f"{ours}.zoo.{table}"], real[f"{theirs}.zoo.{table}"]
        assert len(mine) == len(debezium), table
        for i, (a, b) in enumerate(zip(mine, debezium, strict=True)):
            (key, value), (their_key, their_value) = dbz.decoded(a[:2]), dbz.decoded(b[:2])
            where = f"{table} event {i}"
            # a changed key's delete (and tombstone) and create name the other key; Debezium's context headers
            # (connector name, task, a run id) are not published
            assert a[2] == [h for h in b[2] if not h[0].startswith("__debezium.context.")], where
            assert dbz.renamed(key, ours, theirs) == their_key, where
            if their_value is None:
                assert value is None, f"{where}: a tombstone"
                continue
            expected = _comparable(their_value, schemas)
            got = _debezium_view(dbz.renamed(_comparable(value, schemas), ours, theirs))
            assert got["payload"]["source"] == expected["payload"]["source"], where
            for image in ("before", "after"):
                assert got["payload"][image] == expected["payload"][image], f"{where}: {image}"
            assert got == expected, where

    def transactions(messages: list[tuple[bytes | None, bytes | None]]) -> list[tuple[Any, ...]]:
        out = []
        for message in messages:
            payload = dbz.decoded(message[:2])[1]["payload"]
            tables = sorted((c["data_collection"], c["event_count"]) for c in payload["data_collections"] or ())
            out.append((payload["status"], payload["id"], payload["event_count"], tables))
        return out

    if f"{ours}.transaction" in published:
        assert transactions(published[f"{ours}.transaction"]) == transactions(real[f"{theirs}.transaction"])


def test_truncates_as_debezium_publishes_them(make_mariadb, kafka, kafka_connect, monkeypatch) -> None:
    """TRUNCATE TABLE through Debezium's connector with skipped.operations=none and through binlake's table statement
    entries: each table's change events (its truncate events: op "t", no key, before and after null, in the table's
    schema as its change events have it then) equal field by field, in order; the transaction topics too, but for
    intended differences: Debezium 3.5 leaves a TRUNCATE's transaction without an END (a DDL has no COMMIT), binlake
    ends it; Debezium begins one for other DDL too, binlake does not. With Debezium's default (skipped.operations=t)
    neither publishes truncates."""
    server = make_mariadb(binlog_row_metadata="FULL")
    server.execute("CREATE DATABASE tr CHARACTER SET utf8mb4")
    conn = server.connect("tr")
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t1 (id INT PRIMARY KEY, v VARCHAR(5))")
    cur.execute("CREATE TABLE t2 (id INT PRIMARY KEY, d DECIMAL(5,2))")
    options = {**dbz.SETTINGS["defaults"], "skipped.operations": "none"}
    theirs, ours, skipping = "dtrunc", "btrunc", "btruncskip"
    monkeypatch.setenv("BINLAKE_FILTERS_INCLUDE", "tr.*")
    monkeypatch.setenv("BINLAKE_KAFKA_FORMAT", "debezium-json")
    for name, value in _binlake_settings(options).items():
        monkeypatch.setenv(name, value)
    run_daemon(server, kafka, ours)  # the schema history captured here
    with monkeypatch.context() as env:
        env.setenv("BINLAKE_DEBEZIUM_SKIPPED_OPERATIONS", "t")
        run_daemon(server, kafka, skipping)
    dbz.start_connector(kafka_connect, server, kafka, theirs, "tr", **options)
    try:
        for sql in ("INSERT INTO t1 VALUES (1, 'a')", "TRUNCATE TABLE t1", "INSERT INTO t1 VALUES (2, 'b')",
                    "TRUNCATE TABLE t2",  # no change event of t2 in this daemon's run: its schema from the entry
                    "ALTER TABLE t1 ADD COLUMN w INT", "TRUNCATE t1",  # the schema after the ALTER
                    "BEGIN", "INSERT INTO t1 VALUES (3, 'c', 4)", "INSERT INTO t2 VALUES (2, 2.5)", "COMMIT",
                    "CREATE TABLE t3 (k BIGINT NOT NULL, s CHAR(2), UNIQUE uk (k))", "TRUNCATE TABLE t3",
                    "INSERT INTO t3 VALUES (7, 'x')", "TRUNCATE TABLE t3"):
            cur.execute(sql)
        run_daemon(server, kafka, ours)
        with monkeypatch.context() as env:
            env.setenv("BINLAKE_DEBEZIUM_SKIPPED_OPERATIONS", "t")
            run_daemon(server, kafka, skipping)
        published = dbz.messages(kafka, ours, headers=True)
        dbz.wait_for(kafka, theirs, "tr.t3", len(published[f"{ours}.tr.t3"]), kafka_connect)
        real = dbz.messages(kafka, theirs, headers=True)
        without = dbz.messages(kafka, skipping)
    finally:
        kafka_connect.delete(theirs)

    truncates = set()
    for table in ("t1", "t2", "t3"):
        mine, debezium = published[f"{ours}.tr.{table}"], real[f"{theirs}.tr.{table}"]
        ops = [dbz.decoded(m[:2])[1]["payload"]["op"] for m in mine if m[1] is not None]
        assert ops.count("t") == {"t1": 2, "t2": 1, "t3": 2}[table] and len(mine) == len(debezium), (table, ops)
        for i, (a, b) in enumerate(zip(mine, debezium, strict=True)):
            (key, value), (their_key, their_value) = dbz.decoded(a[:2]), dbz.decoded(b[:2])
            where = f"{table} event {i}"
            assert dbz.renamed(key, ours, theirs) == their_key, where
            got = dbz.renamed(_comparable(value, True), ours, theirs)
            expected = _comparable(their_value, True)
            assert got["payload"]["source"] == expected["payload"]["source"], where
            assert got == expected, where
            if value["payload"]["op"] == "t":
                truncates.add(value["payload"]["source"]["gtid"])
        skipped = [dbz.decoded(m)[1] for m in without[f"{skipping}.tr.{table}"]]
        assert [v["payload"]["op"] for v in skipped if v] == [op for op in ops if op != "t"], table

    def transactions(messages: list[Any], without_end: set[str]) -> list[tuple[Any, ...]]:
        out = []
        for message in messages:
            payload = dbz.decoded(message[:2])[1]["payload"]
            if payload["status"] == "END" and payload["id"] in without_end:
                continue
            tables = sorted((c["data_collection"], c["event_count"]) for c in payload["data_collections"] or ())
            out.append((payload["status"], payload["id"], payload["event_count"], tables))
        return out

    assert len(truncates) == 5
    # Debezium begins a transaction for every DDL statement's GTID too (ALTER, CREATE: binlake publishes no change
    # event of them, nor their BEGIN), and ends none of those
    mine = transactions(published[f"{ours}.transaction"], truncates)
    ids = {t[1] for t in mine}
    assert mine == [t for t in transactions(real[f"{theirs}.transaction"], set()) if t[1] in ids]
