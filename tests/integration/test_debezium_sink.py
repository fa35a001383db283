"""A consumer nobody here wrote reads binlake's debezium-json and debezium-avro topics: Debezium's JDBC sink
connector (3.5.0.Final, in Kafka Connect; the Avro topics through Apicurio's Avro converter and the registry)
applies the type zoo's change events to a second database, and every table there equals the source's SELECT, but
for what Debezium's change events cannot say (ZERO_DATES, listed)."""

from __future__ import annotations

import struct
import time
from collections.abc import Set as AbstractSet

import pytest
from harness import debezium as dbz
from harness import zoo
from harness.daemon import run_daemon

pytestmark = pytest.mark.integration

# What a Debezium change event cannot carry, whoever writes it (docs/DEBEZIUM.md): a zero date or one with a zero
# month or day is null; a zero YEAR is 1900.
ZERO_DATES = {("ints", 40, "yr")}
# The JDBC sink 3.5.0 stops on a TIME outside 00:00-24:00 (a MicroTime it makes a LocalTime of), the type zoo's
# `times` has many: it is left out of the sink, and CLOCK holds the temporal types within what the sink takes.
CLOCK = [("d", "DATE"), ("t0", "TIME"), ("t6", "TIME(6)"), ("dt0", "DATETIME"), ("dt3", "DATETIME(3)"),
         ("dt6", "DATETIME(6)"), ("ts0", "TIMESTAMP NULL"), ("ts6", "TIMESTAMP(6) NULL")]
CLOCK_ROWS = ["(1, '2024-02-29', '23:59:59', '00:00:00.000001', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999',"
              " '2024-02-29 12:34:56.123456', '1970-01-01 00:00:01', '2038-01-19 03:14:07.999999')",
              "(2, '1970-01-01', '00:00:00', '12:34:56.5', '1970-01-01 00:00:00', '2000-01-01 00:00:00.5',"
              " '1999-12-31 23:59:59.999999', '2001-02-03 04:05:06', NULL)",
              "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"]
TABLES = [t for t in zoo.TABLES if t != "times"] + ["clock"]
# Through an Avro converter (AvroData's, Apicurio's as Confluent's) a bytes value is a ByteBuffer, which the sink
# 3.5.0 binds as it is for a Bits field (a BIT(n > 1)), and MariaDB's driver refuses ("Type java.nio.HeapByteBuffer
# not supported type"): the sink leaves those out of the Avro topics (field.exclude.list), they stay NULL.
AVRO_UNBOUND = {("ints", "b17"), ("ints", "b64")}


_F32 = struct.Struct("<f")


def _sink(kafka_connect, server, name: str, topics: str, database: str, converters: dict[str, str]) -> None:
    kafka_connect.create(name, {**converters,
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", "tasks.max": "1",
        "topics.regex": topics, "connection.url": f"jdbc:mariadb://127.0.0.1:{server.port}/{database}",
        "connection.username": "root", "connection.password": "", "insert.mode": "upsert",
        "primary.key.mode": "record_key", "delete.enabled": "true", "collection.name.format": "${source.table}",
        "use.time.zone": "UTC"})
    kafka_connect.wait_running(name)


def _state(conn, table: str, copy: bool = False, unbound: AbstractSet[tuple[str, str]] = frozenset()):
    if unbound and table == "ints":  # the columns the sink leaves out: NULL in its copy
        state = zoo.server_state(conn, table)
        return {pk: {c: None if (table, c) in unbound else v for c, v in row.items()} for pk, row in state.items()}
    if copy and table == "ints":  # BIT(n > 8) as VARBINARY: little-endian numbers
        state = zoo.server_state(conn, table)
        with conn.cursor() as cur:
            cur.execute("SELECT id, b17, b64 FROM ints")
            for pk, *bits in cur.fetchall():
                state[pk].update({c: None if v is None else int.from_bytes(v, "little")
                                  for c, v in zip(("b17", "b64"), bits, strict=True)})
        return state
    if table != "clock":
        return zoo.server_state(conn, table)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT id, {', '.join(f'CAST({c} AS CHAR)' for c, _ in CLOCK)} FROM clock")
        return {row[0]: dict(zip([c for c, _ in CLOCK], row[1:], strict=True)) for row in cur.fetchall()}


@pytest.mark.parametrize("kind", ["debezium-json", "debezium-avro"])
def test_debeziums_jdbc_sink_applies_binlakes_change_events(make_mariadb, kafka, kafka_connect, monkeypatch, request,
                                                            kind) -> None:
    server = make_mariadb(binlog_row_metadata="FULL")
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    server.execute("CREATE DATABASE zoo_copy CHARACTER SET utf8mb4")
    source = server.connect("zoo")
    source.autocommit(True)
    zoo.create(source, rows=False)
    server.execute("CREATE TABLE zoo.clock (id INT PRIMARY KEY, " + ", ".join(f"{c} {t}" for c, t in CLOCK) + ")")
    for table in TABLES:  # the sink fills tables of the source's own definitions
        server.execute(f"CREATE TABLE zoo_copy.`{table}` LIKE zoo.`{table}`")
    # but for FLOAT: its limit as the shortest text that reads back as it (-3.4028235E38, Debezium's too) is beyond
    # FLT_MAX as a decimal number, and MariaDB refuses it (out of range): a DOUBLE holds it, compared as float32
    server.execute("ALTER TABLE zoo_copy.nums MODIFY f DOUBLE")
    # and for BIT(n > 8): the sink writes a Bits value's bytes (little-endian) as they are, which BIT(n) reads
    # big-endian (too long for BIT(17)): VARBINARY keeps them, compared as the little-endian number they are
    server.execute("ALTER TABLE zoo_copy.ints MODIFY b17 VARBINARY(8), MODIFY b64 VARBINARY(8), "
                   "MODIFY yr SMALLINT")  # and the zero YEAR, 1900 in a change event, out of YEAR's range
    zoo.write(source)
    with source.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"INSERT INTO clock VALUES {', '.join(CLOCK_ROWS)}")
        cur.execute("UPDATE clock SET t6 = '23:59:59.999999', ts0 = '2030-01-01 00:00:00' WHERE id = 2")
        cur.execute("DELETE FROM clock WHERE id = 3")
    prefix, converters, unbound = "bsink", {}, frozenset()
    if kind == "debezium-avro":
        registry = request.getfixturevalue("schema_registry")
        prefix, unbound = "bsinkavro", AVRO_UNBOUND
        converters = {**dbz.avro_converters(registry),
                      "field.exclude.list": ",".join(f"{prefix}.zoo.{t}:{c}" for t, c in sorted(unbound))}
        monkeypatch.setenv("BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL", registry.url)
    for name, value in {"BINLAKE_KAFKA_FORMAT": kind, "BINLAKE_FILTERS_INCLUDE": "zoo.*",
                        # BIGINT UNSIGNED's top half is negative in the default `long` mode: no sink stores it
                        "BINLAKE_DEBEZIUM_BIGINT_UNSIGNED_HANDLING_MODE": "precise"}.items():
        monkeypatch.setenv(name, value)
    run_daemon(server, kafka, prefix)
    copy = server.connect("zoo_copy")
    copy.autocommit(True)
    _sink(kafka_connect, server, "sink", rf"{prefix}\.zoo\.(?!times$).*", "zoo_copy", converters)
    try:
        deadline = time.monotonic() + 180  # a busy machine: the connector's group joins, the task starts
        while True:
            expected = {t: _state(source, t, unbound=unbound) for t in TABLES}
            got = {t: _state(copy, t, copy=True) for t in TABLES}
            if all(sorted(got[t]) == sorted(expected[t]) for t in TABLES):
                break
            status = kafka_connect._get("/connectors/sink/status") or {}
            failed = [t.get("trace", "") for t in status.get("tasks", ()) if t.get("state") == "FAILED"]
            if failed or time.monotonic() > deadline:
                causes = [line for line in failed[0].splitlines() if not line.startswith("\tat ")] if failed else []
                behind = {t: f"{len(got[t])} of {len(expected[t])} rows" for t in TABLES
                          if sorted(got[t]) != sorted(expected[t])}
                pytest.fail(f"the sink did not apply the events ({behind}): {status.get('tasks')}\n"
                            + "\n".join(causes[-8:]))
            time.sleep(1)
    finally:
        kafka_connect.delete("sink")
    for table, rows in expected.items():
        assert sorted(got[table]) == sorted(rows), table
        for pk, row in rows.items():
            for column, value in row.items():
                if (table, pk, column) in ZERO_DATES:
                    continue
                theirs = got[table][pk][column]
                if column in zoo.FLOAT32 and value is not None:
                    value, theirs = _F32.pack(value), _F32.pack(theirs)
                assert theirs == value, f"{table}.{column} id={pk}"
