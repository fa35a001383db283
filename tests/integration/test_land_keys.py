"""Issue 20: mirrors of tables without a PRIMARY KEY. A table whose UNIQUE index of NOT NULL columns the
server uses as its key gets a mirror kept by it, whatever the server's binlog_row_metadata (FULL: the
TABLE_MAP names it; NO_LOG, MariaDB's default: the schema history follows it); a table without any key
gets one by the columns land.keys names; a key that changes stops the query instead of mixing two keys in
one mirror. Proof: every mirror equals the server's own SELECT, as Spark and as delta-rs read it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ingester.cli.main import main
from tests.harness.delta_rs import assert_delta_rs_mirror
from tests.harness.land import lake_frame, plain_rows, run_land

pytestmark = pytest.mark.integration
DB = "ukeys"


def _daemon(server: Any, kafka: Any, prefix: str, *extra: str) -> None:
    assert main(["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                 "--server-id", "4646", "--exit-at-end", *extra]) == 0


def _land_fails(kafka: Any, prefix: str, lake: Path, capsys: Any, *extra: str) -> str:
    """A land run that stops (exit 2): what it printed on stderr."""
    capsys.readouterr()
    assert run_land(kafka, prefix, lake, *extra) == 2
    return capsys.readouterr().err


def _mirror(spark, lake: Path, table: str, key: list[str]) -> dict:
    """The mirror's rows by key (without binlake's own columns), as lake_frame reads them."""
    df = lake_frame(spark, lake, DB, table)
    columns = [c for c in df.columns if not c.startswith("_binlake")]
    read = df.collect()
    rows = {tuple(r[k] for k in key): {c: r[c] for c in columns} for r in read}
    assert len(rows) == len(read), f"{table}: two mirror rows of one key"
    return rows


def _assert_mirrors(spark, lake: Path, conn: Any, tables: dict[str, list[str]]) -> None:
    """Every mirror equals the server's SELECT (read by delta-rs's query engine and by its table reader, whose
    protocol is checked), and records its key."""
    import deltalake

    for table, key in tables.items():
        rows = _mirror(spark, lake, table, key)
        assert rows == plain_rows(conn, table, ",".join(key)), table
        assert_delta_rs_mirror(lake / DB / table, rows, list(next(iter(rows.values()))), key)
        configuration = deltalake.DeltaTable(str(lake / DB / table)).metadata().configuration
        assert configuration["binlake.key"] == "[" + ",".join(f'"{k}"' for k in key) + "]", table


def _dml(cur: Any) -> None:
    """Inserts, updates of values and of keys (moves, a swap through a free key, a freed key reused), deletes."""
    cur.execute("INSERT INTO acct (alt, region, code, balance, note) VALUES (NULL, 1, 'a', 1.50, 'x'),"
                " (NULL, 1, 'b', 2, NULL), (7, 2, 'a', 3, 'é'), (8, 2, 'b', 4, 'y'), (NULL, 3, 'c', 5, 'z')")
    cur.execute("INSERT INTO mail VALUES ('ann@x', 1), ('bob@x', 2), ('cy@x', 3), ('dee@x', 4)")
    cur.execute("INSERT INTO plain VALUES (1, 1), (1, 1), (2, 2)")
    cur.execute("UPDATE acct SET balance = balance * 10 WHERE region = 1")
    cur.execute("UPDATE acct SET code = 'z' WHERE region = 2 AND code = 'a'")  # a key moves
    cur.execute("UPDATE acct SET code = 'tmp' WHERE region = 1 AND code = 'a'")  # a swap, through a free key
    cur.execute("UPDATE acct SET code = 'a' WHERE region = 1 AND code = 'b'")
    cur.execute("UPDATE acct SET code = 'b' WHERE region = 1 AND code = 'tmp'")
    cur.execute("DELETE FROM acct WHERE region = 3")
    cur.execute("INSERT INTO acct (alt, region, code, balance) VALUES (9, 3, 'c', 6)")  # a freed key reused
    cur.execute("UPDATE mail SET email = 'robert@x', n = 20 WHERE email = 'bob@x'")
    cur.execute("DELETE FROM mail WHERE email = 'cy@x'")
    cur.execute("UPDATE plain SET y = 3 WHERE x = 1")
    cur.execute("INSERT INTO doc VALUES (2, 'two', 'b'), (3, 'three', NULL)")
    cur.execute("UPDATE doc SET body = 'one!', tag = 'a' WHERE id = 1")
    cur.execute("DELETE FROM doc WHERE id = 3")


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL", "NO_LOG"])
def test_a_unique_key_of_not_null_columns_keys_the_mirror(make_mariadb, kafka, spark, tmp_path,
                                                         capsys, monkeypatch, metadata) -> None:
    server = make_mariadb(binlog_row_metadata=metadata)
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    conn = server.connect(DB)
    with conn.cursor() as cur:
        # a nullable UNIQUE index first, which is no key; the key is (region, code): led by an INT, so the
        # driver keeps the mirror
        cur.execute("CREATE TABLE acct (alt INT, code VARCHAR(10) NOT NULL, region INT NOT NULL,"
                    " balance DECIMAL(10,2), note TEXT, UNIQUE KEY alt_u (alt), UNIQUE KEY uk (region, code))")
        # keyed by a string: Spark's MERGE keeps the mirror
        cur.execute("CREATE TABLE mail (email VARCHAR(40) NOT NULL UNIQUE, n INT)")
        cur.execute("CREATE TABLE plain (x INT, y INT)")  # no key: a change log only
        # MariaDB's long UNIQUE indexes (a TEXT column, USING HASH) keep a hidden hash column after the
        # table's own in the row images (DB_ROW_HASH_<n>): no column of the table's lake tables
        cur.execute("CREATE TABLE doc (id INT PRIMARY KEY, body TEXT, tag VARCHAR(5), UNIQUE KEY ub (body),"
                    " UNIQUE KEY ut (tag) USING HASH)")
        cur.execute("INSERT INTO doc VALUES (1, 'one', NULL)")
        cur.execute("INSERT INTO acct VALUES (1, 'old', 9, 0.5, 'snapshot row')")
        cur.execute("INSERT INTO mail VALUES ('old@x', 0)")
    prefix, lake = f"ukey{metadata.lower().replace('_', '')}", tmp_path / "lake"
    _daemon(server, kafka, prefix, "--snapshot", "initial")  # rows read by the snapshot, keyed alike
    with conn.cursor() as cur:
        _dml(cur)
    _daemon(server, kafka, prefix)
    assert run_land(kafka, prefix, lake) == 0
    _assert_mirrors(spark, lake, conn, {"acct": ["region", "code"], "mail": ["email"], "doc": ["id"]})
    assert not (lake / DB / "plain").exists() and (lake / DB / "plain__changes").exists()
    changes = lake_frame(spark, lake, DB, "doc__changes")
    assert not [c for c in changes.columns if "HASH" in c.upper()] and changes.count() == 5  # 1 read, 4 changes

    # A PRIMARY KEY added to a table kept by its UNIQUE index: the mirror's key would change
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE mail ADD PRIMARY KEY (n)")
        cur.execute("INSERT INTO mail VALUES ('eve@x', 5)")
        cur.execute("UPDATE acct SET balance = 0 WHERE region = 1")
        cur.execute("ALTER TABLE doc ADD COLUMN n INT")  # after the table's columns, before the hidden ones
        cur.execute("INSERT INTO doc VALUES (4, 'four', 'd', 44)")
        cur.execute("UPDATE doc SET n = 1 WHERE id = 1")
    _daemon(server, kafka, prefix)
    err = _land_fails(kafka, prefix, lake, capsys)
    assert re.search(rf"binlake: error: `{DB}`.`mail`: its mirror is kept by the key \(`email`\), but its rows from "
                     r"binlog position \d+:\d+:\d+ \(file:position:index\) on are keyed by \(`n`\) .* keep the "
                     rf"mirror's key with land.keys \({DB}.mail: \[email\]\)", err), err
    # ... which land.keys can keep, as long as those columns identify the rows
    monkeypatch.setenv("BINLAKE_LAND_KEYS", f"{{{DB}.mail: [email]}}")
    assert run_land(kafka, prefix, lake) == 0
    _assert_mirrors(spark, lake, conn, {"acct": ["region", "code"], "mail": ["email"], "doc": ["id"]})


def test_land_keys_name_the_key_of_a_table_without_one(make_mariadb, kafka, spark, tmp_path,
                                                       capsys) -> None:
    server = make_mariadb(binlog_row_metadata="NO_LOG")
    server.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
    conn = server.connect(DB)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE events (source VARCHAR(10), seq INT, payload VARCHAR(20))")
    prefix, lake = "ukeyconf", tmp_path / "lake"
    config = tmp_path / "binlake.yaml"
    config.write_text(f"land:\n  keys:\n    {DB}.events: [SOURCE, seq]\n")  # names are case-insensitive
    _daemon(server, kafka, prefix)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO events VALUES ('a', 1, 'x'), ('a', 2, 'y'), ('b', 1, 'z'), ('b', 2, 'w')")
        cur.execute("UPDATE events SET payload = 'x2' WHERE source = 'a' AND seq = 1")
        cur.execute("UPDATE events SET seq = 3 WHERE source = 'b' AND seq = 2")  # a key moves
        cur.execute("DELETE FROM events WHERE source = 'a' AND seq = 2")
    _daemon(server, kafka, prefix)
    land = ["--config", str(config)]
    assert run_land(kafka, prefix, lake, *land) == 0
    _assert_mirrors(spark, lake, conn, {"events": ["source", "seq"]})

    # A NULL in a key column: no row of the mirror could be told from another of NULL there
    before = server.current_binlog_position()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO events VALUES ('c', NULL, 'n')")
    after = server.current_binlog_position()
    _daemon(server, kafka, prefix)
    err = _land_fails(kafka, prefix, lake, capsys, *land)
    found = re.search(rf"binlake: error: `{DB}`.`events`: its land.keys column `seq` is NULL in a row at binlog "
                      r"position (\d+):(\d+):0 \(file:position:index\)", err)
    assert found and before.file == after.file, err
    assert int(found[1]) == int(before.file.rsplit(".", 1)[1]) and before.position < int(found[2]) < after.position

    # A column the table does not have
    config.write_text(f"land:\n  keys:\n    {DB}.events: [source, nope]\n")
    err = _land_fails(kafka, prefix, lake, capsys, *land)
    assert f"binlake: error: land.keys: `{DB}`.`events` has no column `nope` (its columns: source, seq, payload)" \
        in err, err
    # ... and the configuration's own errors, at load
    config.write_text("land:\n  keys:\n    events: [source]\n")
    assert "land.keys: 'events' is not <db>.<table>" in _land_fails(kafka, prefix, lake, capsys, *land)
