"""XA transactions (issue 37) on MariaDB 10.11 and Oracle MySQL 8.0: a prepared transaction's rows reach Kafka's
consumers and the lake only once its XA COMMIT is in the binlog, never after XA ROLLBACK, across kill -9 of the
daemon between a prepare and its outcome; XA COMMIT ... ONE PHASE is a plain commit. Proof is the server's own
SELECT (and its SHOW BINLOG EVENTS for where each XA COMMIT is), against `binlake consume`'s events applied in
sequence order and against the landed Delta mirrors, both while transactions are still prepared and at the end.
The Debezium format is compared with a real Debezium MariaDB connector's events."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from harness import debezium as dbz

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E
from ingester.daemon.kafka_io import read_checkpoint
from ingester.records.format import file_number
from tests.harness.daemon import caught_up, run_daemon, start_daemon
from tests.harness.land import plain_rows, run_land

pytestmark = pytest.mark.integration

SEED = ["INSERT INTO a VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3), (4, 'four', 4), (5, 'five', 5)",
        "INSERT INTO b VALUES (1, 'b1'), (2, 'b2'), (3, 'b3')"]
ROLLED_BACK = {30, 50, 100, 130}  # ids only rolled-back XA transactions write


def _xid(name: str) -> str:
    return f"X'{name.encode().hex()}',X'',1"


def _prepare(server, db: str, name: str, statements: list[str], outcome: str | None = None) -> None:
    """An XA transaction on a connection of its own: its statements, XA END and XA PREPARE, then ``outcome`` (COMMIT,
    ROLLBACK, ONE PHASE) or, with None, left prepared (the connection closes: any session may resolve it)."""
    with server.connect(db) as conn, conn.cursor() as cur:
        cur.execute(f"XA START '{name}'")
        for statement in statements:
            cur.execute(statement)
        cur.execute(f"XA END '{name}'")
        if outcome == "ONE PHASE":
            cur.execute(f"XA COMMIT '{name}' ONE PHASE")
            return
        cur.execute(f"XA PREPARE '{name}'")
        if outcome is not None:
            cur.execute(f"XA {outcome} '{name}'")


def _sql(server, db: str, *statements: str) -> None:
    with server.connect(db) as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def _prepared_xids(kafka, prefix: str, server) -> set[str]:
    checkpoint = read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}") or {}
    return set(checkpoint.get("prepared", {}))


def _applied(kafka, prefix: str, db: str) -> tuple[dict[str, dict], list[Any]]:
    """`binlake consume`'s events of the database's tables applied in sequence order (inserts and updates upsert the
    after image, deletes remove the key): table -> {(id,): row}; and the events."""
    tables: dict[str, dict] = {"a": {}, "b": {}}
    events = [item for item in committed_record_events(kafka.bootstrap, prefix)
              if isinstance(item.event, E.RowsEvent) and item.event.database == db]
    for item in events:
        for change in item.event.rows:
            if "before" in change:
                tables[item.event.table].pop((change["before"]["id"],), None)
            if "after" in change:
                tables[item.event.table][(change["after"]["id"],)] = change["after"]
    return tables, events


def _xa_commits(server, first_file: str) -> dict[str, tuple[int, int, str]]:
    """Where the server logged each XA COMMIT (its SHOW BINLOG EVENTS): xid -> (file number, position, the GTID of
    its transaction)."""
    out: dict[str, tuple[int, int, str]] = {}
    for (name,) in [(r[0],) for r in server.execute("SHOW BINARY LOGS") if r[0] >= first_file]:
        gtid = ""
        for _, pos, kind, _, _, info in server.execute(f"SHOW BINLOG EVENTS IN '{name}'"):
            if kind == "Gtid":  # MariaDB: "GTID 0-1-9" / "BEGIN GTID ..."; MySQL: SET @@SESSION.GTID_NEXT= '...'
                gtid = info.split("'")[1] if "GTID_NEXT" in info else info.split()[-1]
            elif kind == "Query" and info.startswith("XA COMMIT"):
                out[info.split(" ", 2)[2].strip()] = (file_number(name), pos, gtid)
    return out


def _assert_mirrors(lake, conn, db: str) -> None:
    """The landed mirrors (as delta-rs reads them) equal the server's SELECT; the change logs hold no row of a
    rolled-back transaction."""
    import deltalake

    for table in ("a", "b"):
        rows = deltalake.DeltaTable(str(lake / db / table)).to_pyarrow_table().to_pylist()
        mirror = {(r["id"],): {c: v for c, v in r.items() if not c.startswith("_binlake")} for r in rows}
        assert mirror == plain_rows(conn, table, "id"), table
        changes = deltalake.DeltaTable(str(lake / db / f"{table}__changes")).to_pyarrow_table()
        ids = {image["id"] for column in ("before", "after") for image in changes.column(column).to_pylist() if image}
        assert ids and not ids & ROLLED_BACK, table


@pytest.mark.parametrize("kind", ["mariadb", "mysql80"])
def test_prepared_rows_are_published_at_their_commit_only(kind, request, kafka, tmp_path, capsys) -> None:
    server = request.getfixturevalue(kind)
    db, prefix = f"xa_{kind}", f"xa{kind}"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    _sql(server, db, "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(40), n INT)",
         "CREATE TABLE b (id INT PRIMARY KEY, v VARCHAR(40))")
    start = server.current_binlog_position()
    env = {"BINLAKE_FILTERS_INCLUDE": f"{db}.*", "BINLAKE_SOURCE_START_FILE": start.file,
           "BINLAKE_SOURCE_START_POSITION": str(start.position)}
    log = open(tmp_path / "daemon.log", "ab")  # the daemons' stderr, across their restarts
    daemon = start_daemon(server, kafka, prefix, 4601, log, env)
    try:
        _sql(server, db, *SEED)
        _prepare(server, db, "x1", ["INSERT INTO a VALUES (10, 'xa-committed', 10)", "UPDATE a SET n = 11 WHERE id = 1",
                                    "DELETE FROM a WHERE id = 2"], "COMMIT")
        _prepare(server, db, "x2", ["INSERT INTO a VALUES (30, 'xa-rolled-back', 30)"], "ROLLBACK")  # issue 37
        _prepare(server, db, "x3", ["INSERT INTO a VALUES (40, 'one phase', 40)", "INSERT INTO b VALUES (40, 'b40')"],
                 "ONE PHASE")
        # several prepared at once, their outcomes interleaved with each other and with ordinary transactions
        _prepare(server, db, "p1", ["INSERT INTO a VALUES (50, 'p1', 50)", "UPDATE b SET v = 'p1' WHERE id = 1"])
        _prepare(server, db, "p2", ["INSERT INTO b VALUES (60, 'p2')", "DELETE FROM a WHERE id = 3"])
        _sql(server, db, "INSERT INTO a VALUES (70, 'plain', 70)")
        _prepare(server, db, "p3", ["INSERT INTO a VALUES (80, 'p3', 80)", "UPDATE a SET v = 'p3' WHERE id = 4"])
        _sql(server, db, "XA COMMIT 'p2'", "INSERT INTO b VALUES (90, 'plain')", "XA ROLLBACK 'p1'")
        _prepare(server, db, "p4", ["INSERT INTO b VALUES (100, 'p4')"])
        _sql(server, db, "UPDATE a SET n = n + 100 WHERE id = 70")
        caught_up(server, kafka, prefix, daemon)
        assert _prepared_xids(kafka, prefix, server) == {_xid("p3"), _xid("p4")}
        capsys.readouterr()
        assert main(["status", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix]) == 0
        shown = capsys.readouterr().out
        assert f"XA transaction {_xid('p3')} prepared" in shown and f"its changes of {db}.a held back" in shown
        assert f"XA transaction {_xid('p4')} prepared" in shown and f"its changes of {db}.b held back" in shown

        conn = server.connect(db)
        lake = tmp_path / "lake"
        assert run_land(kafka, prefix, lake) == 0  # while p3 and p4 are prepared: neither is in the SELECT
        _assert_mirrors(lake, conn, db)

        daemon.send_signal(signal.SIGKILL)  # between the prepares and their outcomes
        daemon.wait()
        _sql(server, db, "XA COMMIT 'p3'", "INSERT INTO a VALUES (120, 'while down', 120)")
        _prepare(server, db, "p5", ["INSERT INTO a VALUES (110, 'p5', 110)", "UPDATE b SET v = 'p5' WHERE id = 2"])
        daemon = start_daemon(server, kafka, prefix, 4601, log, env)
        caught_up(server, kafka, prefix, daemon)
        assert _prepared_xids(kafka, prefix, server) == {_xid("p4"), _xid("p5")}
        daemon.send_signal(signal.SIGKILL)  # again, and the outcomes come once it runs again
        daemon.wait()
        daemon = start_daemon(server, kafka, prefix, 4601, log, env)
        caught_up(server, kafka, prefix, daemon)
        _prepare(server, db, "p6", ["INSERT INTO b VALUES (130, 'p6')"])
        _sql(server, db, "XA ROLLBACK 'p4'", "UPDATE a SET n = -1 WHERE id = 120", "XA COMMIT 'p5'",
             "XA ROLLBACK 'p6'")
        caught_up(server, kafka, prefix, daemon)
        assert _prepared_xids(kafka, prefix, server) == set()
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
        log.close()

    tables, events = _applied(kafka, prefix, db)
    for table in ("a", "b"):
        assert tables[table] == plain_rows(conn, table, "id"), table
    assert not {c[image]["id"] for item in events for c in item.event.rows for image in c} & ROLLED_BACK
    # each committed XA transaction's rows at its XA COMMIT (the server's own listing), numbered in binlog order
    commits = _xa_commits(server, start.file)
    assert set(commits) == {_xid(x) for x in ("x1", "p2", "p3", "p5")}
    released = [item for item in events if item.seq.sub]
    for name, rows_events in (("x1", 3), ("p2", 2), ("p3", 2), ("p5", 2)):
        number, position, gtid = commits[_xid(name)]
        mine = [item for item in released if (item.seq.file_number, item.seq.position) == (number, position)]
        assert [item.seq.sub for item in mine] == list(range(1, rows_events + 1)), name
        assert {item.gtid for item in mine} == {gtid}, name
    assert len(released) == 9
    sequences = [item.seq for item in events]
    assert sequences == sorted(sequences)

    assert run_land(kafka, prefix, lake) == 0  # the rest lands on top of the first run's mirrors
    _assert_mirrors(lake, conn, db)
    conn.close()


def _payloads(messages: dict[str, list[Any]], prefix: str, topic: str) -> list[dict[str, Any]]:
    """A table topic's change events (schema and payload; tombstones left out), the envelope's processing time
    removed."""
    out = []
    for message in messages[f"{prefix}.{topic}"]:
        value = dbz.decoded(message)[1]
        if value is not None:
            for name in ("ts_ms", "ts_us", "ts_ns"):
                value["payload"].pop(name)
            out.append(value)
    return out


def _ends(messages: list[Any]) -> dict[str, tuple[int, list[tuple[str, int]]]]:
    """The transaction topic's END messages: id -> (event count, per table)."""
    out = {}
    for message in messages:
        payload = dbz.decoded(message)[1]["payload"]
        if payload["status"] == "END":
            out[payload["id"]] = (payload["event_count"], sorted((c["data_collection"], c["event_count"])
                                                                 for c in payload["data_collections"]))
    return out


def test_debezium_json_of_a_committed_xa_transaction_equals_debeziums(make_mariadb, kafka, kafka_connect,
                                                                        monkeypatch) -> None:
    """binlake's debezium-json change events of committed XA transactions equal a real Debezium MariaDB
    connector's field by field but where they are in the binlog (intended: binlake publishes them at the XA
    COMMIT, Debezium as they stream, at the prepare: source.gtid and pos, and the transaction's id); a rolled-back
    one's are not in binlake's (Debezium publishes them: it ignores XA statements). The transaction topic has a
    BEGIN and an END for each XA COMMIT's transaction with its events' counts (Debezium 3.5.0's has a BEGIN of the
    prepare's GTID and no END)."""
    server = make_mariadb()
    db, ours, theirs = "xadbz", "bxadbz", "dxadbz"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    _sql(server, db, "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(40), n INT)",
         "CREATE TABLE b (id INT PRIMARY KEY, v VARCHAR(40))")
    settings = {"provide.transaction.metadata": "true"}
    start = server.current_binlog_position()
    for name, value in {"BINLAKE_FILTERS_INCLUDE": f"{db}.*", "BINLAKE_KAFKA_FORMAT": "debezium-json",
                        "BINLAKE_SOURCE_START_FILE": start.file, "BINLAKE_SOURCE_START_POSITION": str(start.position),
                        **dbz.binlake_settings(settings)}.items():
        monkeypatch.setenv(name, value)
    dbz.start_connector(kafka_connect, server, kafka, theirs, db, **settings)
    try:
        _sql(server, db, *SEED)
        _prepare(server, db, "x1", ["INSERT INTO a VALUES (10, 'xa-committed', 10)", "UPDATE a SET n = 11 WHERE id = 1",
                                    "DELETE FROM b WHERE id = 2"], "COMMIT")
        _prepare(server, db, "x2", ["INSERT INTO a VALUES (30, 'xa-rolled-back', 30)"], "ROLLBACK")
        _prepare(server, db, "x3", ["INSERT INTO a VALUES (20, 'later', 20)", "INSERT INTO b VALUES (20, 'b20')"])
        _sql(server, db, "INSERT INTO b VALUES (21, 'between')", "XA COMMIT 'x3'")
        run_daemon(server, kafka, ours)
        dbz.wait_for(kafka, theirs, f"{db}.a", 9, kafka_connect)
        dbz.wait_for(kafka, theirs, f"{db}.b", 7, kafka_connect)
        published, real = dbz.messages(kafka, ours), dbz.messages(kafka, theirs)
    finally:
        kafka_connect.delete(theirs)
    commits = _xa_commits(server, start.file)
    at_commit = {gtid: pos for _, pos, gtid in commits.values()}
    assert len(at_commit) == 2
    xa_events: dict[str, list[tuple[str, Any]]] = {}
    for table in ("a", "b"):
        mine = _payloads(published, ours, f"{db}.{table}")
        theirs_ = {(e["payload"]["op"], str(e["payload"]["before"]), str(e["payload"]["after"])): e
                   for e in _payloads(real, theirs, f"{db}.{table}")}
        assert len(theirs_) == len(_payloads(real, theirs, f"{db}.{table}"))  # each change once: pairs by images
        for i, event in enumerate(mine):
            where = f"{table} event {i}"
            payload = event["payload"]
            other = theirs_.pop((payload["op"], str(payload["before"]), str(payload["after"])))
            mine_, their = dbz.renamed(event, ours, theirs), other
            assert mine_["schema"] == their["schema"], where
            source, their_source = dict(mine_["payload"]["source"]), dict(their["payload"]["source"])
            transaction, their_transaction = dict(payload["transaction"]), dict(their["payload"]["transaction"])
            if source["gtid"] in at_commit:  # an XA transaction's row: at its XA COMMIT
                assert source["pos"] == at_commit[source["gtid"]] and transaction["id"] == source["gtid"], where
                assert their_source["gtid"] != source["gtid"] and their_source["pos"] < source["pos"], where
                xa_events.setdefault(source["gtid"], []).append((f"{db}.{table}", payload))
                for block in (source, their_source):
                    del block["gtid"], block["pos"]
                del transaction["id"], their_transaction["id"]
            assert source == their_source, where
            assert transaction == their_transaction, where
            assert {k: v for k, v in payload.items() if k not in ("source", "transaction")} == \
                {k: v for k, v in other["payload"].items() if k not in ("source", "transaction")}, where
        # what Debezium has and binlake not: the rolled-back transaction's row
        assert [e["payload"]["after"]["id"] for e in theirs_.values()] == ([30] if table == "a" else []), table
    assert sorted(len(v) for v in xa_events.values()) == [2, 3]
    mine_ends, their_ends = _ends(published[f"{ours}.transaction"]), _ends(real[f"{theirs}.transaction"])
    for gtid, (count, per_table) in mine_ends.items():
        if gtid in at_commit:
            tables = [t for t, _ in xa_events[gtid]]
            assert (count, per_table) == (len(tables), sorted((t, tables.count(t)) for t in set(tables))), gtid
            assert gtid not in their_ends  # Debezium ends no XA transaction
        else:
            assert their_ends[gtid] == (count, per_table), gtid
    assert set(mine_ends) - set(at_commit) == set(their_ends)


def test_an_xa_transaction_prepared_before_the_snapshot_is_said(mariadb, kafka, monkeypatch, capsys) -> None:
    """Prepared at the snapshot's point: its rows are in neither the snapshot nor the stream. Said at the snapshot
    (XA RECOVER) and, never silent, at its XA COMMIT, naming the xid, the position and what to do."""
    db, prefix = "xa_before", "xabefore"
    mariadb.execute(f"DROP DATABASE IF EXISTS {db}")
    mariadb.execute(f"CREATE DATABASE {db}")
    _sql(mariadb, db, "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(40), n INT)", SEED[0])
    _prepare(mariadb, db, "early", ["INSERT INTO a VALUES (60, 'early', 60)"])
    monkeypatch.setenv("BINLAKE_FILTERS_INCLUDE", f"{db}.*")
    capsys.readouterr()
    run_daemon(mariadb, kafka, prefix, "--snapshot", "initial")
    assert f"XA transaction {_xid('early')} is prepared at the snapshot's point" in capsys.readouterr().err
    _sql(mariadb, db, "XA COMMIT 'early'")
    commit = _xa_commits(mariadb, mariadb.binlog_files()[0].name)[_xid("early")]
    run_daemon(mariadb, kafka, prefix)
    [warning] = [line for line in capsys.readouterr().err.splitlines() if "WARNING binlake.xa XA COMMIT" in line]
    assert _xid("early") in warning and f":{commit[1]}:" in warning and "binlake snapshot --tables" in warning
    tables, _ = _applied(kafka, prefix, db)
    assert sorted(tables["a"]) == [(i,) for i in range(1, 6)]  # what the warning says: 60 is not published
