"""`kafka.format: debezium-avro` with a real schema registry (Apicurio Registry, Confluent's API) and Kafka: the type
zoo's change events, read back with the schemas the registry gives for their ids (fastavro's reader), are the
debezium-json format's events of the same binlog (which test_debezium_format.py compares with a real
Debezium's) and the transaction topic's; a DDL registers the table's next schema version; a DDL the registry's
compatibility rule (BACKWARD) refuses stops the daemon with one line, nothing of it committed. With and without
transaction metadata (without, C puts the Avro messages together: _envelope.h, _avro.h)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from harness import avro, zoo
from harness import debezium as dbz
from harness.daemon import run_daemon

from ingester.cli.main import main
from ingester.daemon.kafka_io import read_checkpoint

pytestmark = pytest.mark.integration


def _comparable(payload: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A change event without what is processing time (the envelope's ts_ms/us/ns) and the prefix's name."""
    out = {k: v for k, v in payload.items() if k not in ("ts_ms", "ts_us", "ts_ns")}
    if "source" in out:
        out["source"] = {**out["source"], "name": "*"}
    return out


@pytest.mark.parametrize("transactions", [True, False])
def test_avro_events_are_the_json_formats_and_follow_ddl(make_mariadb, kafka, schema_registry, monkeypatch,
                                                         capsys, transactions) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE zoo.evo (id INT PRIMARY KEY, v INT)")
    conn = server.connect("zoo")
    conn.autocommit(True)
    zoo.create(conn, rows=False)
    plain, binary = ("ajson", "aavro") if transactions else ("bjson", "bavro")
    for name, value in {"BINLAKE_FILTERS_INCLUDE": "zoo.*", "BINLAKE_DEBEZIUM_SCHEMAS_ENABLE": "false",
                        "BINLAKE_DEBEZIUM_PROVIDE_TRANSACTION_METADATA": str(transactions).lower(),
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url}.items():
        monkeypatch.setenv(name, value)

    def publish(prefix: str, kind: str) -> None:
        monkeypatch.setenv("BINLAKE_KAFKA_FORMAT", kind)
        run_daemon(server, kafka, prefix)

    publish(plain, "debezium-json")  # checkpoints here: the zoo's rows are what both publish next
    publish(binary, "debezium-avro")
    zoo.write(conn)
    conn.cursor().execute("INSERT INTO evo VALUES (1, 10), (2, 20)")
    publish(plain, "debezium-json")
    publish(binary, "debezium-avro")

    @functools.cache
    def schema_text(schema_id: int) -> str:
        return schema_registry.request("GET", f"/schemas/ids/{schema_id}")["schema"]

    def read(message: bytes | None) -> Any:
        return None if message is None else avro.read(message, schema_text)

    reference, published = dbz.messages(kafka, plain), dbz.messages(kafka, binary)
    assert {t.replace(plain, "", 1) for t in reference} == {t.replace(binary, "", 1) for t in published}
    tables = [f"zoo.{name}" for name in zoo.TABLES] + ["zoo.evo", ""] + (["transaction"] if transactions else [])
    # "": the schema changes

    def named(prefix: str, topic: str) -> str:
        return f"{prefix}.{topic}" if topic else prefix

    for topic in tables:
        mine, theirs = published[named(binary, topic)], reference[named(plain, topic)]
        assert len(mine) == len(theirs) > 0, topic
        for i, ((key, value), (json_key, json_value)) in enumerate(zip(mine, theirs, strict=True)):
            where = f"{topic} message {i}"
            got_key, want_key = read(key), dbz.decoded((json_key, json_value))[0]
            assert avro.same(got_key, want_key), where
            if json_value is None:
                assert value is None, f"{where}: a tombstone"
                continue
            got, want = read(value), dbz.decoded((None, json_value))[1]
            assert avro.same(_comparable(got, binary), _comparable(want, plain)), where
    subjects = schema_registry.subjects()
    for topic in tables:
        assert {f"{named(binary, topic)}-key", f"{named(binary, topic)}-value"} <= set(subjects), topic

    # a nullable column: the next version (its field defaults to null: BACKWARD compatible)
    subject = f"{binary}.zoo.evo-value"
    schema_registry.request("PUT", f"/config/{subject}", {"compatibility": "BACKWARD"})
    conn.cursor().execute("ALTER TABLE evo ADD COLUMN note VARCHAR(20) NULL")
    conn.cursor().execute("INSERT INTO evo VALUES (3, 30, 'new')")
    publish(binary, "debezium-avro")
    assert schema_registry.request("GET", f"/subjects/{subject}/versions") == [1, 2]
    events = [read(value) for _, value in dbz.messages(kafka, binary)[f"{binary}.zoo.evo"]]
    assert [e["after"] for e in events] == [{"id": 1, "v": 10}, {"id": 2, "v": 20},
                                            {"id": 3, "v": 30, "note": "new"}]

    # a NOT NULL column without a default in the schema: new readers could not read the earlier events
    source_id = f"{binary}.127.0.0.1:{server.port}"
    before = read_checkpoint(kafka.bootstrap, binary, source_id)
    conn.cursor().execute("ALTER TABLE evo ADD COLUMN n INT NOT NULL")
    refused_at = server.current_binlog_position()  # the INSERT's transaction starts here
    conn.cursor().execute("INSERT INTO evo VALUES (4, 40, 'refused', 4)")
    capsys.readouterr()
    assert main(["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", binary,
                 "--server-id", "4545", "--exit-at-end"]) == 2
    err = capsys.readouterr().err
    assert f"binlake: error: schema of subject {subject} refused by the registry at {schema_registry.url}: " \
           "incompatible with its earlier versions (compatibility BACKWARD)\n" in err, err
    assert len(dbz.messages(kafka, binary)[f"{binary}.zoo.evo"]) == 3  # nothing of the refused transaction
    after = read_checkpoint(kafka.bootstrap, binary, source_id)  # the DDL's own transaction may have committed
    assert after is not None and before is not None and after["file"] == refused_at.file
    assert before["position"] <= after["position"] <= refused_at.position
    assert schema_registry.request("GET", f"/subjects/{subject}/versions") == [1, 2]
