"""A snapshot's rows as Debezium publishes them: tables read by a real Debezium MariaDB connector's initial
snapshot and by binlake's (`snapshot: initial`, chunks of two rows, a table without a key read in one pass), each
table's read events compared: the row, `op` r and `source.snapshot`'s markers (first, first_in_data_collection,
true, last_in_data_collection, last). The rest of a snapshot row's source block differs by intent
(docs/DEBEZIUM.md)."""

from __future__ import annotations

import pytest
from harness import debezium as dbz
from harness.daemon import run_daemon

pytestmark = pytest.mark.integration

TABLES = {  # name -> (definition, rows)
    "a": ("id INT PRIMARY KEY, v VARCHAR(5)", [(i, f"a{i}") for i in range(1, 6)]),
    "b": ("v INT, w VARCHAR(5)", [(i, f"b{i}") for i in range(1, 4)]),  # no key: one pass
    "c": ("id INT PRIMARY KEY", []),  # empty
    "d": ("id INT PRIMARY KEY, v INT", [(1, 1)]),
    "e": ("id INT PRIMARY KEY, v INT", [(1, 1), (2, 2), (3, 3), (4, 4)]),  # exactly two chunks
}


def test_snapshot_markers_as_debezium_publishes_them(make_mariadb, kafka, kafka_connect, monkeypatch) -> None:
    server = make_mariadb(binlog_row_metadata="FULL")
    server.execute("CREATE DATABASE snap")
    conn = server.connect("snap")
    conn.autocommit(True)
    for name, (columns, rows) in TABLES.items():
        conn.cursor().execute(f"CREATE TABLE {name} ({columns})")
        for row in rows:
            conn.cursor().execute(f"INSERT INTO {name} VALUES ({', '.join(map(repr, row))})")
    for key, value in {"BINLAKE_KAFKA_FORMAT": "debezium-json", "BINLAKE_FILTERS_INCLUDE": "snap.*",
                       "BINLAKE_SNAPSHOT": "initial", "BINLAKE_SNAPSHOT_CHUNK_ROWS": "2",
                       "BINLAKE_SCHEMA_HISTORY": "always"}.items():  # the tables' structures (tableChanges)
        monkeypatch.setenv(key, value)
    ours, theirs = "bsnap", "dsnap"
    run_daemon(server, kafka, ours)
    dbz.start_connector(kafka_connect, server, kafka, theirs, "snap")
    try:
        dbz.wait_for(kafka, theirs, "snap.e", len(TABLES["e"][1]), kafka_connect)
        real, mine = dbz.messages(kafka, theirs), dbz.messages(kafka, ours)
    finally:
        kafka_connect.delete(theirs)

    def reads(messages: list) -> list[tuple]:
        return [(p["op"], p["source"]["snapshot"], p["after"]) for p in
                (dbz.decoded(m)[1]["payload"] for m in messages if m[1] is not None)]

    markers = []
    for name, (_, rows) in TABLES.items():
        topic = f"snap.{name}"
        got, want = reads(mine.get(f"{ours}.{topic}", [])), reads(real.get(f"{theirs}.{topic}", []))
        assert len(want) == len(rows), topic
        assert got == want, topic
        markers += [marker for _, marker, _ in got]
    assert markers == ["first", "true", "true", "true", "last_in_data_collection",  # a
                       "first_in_data_collection", "true", "last_in_data_collection",  # b (c: empty)
                       "last_in_data_collection",  # d: its only row
                       "first_in_data_collection", "true", "true", "last"]  # e

    # the snapshot's schema change events, before its rows
    def changes(messages: list) -> list[dict]:
        out = []
        for message in messages:
            key, value = dbz.decoded(message)
            payload = {k: v for k, v in value["payload"].items() if k != "ts_ms"}
            payload["source"] = {k: v for k, v in payload["source"].items()
                                 if k not in ("ts_ms", "ts_us", "ts_ns", "name")}
            out.append({"key": key, "schema": value["schema"], **payload})
        return out

    got, want = changes(mine[ours]), changes(real[theirs])
    assert [e["ddl"][:30] for e in got] == [e["ddl"][:30] for e in want]
    assert len(got) == 1 + len(TABLES) + 3 + len(TABLES)  # SET; DROP TABLEs; DROP, CREATE, USE DATABASE; CREATEs
    assert all(e["tableChanges"][0]["table"]["columns"] for e in got if e["ddl"].startswith("CREATE TABLE"))
    for a, b in zip(got, want, strict=True):
        assert a["source"] == b["source"], a["ddl"]
        assert a == b, a["ddl"]
