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
