"""`kafka.format: debezium-avro` registers a table's schemas ahead, as the daemon first maps the table
(Publisher.mapped -> DebeziumOut.mapped -> the registry client's prepare), side by side with other tables', on
the real registry the harness starts (Apicurio Registry, Confluent's API): a subject's versions stay in binlog
order however the registrations race (new versions of many tables right after their first mapping, all in one
Kafka transaction), each message names its own schema's id, and a version the registry refuses stops the daemon
with one line, nothing of its transaction committed, and no later version of the subject registered after it."""

from __future__ import annotations

import functools

import orjson
import pytest
from harness import avro
from harness import debezium as dbz
from harness.daemon import run_daemon

from ingester.cli.main import main
from ingester.daemon.kafka_io import read_checkpoint

pytestmark = pytest.mark.integration

TABLES = 40
ROUNDS = 3  # versions of each table's value schema: its first map, then a column added after each round


def test_versions_of_many_new_tables_registered_ahead_stay_in_binlog_order(mariadb, kafka, schema_registry,
                                                                          monkeypatch) -> None:
    """40 new tables, each first mapped then changed by an ALTER right after its first row (and again after its
    second), interleaved with the other tables' and all in one Kafka transaction: every value subject holds the
    Avro schemas of the JSON format's events (written by the server's own TABLE_MAPs, not by the registration
    code) in the order of the binlog, each once, and every message names the id of its own schema."""
    start = mariadb.current_binlog_position()
    conn = mariadb.connect()
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE ahead")
    for i in range(TABLES):  # every fourth table without a primary key (no key subject)
        cur.execute(f"CREATE TABLE ahead.t{i:02} (id INT NOT NULL{'' if i % 4 == 3 else ' PRIMARY KEY'}, v INT)")
    for r in range(ROUNDS):
        for i in range(TABLES):
            cur.execute(f"INSERT INTO ahead.t{i:02} (id, v) VALUES ({r}, {i})")
        if r + 1 < ROUNDS:
            for i in range(TABLES):  # each table's next version right after its map of this round
                cur.execute(f"ALTER TABLE ahead.t{i:02} ADD COLUMN c{r} {('VARCHAR(9)', 'DATE')[r % 2]} NULL")
    conn.close()
    reference, published = avro.publish_json_and_avro(mariadb, kafka, schema_registry, monkeypatch, "ahead.*", start,
                                                      ("ahjson", "ahavro"))
    subjects = set(schema_registry.subjects() or ())
    schema_text = functools.cache(lambda i: schema_registry.request("GET", f"/schemas/ids/{i}")["schema"])
    for i in range(TABLES):
        topic = f"ahead.t{i:02}"
        theirs, mine = reference[f"ahjson.{topic}"], published[f"ahavro.{topic}"]
        assert len(mine) == len(theirs) == ROUNDS, topic
        for role, index in (("key", 0), ("value", 1)):
            subject = f"ahavro.{topic}-{role}"
            if role == "key" and i % 4 == 3:
                assert subject not in subjects
                continue
            versions = avro.check_subject(schema_registry, subject, theirs, mine, index, "ahjson", "ahavro")
            assert versions == (1 if role == "key" else ROUNDS), subject
        rows = [avro.read(value, schema_text)["after"] for _, value in mine]
        assert [(row["id"], row["v"]) for row in rows] == [(r, i) for r in range(ROUNDS)], topic


def test_a_refused_version_stops_the_daemon_and_no_later_version_is_registered(mariadb, kafka, schema_registry,
                                                                             monkeypatch, capsys) -> None:
    """Under BACKWARD, a NOT NULL column without a default is refused; the binlog goes on with the column dropped
    and a nullable one added (a version the registry would take) and more tables first mapped after it: the
    daemon stops with one line naming the refused subject, nothing of the refused transaction is committed
    (checkpoint before it), and the subject has no version after the refused one, registered ahead or not."""
    conn = mariadb.connect()
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE refuse")
    cur.execute("CREATE TABLE refuse.t (id INT PRIMARY KEY, v INT)")
    start = mariadb.current_binlog_position()
    cur.execute("INSERT INTO refuse.t VALUES (1, 10)")
    for name, value in {"BINLAKE_FILTERS_INCLUDE": "refuse.*", "BINLAKE_KAFKA_FORMAT": "debezium-avro",
                        "BINLAKE_SOURCE_START_FILE": start.file, "BINLAKE_SOURCE_START_POSITION": str(start.position),
                        "BINLAKE_DEBEZIUM_INCLUDE_SCHEMA_CHANGES": "false",  # the tables' subjects alone
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url}.items():
        monkeypatch.setenv(name, value)
    run_daemon(mariadb, kafka, "refused")
    subject = "refused.refuse.t-value"
    assert schema_registry.request("GET", f"/subjects/{subject}/versions") == [1]
    schema_registry.request("PUT", f"/config/{subject}", {"compatibility": "BACKWARD"})
    source_id = f"refused.127.0.0.1:{mariadb.port}"
    before = read_checkpoint(kafka.bootstrap, "refused", source_id)

    cur.execute("ALTER TABLE refuse.t ADD COLUMN n INT NOT NULL")
    refused_at = mariadb.current_binlog_position()  # the INSERT's transaction starts here
    cur.execute("INSERT INTO refuse.t VALUES (2, 20, 2)")
    cur.execute("ALTER TABLE refuse.t DROP COLUMN n, ADD COLUMN note VARCHAR(9) NULL")
    cur.execute("INSERT INTO refuse.t VALUES (3, 30, 'later')")
    for i in range(20):  # tables mapped after it: their registrations go on beside the refused one
        cur.execute(f"CREATE TABLE refuse.u{i:02} (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO refuse.u{i:02} VALUES (1)")
    capsys.readouterr()
    assert main(["run", "--source", mariadb.url, "--kafka", kafka.bootstrap, "--topic-prefix", "refused",
                 "--server-id", "4545", "--exit-at-end"]) == 2
    err = capsys.readouterr().err
    line = (f"binlake: error: schema of subject {subject} refused by the registry at {schema_registry.url}: "
            "incompatible with its earlier versions (compatibility BACKWARD)\n")
    assert line in err and err.count("binlake: error") == 1, err
    published = dbz.messages(kafka, "refused")
    assert len(published["refused.refuse.t"]) == 1  # nothing of the refused transaction, nor after it
    assert not any(published.get(f"refused.refuse.u{i:02}") for i in range(20))
    after = read_checkpoint(kafka.bootstrap, "refused", source_id)
    assert after is not None and before is not None and after["file"] == refused_at.file
    assert before["position"] <= after["position"] <= refused_at.position
    assert schema_registry.request("GET", f"/subjects/{subject}/versions") == [1]  # nothing after the refused one

    # the subject's rule relaxed: a restart registers the refused version, then the next, in binlog order
    schema_registry.request("PUT", f"/config/{subject}", {"compatibility": "NONE"})
    run_daemon(mariadb, kafka, "refused")
    assert schema_registry.request("GET", f"/subjects/{subject}/versions") == [1, 2, 3]
    schema_text = functools.cache(lambda i: schema_registry.request("GET", f"/schemas/ids/{i}")["schema"])
    events = [avro.read(value, schema_text)["after"] for _, value in dbz.messages(kafka, "refused")["refused.refuse.t"]]
    assert events == [{"id": 1, "v": 10}, {"id": 2, "v": 20, "n": 2}, {"id": 3, "v": 30, "note": "later"}]
    fields = [[f["name"] for f in orjson.loads(schema_registry.request(
        "GET", f"/subjects/{subject}/versions/{v}")["schema"])["fields"][0]["type"][1]["fields"]] for v in (1, 2, 3)]
    assert fields == [["id", "v"], ["id", "v", "n"], ["id", "v", "note"]]


def test_a_snapshots_schemas_come_before_the_streams(make_mariadb, kafka, schema_registry, monkeypatch) -> None:
    """A snapshot's tables are registered ahead as the snapshot begins each (before the stream's maps, which the
    daemon reads after it): with a DDL after the snapshot (the next run), every value subject holds the schemas of
    the JSON format's events (the snapshot's reads, then the stream's) in that order, each once, each message
    naming its own; the snapshot's rows read back as the server's."""
    server = make_mariadb()
    server.execute("CREATE DATABASE snap")
    for i in range(12):
        server.execute(f"CREATE TABLE snap.t{i:02} (id INT PRIMARY KEY, v VARCHAR(9) NOT NULL)")
        server.execute(f"INSERT INTO snap.t{i:02} VALUES (1, 'a{i}'), (2, 'b{i}')")
    for name, value in {"BINLAKE_FILTERS_INCLUDE": "snap.*", "BINLAKE_SNAPSHOT": "initial",
                        "BINLAKE_DEBEZIUM_INCLUDE_SCHEMA_CHANGES": "false",
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url}.items():
        monkeypatch.setenv(name, value)

    def publish() -> None:
        for prefix, kind in (("sjson", "debezium-json"), ("savro", "debezium-avro")):
            monkeypatch.setenv("BINLAKE_KAFKA_FORMAT", kind)
            run_daemon(server, kafka, prefix)

    publish()
    for i in range(12):
        server.execute(f"ALTER TABLE snap.t{i:02} ADD COLUMN n INT NULL")
        server.execute(f"INSERT INTO snap.t{i:02} VALUES (3, 'c{i}', {i})")
    publish()
    reference, published = dbz.messages(kafka, "sjson"), dbz.messages(kafka, "savro")
    schema_text = functools.cache(lambda i: schema_registry.request("GET", f"/schemas/ids/{i}")["schema"])
    for i in range(12):
        topic = f"snap.t{i:02}"
        theirs, mine = reference[f"sjson.{topic}"], published[f"savro.{topic}"]
        assert len(mine) == len(theirs) == 3, topic
        assert avro.check_subject(schema_registry, f"savro.{topic}-value", theirs, mine, 1, "sjson", "savro") >= 2
        avro.check_subject(schema_registry, f"savro.{topic}-key", theirs, mine, 0, "sjson", "savro")
        events = [avro.read(value, schema_text) for _, value in mine]
        assert [(e["op"], e["after"]["id"], e["after"]["v"]) for e in events] == \
               [("r", 1, f"a{i}"), ("r", 2, f"b{i}"), ("c", 3, f"c{i}")], topic
        assert events[2]["after"]["n"] == i
