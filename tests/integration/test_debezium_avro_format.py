"""`kafka.format: debezium-avro` against a real Debezium: the type zoo's binlog through Debezium's MariaDB connector
3.5.0.Final with an Avro converter (Apicurio's, whose AvroData is Confluent's) into the harness's registry, and
through binlake into the same registry: per table the registered key and value schemas (field names, types,
logical types, connect.name/version/parameters/default, optionality, order), and every change event read back
with the schema of its id, compared field by field; the transaction topics too. The one intended difference is
test_debezium_format.py's: ENUM/SET members outside the Basic Multilingual Plane (docs/DEBEZIUM.md)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from harness import avro, zoo
from harness import debezium as dbz

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
    # but for binlake's own topics, Debezium's schema change topic and its schema history
    assert {t[len(ours):] for t in published if not t.startswith(f"{ours}._")} == \
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
