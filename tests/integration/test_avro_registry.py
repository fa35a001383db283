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


def test_the_schemas_of_many_new_tables_are_registered_side_by_side_each_once(mariadb, kafka, schema_registry,
                                                                            monkeypatch) -> None:
    """50 tables first met in one Kafka transaction (their registrations side by side, registry_client.prepare)
    and a table's next version in that same transaction: every subject holds the schemas of the JSON format's
    events (as Avro), each once and in the order of the binlog, and every message names the id of its own."""
    start = mariadb.current_binlog_position()
    conn = mariadb.connect()
    conn.autocommit(False)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE many")
    for i in range(50):  # schemas of 1 to 5 value columns, every fifth table without a primary key
        columns = ", ".join(f"c{j} {('INT', 'VARCHAR(9)', 'DATE')[j % 3]}" for j in range(i % 5 + 1))
        cur.execute(f"CREATE TABLE many.t{i:02} (id INT NOT NULL{'' if i % 5 == 4 else ' PRIMARY KEY'}, {columns})")
    for i in range(50):  # one binlog transaction over the 50 tables
        cur.execute(f"INSERT INTO many.t{i:02} (id, c0) VALUES (1, 7)")
    conn.commit()
    cur.execute("ALTER TABLE many.t00 ADD COLUMN note VARCHAR(20) NULL")
    cur.execute("INSERT INTO many.t00 VALUES (2, 8, 'v2')")
    conn.commit()
    conn.close()
    reference, published = avro.publish_json_and_avro(mariadb, kafka, schema_registry, monkeypatch, "many.*", start,
                                                      ("mjson", "mavro"))
    for i in range(50):
        topic = f"many.t{i:02}"
        theirs, mine = reference[f"mjson.{topic}"], published[f"mavro.{topic}"]
        assert len(mine) == len(theirs) == (2 if i == 0 else 1), topic
        for role, index in (("key", 0), ("value", 1)):
            subject = f"mavro.{topic}-{role}"
            if role == "key" and i % 5 == 4:
                assert subject not in schema_registry.subjects()
                continue
            # the Avro schemas of the JSON events' Connect schemas, in order, each once
            avro.check_subject(schema_registry, subject, theirs, mine, index, "mjson", "mavro")
    assert schema_registry.request("GET", "/subjects/mavro.many.t00-value/versions") == [1, 2]


def test_without_auto_registration_schemas_are_looked_up(mariadb, kafka, schema_registry, monkeypatch,
                                                        capsys) -> None:
    """``debezium.auto_register_schemas: false``: a subject the registry does not have, or a schema none of its
    versions is, stops the daemon with one line naming them (nothing committed); schemas registered by hand are
    the ids the messages name, and nothing is registered."""
    conn = mariadb.connect()
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE lk")
    cur.execute("CREATE TABLE lk.t (id INT PRIMARY KEY, v INT)")
    start = mariadb.current_binlog_position()
    cur.execute("INSERT INTO lk.t VALUES (1, 10), (2, 20)")
    for name, value in {"BINLAKE_FILTERS_INCLUDE": "lk.*", "BINLAKE_SOURCE_START_FILE": start.file,
                        "BINLAKE_SOURCE_START_POSITION": str(start.position),
                        "BINLAKE_DEBEZIUM_INCLUDE_SCHEMA_CHANGES": "false",  # the table's subjects alone
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("BINLAKE_KAFKA_FORMAT", "debezium-json")
    run_daemon(mariadb, kafka, "lkjson")  # the Connect schemas, to register by hand
    monkeypatch.setenv("BINLAKE_KAFKA_FORMAT", "debezium-avro")
    monkeypatch.setenv("BINLAKE_DEBEZIUM_AUTO_REGISTER_SCHEMAS", "false")

    def refused(published: int) -> str:
        capsys.readouterr()
        assert main(["run", "--source", mariadb.url, "--kafka", kafka.bootstrap, "--topic-prefix", "lookup",
                     "--server-id", "4545", "--exit-at-end"]) == 2
        assert len(dbz.messages(kafka, "lookup").get("lookup.lk.t", ())) == published  # nothing of it committed
        return capsys.readouterr().err

    assert f"binlake: error: schema of subject lookup.lk.t-key not found in the registry at {schema_registry.url}: " \
           "no such subject (debezium.auto_register_schemas is false: register it first)\n" in refused(0)
    key, value = dbz.decoded(dbz.messages(kafka, "lkjson")["lkjson.lk.t"][0])
    ids = {}
    for role, connect in (("key", key["schema"]), ("value", value["schema"])):
        ids[role] = schema_registry.register(f"lookup.lk.t-{role}", avro.avro_of(connect, "lkjson", "lookup"))
    run_daemon(mariadb, kafka, "lookup")
    published = dbz.messages(kafka, "lookup")["lookup.lk.t"]
    assert [(int.from_bytes(k[1:5], "big"), int.from_bytes(v[1:5], "big")) for k, v in published] == \
           [(ids["key"], ids["value"])] * 2
    schema_text = functools.cache(lambda i: schema_registry.request("GET", f"/schemas/ids/{i}")["schema"])
    assert [avro.read(v, schema_text)["after"] for _, v in published] == [{"id": 1, "v": 10}, {"id": 2, "v": 20}]

    cur.execute("ALTER TABLE lk.t ADD COLUMN note VARCHAR(9) NULL")
    cur.execute("INSERT INTO lk.t VALUES (3, 30, 'new')")
    assert f"binlake: error: schema of subject lookup.lk.t-value not found in the registry at " \
           f"{schema_registry.url}: none of the subject's versions is this schema " \
           "(debezium.auto_register_schemas is false: register it first)\n" in refused(2)
    assert schema_registry.request("GET", "/subjects/lookup.lk.t-value/versions") == [1]


def test_subject_name_strategies(mariadb, kafka, schema_registry, monkeypatch) -> None:
    """``debezium.key_subject_name_strategy: TopicRecordNameStrategy`` and ``value_subject_name_strategy:
    RecordNameStrategy`` (Confluent's converter options): the subjects are named as Confluent's strategies name
    them (``<topic>-<record's full name>``, the record's full name), a DDL's next version goes under the same
    subject, and every message names the id of its own schema's version there."""
    conn = mariadb.connect()
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE strat")
    cur.execute("CREATE TABLE strat.t (id INT PRIMARY KEY, v INT)")
    start = mariadb.current_binlog_position()
    cur.execute("INSERT INTO strat.t VALUES (1, 10), (2, 20)")
    cur.execute("ALTER TABLE strat.t ADD COLUMN note VARCHAR(9) NULL")
    cur.execute("INSERT INTO strat.t VALUES (3, 30, 'v2')")
    for name, value in {"BINLAKE_FILTERS_INCLUDE": "strat.*", "BINLAKE_KAFKA_FORMAT": "debezium-avro",
                        "BINLAKE_SOURCE_START_FILE": start.file, "BINLAKE_SOURCE_START_POSITION": str(start.position),
                        "BINLAKE_DEBEZIUM_INCLUDE_SCHEMA_CHANGES": "false",
                        "BINLAKE_DEBEZIUM_PROVIDE_TRANSACTION_METADATA": "true",
                        "BINLAKE_DEBEZIUM_KEY_SUBJECT_NAME_STRATEGY": "TopicRecordNameStrategy",
                        "BINLAKE_DEBEZIUM_VALUE_SUBJECT_NAME_STRATEGY": "RecordNameStrategy",
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url}.items():
        monkeypatch.setenv(name, value)
    run_daemon(mariadb, kafka, "sn")
    # Debezium's record names: <prefix>.<db>.<table>.Key and .Envelope, the transaction topic's Debezium's own
    wanted = {"sn.strat.t-sn.strat.t.Key": 1, "sn.strat.t.Envelope": 2,
              "sn.transaction-io.debezium.connector.common.TransactionMetadataKey": 1,
              "io.debezium.connector.common.TransactionMetadataValue": 1}
    assert sorted(s for s in schema_registry.subjects() if "strat" in s or "Transaction" in s) == sorted(wanted)
    ids = {}
    for subject, count in wanted.items():
        versions = schema_registry.request("GET", f"/subjects/{subject}/versions")
        assert versions == list(range(1, count + 1)), subject
        ids[subject] = [schema_registry.request("GET", f"/subjects/{subject}/versions/{v}")["id"] for v in versions]
    published = dbz.messages(kafka, "sn")
    named = [(int.from_bytes(k[1:5], "big"), int.from_bytes(v[1:5], "big")) for k, v in published["sn.strat.t"]]
    key_id, (v1, v2) = ids["sn.strat.t-sn.strat.t.Key"][0], ids["sn.strat.t.Envelope"]
    assert named == [(key_id, v1), (key_id, v1), (key_id, v2)]
    schema_text = functools.cache(lambda i: schema_registry.request("GET", f"/schemas/ids/{i}")["schema"])
    assert [avro.read(v, schema_text)["after"] for _, v in published["sn.strat.t"]] == [
        {"id": 1, "v": 10}, {"id": 2, "v": 20}, {"id": 3, "v": 30, "note": "v2"}]
