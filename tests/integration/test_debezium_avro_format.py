"""`kafka.format: debezium-avro` against a real Debezium: the type zoo's binlog through Debezium's MariaDB connector
3.5.0.Final with an Avro converter (Apicurio's, whose AvroData is derived from Confluent's) into the harness's
registry, and through binlake into the same registry: per table the registered key and value schemas (field
names, types, logical types, connect.name/version/parameters/default, optionality, order), and every change
event read back with the schema of its id, compared field by field; the transaction topics too. The one intended
difference is test_debezium_format.py's: ENUM/SET members outside the Basic Multilingual Plane
(docs/DEBEZIUM.md). Then the column defaults binlake's schemas carry with the schema history, as Debezium's do
(but those listed), and the next version a column added NOT NULL with a DEFAULT registers under BACKWARD."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from harness import avro, zoo
from harness import debezium as dbz
from harness.daemon import run_daemon

pytestmark = pytest.mark.integration


def _debezium_view(node: Any) -> Any:
    """binlake's Avro schema or decoded event as Debezium gives it: NON_BMP ENUM/SET members as '?' (in the
    ``allowed`` parameters and the ENUM/SET columns' values)."""
    if isinstance(node, dict):
        out = {k: _debezium_view(v) for k, v in node.items()}
        if "allowed" in out:
            out["allowed"] = dbz.as_debezium_reads(out["allowed"])
        for image in ("before", "after"):
            if isinstance(out.get(image), dict) and "op" in out:
                out[image] = {k: dbz.as_debezium_reads(v) if k in zoo.ENUMS else v for k, v in out[image].items()}
        return out
    if isinstance(node, list):
        return [_debezium_view(v) for v in node]
    return node


def _comparable(event: Any) -> Any:
    """A decoded change event or transaction message without what is processing time (ts_ms/us/ns)."""
    return {k: v for k, v in event.items() if k not in ("ts_ms", "ts_us", "ts_ns")}


@pytest.mark.parametrize("settings", ["defaults", "modes"])
def test_the_type_zoo_as_debezium_registers_it(make_mariadb, kafka, kafka_connect, schema_registry, monkeypatch,
                                               settings) -> None:
    options = dbz.SETTINGS[settings]
    theirs, ours = f"dazoo{settings}", f"bazoo{settings}"
    published, real = dbz.zoo_through_both(
        make_mariadb, kafka, kafka_connect, monkeypatch, ours, theirs,
        {"BINLAKE_KAFKA_FORMAT": "debezium-avro", "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url,
         **dbz.binlake_settings(options)}, options | dbz.avro_converters(schema_registry))

    @functools.cache
    def schema_text(schema_id: int) -> str:
        return schema_registry.request("GET", f"/schemas/ids/{schema_id}")["schema"]

    def read(message: bytes | None) -> Any:
        return None if message is None else avro.read(message, schema_text)

    def registered(subject: str) -> list[Any]:
        return [json.loads(schema_registry.request("GET", f"/subjects/{subject}/versions/{v}")["schema"])
                for v in schema_registry.request("GET", f"/subjects/{subject}/versions")]

    topics = [f"zoo.{table}" for table in zoo.TABLES]
    if "provide.transaction.metadata" in options:
        topics.append("transaction")
    # but for binlake's own topics, the schema change topics (compared in test_debezium_schema_changes.py and
    # test_avro_registry.py) and Debezium's schema history
    assert {t[len(ours):] for t in published if not t.startswith(f"{ours}._") and t != ours} == \
           {t[len(theirs):] for t in real if t != theirs and t != f"{theirs}.history"}
    for topic in topics:
        for role in ("key", "value"):
            mine, debezium = registered(f"{ours}.{topic}-{role}"), registered(f"{theirs}.{topic}-{role}")
            assert _debezium_view(dbz.renamed(mine, ours, theirs)) == debezium, f"{topic}-{role}"
        mine, debezium = published[f"{ours}.{topic}"], real[f"{theirs}.{topic}"]
        assert len(mine) == len(debezium), topic
        for i, ((key, value), (their_key, their_value)) in enumerate(zip(mine, debezium, strict=True)):
            where = f"{topic} event {i}"
            assert read(key) == read(their_key), where
            if their_value is None:
                assert value is None, f"{where}: a tombstone"
                continue
            got = _debezium_view(dbz.renamed(_comparable(read(value)), ours, theirs))
            expected = _comparable(read(their_value))
            for field in expected:
                assert got[field] == expected[field], f"{where}: {field}"
            assert got == expected, where


# NOT NULL columns with a DEFAULT: binlake's schemas carry it as Debezium's do (with schema.history), so that a
# column added NOT NULL with a DEFAULT is a compatible next version under BACKWARD; but for those listed
DEFAULTS = [("n", "INT NOT NULL DEFAULT 7"), ("neg", "SMALLINT NOT NULL DEFAULT -3"),
            ("bu", "BIGINT UNSIGNED NOT NULL DEFAULT 5"), ("s", "VARCHAR(10) NOT NULL DEFAULT 'x y'"),
            ("tx", "TEXT NOT NULL DEFAULT 'long'"), ("d", "DECIMAL(6,2) NOT NULL DEFAULT 1.5"),
            ("dt", "DATE NOT NULL DEFAULT '2024-02-29'"),
            ("dtm", "DATETIME(3) NOT NULL DEFAULT '2001-02-03 04:05:06.789'"),
            ("dt6", "DATETIME(6) NOT NULL DEFAULT '2001-02-03 04:05:06.000007'"),
            ("e", "ENUM('a','b') NOT NULL DEFAULT 'b'"), ("st", "SET('x','y','z') NOT NULL DEFAULT 'z,x'"),
            ("b", "BIT(3) NOT NULL DEFAULT b'101'"), ("b1", "BIT(1) NOT NULL DEFAULT b'1'"),
            ("bo", "BOOLEAN NOT NULL DEFAULT TRUE"), ("tm", "TIME NOT NULL DEFAULT '01:02:03'"),
            ("f", "FLOAT NOT NULL DEFAULT 1.25"), ("y", "YEAR NOT NULL DEFAULT 2020"),
            ("ts", "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"),
            ("ts2", "TIMESTAMP NOT NULL DEFAULT '2020-01-01 00:00:00'"),
            ("bin", "VARBINARY(4) NOT NULL DEFAULT x'00ff'")]
# Debezium gives CURRENT_TIMESTAMP as the epoch and a TIMESTAMP literal as UTC (binlake cannot know the DDL
# session's time zone), a binary column's default as the text of SHOW CREATE TABLE's escapes: binlake gives none
NO_DEFAULT = {"ts", "ts2", "bin"}


def _without_default(schema: dict[str, Any], columns: set[str]) -> dict[str, Any]:
    """Debezium's value schema with no default on ``columns`` (the Value record is defined in ``before``)."""
    value = schema["fields"][0]["type"][1]
    for field in value["fields"]:
        if field["name"] in columns:
            field.pop("default", None)
            kind = field["type"]
            if isinstance(kind, dict):
                kind.pop("connect.default", None)
                field["type"] = kind if len(kind) > 1 else kind["type"]
    return schema


def test_column_defaults_as_debezium_registers_them(make_mariadb, kafka, kafka_connect, schema_registry,
                                                    monkeypatch) -> None:
    """Defaults of columns captured at the start (information_schema), read back from the history topic by each
    later run, and of the columns an ALTER adds or sets or drops the default of (the DDL's)."""
    server = make_mariadb(binlog_row_metadata="FULL")
    server.execute("CREATE DATABASE dz")
    conn = server.connect("dz")
    conn.autocommit(True)
    conn.cursor().execute(f"CREATE TABLE t (id INT PRIMARY KEY, {', '.join(f'{c} {t}' for c, t in DEFAULTS)})")
    theirs, ours = "dadflt", "badflt"
    for name, value in {"BINLAKE_KAFKA_FORMAT": "debezium-avro", "BINLAKE_FILTERS_INCLUDE": "dz.*",
                        "BINLAKE_SCHEMA_HISTORY": "always",
                        "BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_URL": schema_registry.url}.items():
        monkeypatch.setenv(name, value)
    run_daemon(server, kafka, ours)
    dbz.start_connector(kafka_connect, server, kafka, theirs, "dz", **dbz.avro_converters(schema_registry))
    try:
        conn.cursor().execute("INSERT INTO t (id) VALUES (1)")
        conn.cursor().execute("INSERT INTO t VALUES (2, -7, 3, 18446744073709551615, 's', 't', -9999.99, '1970-01-01',"
                              " '1970-01-01 00:00:00', '2038-01-19 03:14:07.999999', 'a', '', b'0', b'0', FALSE,"
                              " '-838:59:59', -3.5, 1901, '2030-01-01 00:00:00', '2030-01-01 00:00:01', x'')")
        run_daemon(server, kafka, ours)
        dbz.wait_for(kafka, theirs, "dz.t", 2, kafka_connect)
        for prefix in (ours, theirs):
            schema_registry.request("PUT", f"/config/{prefix}.dz.t-value", {"compatibility": "BACKWARD"})
        conn.cursor().execute("ALTER TABLE t ADD COLUMN added INT NOT NULL DEFAULT 42, "
                              "ADD COLUMN label VARCHAR(5) NOT NULL DEFAULT 'new' AFTER n, "
                              "ALTER COLUMN neg SET DEFAULT 8, ALTER s DROP DEFAULT")
        conn.cursor().execute("INSERT INTO t (id, s, added) VALUES (3, 'v', 43)")
        run_daemon(server, kafka, ours)
        dbz.wait_for(kafka, theirs, "dz.t", 3, kafka_connect)
        published, real = dbz.messages(kafka, ours), dbz.messages(kafka, theirs)
    finally:
        kafka_connect.delete(theirs)

    @functools.cache
    def schema_text(schema_id: int) -> str:
        return schema_registry.request("GET", f"/schemas/ids/{schema_id}")["schema"]

    for role in ("key", "value"):
        subject = f"dz.t-{role}"
        mine, debezium = [schema_registry.request("GET", f"/subjects/{p}.{subject}/versions") for p in (ours, theirs)]
        assert mine == debezium == ([1] if role == "key" else [1, 2]), subject
        for version in mine:
            got, expected = [json.loads(schema_registry.request("GET", f"/subjects/{p}.{subject}/versions/{version}")
                                        ["schema"]) for p in (ours, theirs)]
            if role == "value":
                expected = _without_default(expected, NO_DEFAULT)
            assert dbz.renamed(got, ours, theirs) == expected, f"{subject} version {version}"
    mine, debezium = published[f"{ours}.dz.t"], real[f"{theirs}.dz.t"]
    assert len(mine) == len(debezium) == 3
    for i, ((key, value), (their_key, their_value)) in enumerate(zip(mine, debezium, strict=True)):
        assert avro.read(key, schema_text) == avro.read(their_key, schema_text), f"event {i}"
        got, expected = (_comparable(avro.read(v, schema_text)) for v in (value, their_value))
        assert dbz.renamed(got, ours, theirs) == expected, f"event {i}"
