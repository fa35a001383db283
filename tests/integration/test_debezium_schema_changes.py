"""Debezium's schema change topic `<prefix>` against a real Debezium: a DDL sequence through Debezium's MariaDB
connector 3.5.0.Final (in Kafka Connect) and through binlake's `kafka.format: debezium-json`, with and without
binlake's schema history, every schema change event compared field by field (key, schemas, source, ddl,
databaseName, tableChanges). Each intended difference is listed here and in docs/DEBEZIUM.md."""

from __future__ import annotations

import time
from typing import Any

import pytest
from harness import debezium as dbz
from harness.daemon import run_daemon

pytestmark = pytest.mark.integration

DDL = [
    "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NOT NULL DEFAULT 'x' COMMENT 'nm',"
    " price DECIMAL(10,2) UNSIGNED, e ENUM('a','b') DEFAULT 'b', s SET('p','q'), ts TIMESTAMP(3) NULL,"
    " b BLOB, g INT AS (id * 2) VIRTUAL, lat VARCHAR(5) CHARACTER SET latin1) COMMENT 'tc'",
    "INSERT INTO t (name) VALUES ('a')",
    "ALTER TABLE t ADD COLUMN c2 INT NULL",
    "ALTER TABLE t MODIFY name VARCHAR(40)",
    "ALTER TABLE t DROP COLUMN price",
    "ALTER TABLE t COMMENT 'tc2'",
    "CREATE INDEX ix ON t (c2)",
    "DROP INDEX ix ON t",
    "CREATE TABLE t_like LIKE t",
    "RENAME TABLE t TO t2",
    "DROP TABLE t2",
    "CREATE DATABASE sc2",
    "CREATE TABLE sc2.x (a INT PRIMARY KEY)",
    "CREATE DATABASE other",  # a database the filters leave out: its statement is published (Debezium's too)
    "CREATE TABLE other.y (a INT)",  # ... not its tables' changes (Debezium's are: _captured)
    "CREATE TABLE nokey (a INT, b TEXT)",
    "CREATE TABLE w (a TINYINT, b SMALLINT UNSIGNED, c MEDIUMINT, d BIGINT, e INT(11), f FLOAT, g DOUBLE,"
    " h FLOAT(7,3), i DECIMAL, j NUMERIC(5,1), k BIT, l BIT(5), m BOOL, n DATE, o TIME(2), p DATETIME,"
    " q DATETIME(6), r YEAR, s CHAR(3), t CHAR, u BINARY(4), v VARBINARY(9), x TINYBLOB, y MEDIUMTEXT, z LONGBLOB,"
    " aa JSON, ab GEOMETRY, ac POINT, ad TEXT(100), ae INTEGER, af REAL, ag TIMESTAMP DEFAULT CURRENT_TIMESTAMP,"
    " ah INT DEFAULT 5, ai VARCHAR(3) DEFAULT NULL, aj SERIAL, ak TINYTEXT, al DEC(4,2), am TINYINT(1),"
    " an DOUBLE PRECISION)",
    "ALTER TABLE w ADD INDEX (a), RENAME TO w2",
    "RENAME TABLE w2 TO w3, nokey TO nokey1",
    "DROP TABLE IF EXISTS w3, nokey1",
    "DROP DATABASE sc2",
    "CREATE VIEW v AS SELECT 1",  # no schema change event (Debezium's neither)
    "CREATE TABLE tr (a INT)",
    "TRUNCATE TABLE tr",  # no schema change event (Debezium's neither)
]


def _comparable(event: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A schema change event without what is processing time (ts_ms), its prefix (source.name) and the order of
    source.table's names: Debezium lists a statement's tables in a hash set's order, binlake sorted."""
    payload = {k: v for k, v in event["payload"].items() if k != "ts_ms"}
    source = payload["source"] = {**payload["source"], "name": prefix}
    if source["table"]:
        source["table"] = ",".join(sorted(source["table"].split(",")))
    return {"schema": event["schema"], "payload": payload}


def _debezium_view(event: dict[str, Any]) -> dict[str, Any]:
    """Debezium's event where binlake's differs by intent:
    - a TIMESTAMP's DEFAULT CURRENT_TIMESTAMP: Debezium gives the default it converts it to for NOT NULL
      TIMESTAMPs ('1970-01-01 00:00:00'), binlake the expression as written;
    - DOUBLE PRECISION: binlake's history keeps a type's first word (DOUBLE), as it does with every synonym;
    - SERIAL: Debezium takes it for the primary key; it is a UNIQUE index (the table has no primary key), as
      the server says too;
    - CREATE TABLE ... LIKE: the server copies the table's COMMENT (SHOW CREATE TABLE has it), Debezium's parser
      only the columns; binlake gives the comment."""
    for change in event["payload"]["tableChanges"]:
        table = change["table"]
        if table is None:
            continue
        if event["payload"]["ddl"].startswith("CREATE TABLE t_like LIKE t"):
            table["comment"] = "tc2"
        if table["primaryKeyColumnNames"] == ["aj"]:
            table["primaryKeyColumnNames"] = []
        for column in table["columns"]:
            if column["typeName"] == "TIMESTAMP" and column["defaultValueExpression"] == "1970-01-01 00:00:00":
                column["defaultValueExpression"] = "CURRENT_TIMESTAMP"
            if column["typeName"] == "DOUBLE PRECISION":
                column["typeName"] = column["typeExpression"] = "DOUBLE"
    return event


def _captured(payload: dict[str, Any]) -> bool:
    """Debezium's events binlake publishes too: not its snapshot's (binlake publishes the binlog's DDL), nor those
    of tables outside the filters: Debezium publishes every table's DDL (and follows every table's columns),
    binlake only the captured tables' (and the statements of every database, as Debezium)."""
    return payload["source"]["snapshot"] == "false" and not any(
        c["id"].startswith('"other".') for c in payload["tableChanges"])


def _without_tables(event: dict[str, Any]) -> dict[str, Any]:
    """Without schema history binlake does not know a table's columns: tableChanges is empty but for DROP
    (whose table Debezium gives as null too)."""
    payload = event["payload"]
    payload["tableChanges"] = [c for c in payload["tableChanges"] if c["type"] == "DROP"]
    return event


def test_schema_changes_as_debezium_publishes_them(make_mariadb, kafka, kafka_connect, monkeypatch) -> None:
    server = make_mariadb(binlog_row_metadata="FULL")
    server.execute("CREATE DATABASE sc CHARACTER SET utf8mb4")
    conn = server.connect("sc")
    conn.autocommit(True)
    monkeypatch.setenv("BINLAKE_KAFKA_FORMAT", "debezium-json")
    monkeypatch.setenv("BINLAKE_FILTERS_INCLUDE", "sc.*,sc2.*")
    monkeypatch.setenv("BINLAKE_SCHEMA_HISTORY", "never")  # the plain run's (auto keeps a history on FULL too)
    ours, plain, theirs = "bscd", "bscdplain", "dscd"
    with monkeypatch.context() as env:
        env.setenv("BINLAKE_SCHEMA_HISTORY", "always")
        run_daemon(server, kafka, ours)  # the history is captured here
    run_daemon(server, kafka, plain)  # no schema history
    dbz.start_connector(kafka_connect, server, kafka, theirs, "sc,sc2")
    try:
        for statement in DDL:
            conn.cursor().execute(statement)
        with monkeypatch.context() as env:
            env.setenv("BINLAKE_SCHEMA_HISTORY", "always")
            run_daemon(server, kafka, ours)
        run_daemon(server, kafka, plain)
        mine = dbz.messages(kafka, ours)[ours]
        real: list = []
        deadline = time.monotonic() + 30
        while len(real) < len(mine) and time.monotonic() < deadline:  # the snapshot's events are not compared
            real = [m for m in dbz.messages(kafka, theirs)[theirs] if _captured(dbz.decoded(m)[1]["payload"])]
            time.sleep(0.5)
        # from the binlog's start (it had no history to capture): the CREATE DATABASE before the others too
        without = dbz.messages(kafka, plain)[plain][1:]
    finally:
        kafka_connect.delete(theirs)

    ddls = [[dbz.decoded(m)[1]["payload"]["ddl"][:40] for m in ms] for ms in (mine, real, without)]
    assert len(mine) == len(real) == len(without) == 22, "\n".join(map(str, ddls))
    for i, (a, b, c) in enumerate(zip(mine, real, without, strict=True)):
        (key, value), (their_key, their_value), (plain_key, plain_value) = map(dbz.decoded, (a, b, c))
        where = f"event {i}: {their_value['payload']['ddl'][:60]}"
        assert key == their_key == plain_key, where
        expected = _debezium_view(_comparable(their_value, theirs))
        got = _comparable(value, theirs)
        assert got["payload"]["source"] == expected["payload"]["source"], where
        assert got["payload"]["ddl"] == expected["payload"]["ddl"], where
        assert len(got["payload"]["tableChanges"]) == len(expected["payload"]["tableChanges"]), (
            where, got["payload"]["tableChanges"], expected["payload"]["tableChanges"])
        for mine_change, their_change in zip(got["payload"]["tableChanges"], expected["payload"]["tableChanges"],
                                             strict=True):
            assert mine_change["type"] == their_change["type"] and mine_change["id"] == their_change["id"], where
            if their_change["table"] is not None:
                for x, y in zip(mine_change["table"]["columns"], their_change["table"]["columns"], strict=True):
                    assert x == y, f"{where}: column {y['name']}"
            assert mine_change == their_change, where
        assert got == expected, where
        assert _comparable(plain_value, theirs) == _without_tables(expected), where
