"""A parked table (streaming_job/statements/parking.py; docs/LAND.md, "Parked tables"), on Delta and on Iceberg (a local
lake, Iceberg's Hadoop catalog): a table gets an ALTER that is no safe widening (latin1 text -> VARBINARY, a DECIMAL
scale) while another table takes a steady trickle of writes and a running land job (`--trigger 1s`) lands them. The job
parks every rewrite (land.park_rows 0).

The mirror's rewrite runs beside the batches. A rewrite of a few hundred rows takes milliseconds, so the job runs
with its parked tables' rewrites held at their start until the test opens a gate (tests/harness/park_gate.py);
everything else is the job as it is. While the rewrite waits: the park file says so, and batches go on landing the
other table (its rows written after the ALTER are in its mirror) and none of the parked table's changes made after
the ALTER. Then the job is killed with SIGKILL, on each format at another point of the park: on Iceberg as the
rewrite waits; on Delta once the gate lets the rewrite go and its catch-up (from Kafka) is held by another gate after
its first part has committed (the changes between the ALTER and a later ADD COLUMN of the table). `binlake status`
shows the park, and the job started again (no gate) runs the rewrite again and catches the table up (Iceberg), or
lands the catch-up again, its committed part skipped (Delta), and goes on.

And a RENAME TABLE that ties tables to a park (in-process runs, `--trigger available-now`): two tables swapped
(RENAME TABLE a TO tmp, b TO a, tmp TO b) in the batch whose ALTER parked one of them; and a parked table renamed
(RENAME TABLE p TO p2, q TO p) in a later batch, while its park's rewrite (failed once, run again) is still
rewriting; each table changed afterwards under its new name.

At the end every mirror equals the server's SELECT as a reader other than Spark and binlake reads it (delta-rs,
pyiceberg), and every row change of the binlog is once in the change logs (mariadb-binlog --verbose's counts), each
under the name its table had (docs/LAND.md, "Renames": a renamed table's change log stays with its name and ends with
the `rename` row the new name's starts or goes on with; the name left without a table: its mirror emptied and ended,
`binlake status` showing it renamed). binlake's Kafka source."""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from ingester.cli.main import main
from streaming_job.lake.files import LakeFiles
from streaming_job.lake.generations import change_log_name
from streaming_job.statements.parking import State, read_parks
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, daemon_running, run_daemon
from tests.harness.delta_rs import delta_rs_table
from tests.harness.iceberg import pyiceberg_table
from tests.harness.land import RunningLand, committed_batches, landed_everything, plain_rows, run_land
from tests.harness.park_gate import CATCH_UP_GATE, GATE
from tests.harness.workloads import Trickle

pytestmark = pytest.mark.integration
FORMATS = ["delta", "iceberg"]
ROWS = 300  # every rewrite parks (land.park_rows 0): a small table
ALTER = "ALTER TABLE big MODIFY a VARBINARY(40), MODIFY d DECIMAL(10,2)"
COLUMNS = ("op", "seq", "row_index", "rename_from", "rename_to")  # of a change log, read


def _read(lake: Path, db: str, table: str, lake_format: str) -> pa.Table | None:
    """A lake table as delta-rs or pyiceberg reads it (None: not there yet)."""
    if lake_format == "iceberg":
        return pyiceberg_table(lake, db, table)
    return delta_rs_table(lake / db / table) if (lake / db / table / "_delta_log").is_dir() else None


def _ids(lake: Path, db: str, table: str, lake_format: str) -> set[int]:
    found = _read(lake, db, table, lake_format)
    return set() if found is None else set(found.column("id").to_pylist())


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _assert_mirror(conn, lake: Path, db: str, table: str, lake_format: str) -> pa.Table:
    """The mirror (delta-rs's or pyiceberg's read) equals the server's SELECT of the table; the mirror."""
    want = {k[0]: {c: _plain(v) for c, v in r.items()} for k, r in plain_rows(conn, table, "id").items()}
    found = _read(lake, db, table, lake_format)
    assert found is not None, table
    names = list(next(iter(want.values())))
    assert {r["id"]: r for r in found.select(names).to_pylist()} == want, table
    return found


def _database(server, db: str, *statements: str) -> Any:
    """The test's own database, made afresh (the session's server holds other tests' databases), and its tables
    (``statements``, committed): a connection to it."""
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    conn.commit()
    return conn


def _landed_in_process(server, kafka, monkeypatch, tmp_path: Path, db: str, lake_format: str,
                       *statements: str) -> tuple[Any, Path, list[str]]:
    """The database ``db`` (its tables: ``statements``) captured alone (topic prefix ``db``), every rewrite parked,
    and landed in this process (`--trigger available-now`): a connection to it, the lake, and the land job's
    arguments."""
    lake, land = tmp_path / "lake", ["--format", lake_format, "--kafka-source", "binlake"]
    monkeypatch.setenv("BINLAKE_LAND_PARK_ROWS", "0")
    monkeypatch.setenv("BINLAKE_FILTERS_INCLUDE", f"{db}.*")
    conn = _database(server, db, *statements)
    run_daemon(server, kafka, db)
    assert run_land(kafka, db, lake, *land) == 0
    return conn, lake, land


def _status(kafka, db: str, lake: Path, lake_format: str, capfd) -> dict[str, Any]:
    """`binlake status --json`'s tables by name (the lake's checkpoint in ``_checkpoint``)."""
    capfd.readouterr()
    assert main(["status", "--kafka", kafka.bootstrap, "--topic-prefix", db, "--lake", str(lake), "--checkpoint",
                 str(lake / "_checkpoint"), "--format", lake_format, "--json"]) == 0
    return {t["table"]: t for t in orjson.loads(capfd.readouterr().out)["tables"]}


def _change_log(lake: Path, db: str, table: str, lake_format: str) -> list[list[dict[str, Any]]]:
    """A table name's change log, every generation's rows (in order of ``seq`` and ``row_index``) as delta-rs or
    pyiceberg reads them."""
    generations, number = [], 1
    while (found := _read(lake, db, change_log_name(table, number), lake_format)) is not None:
        rows = found.select([c for c in COLUMNS if c in found.column_names]).to_pylist()  # (rename_*: once a rename)
        generations.append(sorted(rows, key=lambda r: (r["seq"], r["row_index"])))
        number += 1
    return generations


def _assert_changes_once(server, lake: Path, db: str, lake_format: str, generations: dict[str, int]) -> None:
    """Every row change of the binlog once in its table's change logs (every generation's; ``generations``: how
    many each table name has: mariadb-binlog names a row change's table as it was named then)."""
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    for table, expected in generations.items():
        logs = _change_log(lake, db, table, lake_format)
        assert len(logs) == expected, table
        changes = [r for rows in logs for r in rows if r["op"] in ("insert", "update", "delete")]
        got = collections.Counter(r["op"] for r in changes)
        assert dict(got) == {op: counts[(op, table)] for op in ("insert", "update", "delete")
                             if counts[(op, table)]}, table
        assert len({(r["seq"], r["row_index"]) for r in changes}) == len(changes), (table, "twice")


def _assert_renamed(lake: Path, db: str, lake_format: str, pairs: list[tuple[str, str]], ended: dict[str, str],
                    status: dict[str, Any]) -> None:
    """One RENAME TABLE of ``pairs`` (old, new), as docs/LAND.md ("Table statements", "Renames") has it: change logs
    stay with names, each name's has a `rename` row per pair naming it (both names, ``db.table``), the same row
    (its ``seq``: the statement's plus the pair's step, in the pairs' order) in both names' change logs; a name new
    at the rename starts with its pair's row, a name left without a table (``ended``: old name -> the name it went
    to) ends with it, its mirror emptied and its ``binlake.ended`` naming the new one, and `binlake status`
    (``status``: its --json tables by name) shows it renamed."""
    seqs: dict[int, set[bytes]] = collections.defaultdict(set)
    for name in {n for pair in pairs for n in pair}:
        rows = [r for generation in _change_log(lake, db, name, lake_format) for r in generation]
        renames = [r for r in rows if r["op"] == "rename"]
        mine = [i for i, pair in enumerate(pairs) if name in pair]
        assert [(r.get("rename_from"), r.get("rename_to")) for r in renames] == [
            (f"{db}.{pairs[i][0]}", f"{db}.{pairs[i][1]}") for i in mine], name
        for i, r in zip(mine, renames, strict=True):
            seqs[i].add(r["seq"])
        if pairs[mine[0]][1] == name:  # a name new at the rename
            assert rows[0]["op"] == "rename" and rows[0]["rename_to"] == f"{db}.{name}", (name, rows[:3])
        if name in ended:
            assert (rows[-1]["op"], rows[-1]["rename_from"], rows[-1]["rename_to"]) == (
                "rename", f"{db}.{name}", f"{db}.{ended[name]}"), (name, rows[-3:])
            mirror = _read(lake, db, name, lake_format)
            assert mirror is not None and mirror.num_rows == 0, name
            properties = _properties(lake, db, name, lake_format)
            assert f"{db}.{ended[name]}" in orjson.loads(properties["binlake.ended"]).values(), properties
            assert (status[f"{db}.{name}"]["ended"] or "").startswith(f"renamed to {db}.{ended[name]} at "), status
        else:
            assert status[f"{db}.{name}"]["ended"] is None, status[f"{db}.{name}"]
    assert all(len(seqs[i]) == 1 for i in range(len(pairs))), seqs  # one row in both names' change logs
    assert sorted(seqs, key=lambda i: min(seqs[i])) == list(range(len(pairs))), seqs  # in the pairs' order


def _properties(lake: Path, db: str, table: str, lake_format: str) -> dict[str, str]:
    """A lake table's properties as delta-rs (its metadata's configuration) or pyiceberg reads them."""
    if lake_format == "iceberg":
        from pyiceberg.table import StaticTable

        return dict(StaticTable.from_metadata(str(lake / db / table)).properties)
    import deltalake

    return dict(deltalake.DeltaTable(str(lake / db / table)).metadata().configuration)


@pytest.mark.parametrize("lake_format", FORMATS)
def test_a_parked_table_lands_beside_the_others_across_kills_while_parked_and_catching_up(
        mariadb, kafka, tmp_path, capfd, lake_format) -> None:
    db = prefix = f"park_{lake_format}"
    lake = tmp_path / "lake"
    checkpoint, gate, catch_up_gate = lake / "_checkpoint", tmp_path / "gate", tmp_path / "catch-up-gate"
    args = ["land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(lake), "--checkpoint",
            str(checkpoint), "--format", lake_format, "--kafka-source", "binlake"]
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "BINLAKE_LAND_PARK_ROWS": "0"}
    gated = [sys.executable, "-m", "tests.harness.park_gate", *args]
    conn = _database(mariadb, db,
                     "CREATE TABLE big (id INT PRIMARY KEY, a VARCHAR(24) CHARACTER SET latin1, d DECIMAL(10,4))",
                     f"INSERT INTO big SELECT seq, IF(seq % 7 = 0, NULL, CONCAT('caf\u00e9-', seq)), seq / 10000 "
                     f"FROM seq_1_to_{ROWS}",
                     "CREATE TABLE o (id INT PRIMARY KEY, n BIGINT)")
    timings: dict[str, float] = {}
    started = time.monotonic()
    # the session's server holds other tests' databases: the daemon captures this one alone
    with daemon_running(mariadb, kafka, prefix, 4949, {"BINLAKE_FILTERS_INCLUDE": f"{db}.*"}) as watcher, \
            Trickle(mariadb, db, "o") as workload, contextlib.ExitStack() as jobs:
        workload.start()
        landing = jobs.enter_context(RunningLand(gated, {**env, GATE: str(gate), CATCH_UP_GATE: str(catch_up_gate)},
                                                 tmp_path / "land-1.log"))
        landing.until(lambda: len(_ids(lake, db, "big", lake_format)) >= ROWS, timeout=180)  # the table's rows landed
        timings["first landed"] = time.monotonic() - started

        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(ALTER)
            altered = workload.written  # the other table's rows from here on were written after the ALTER
            for k in range(1, 4):  # the parked table's changes after it: held back until it catches up
                cur.execute(f"INSERT INTO big VALUES ({ROWS + k}, 0x00ff, 1.5)")
                cur.execute(f"UPDATE big SET d = d + 1 WHERE id = {k * 11}")
                cur.execute(f"DELETE FROM big WHERE id = {k * 13}")
            conn.commit()
            # a column added (no rewrite: null): the catch-up lands the changes before it, the statement, and the
            # changes after it, in parts of their own
            cur.execute("ALTER TABLE big ADD COLUMN z INT")
            for k in range(4, 7):
                cur.execute(f"INSERT INTO big VALUES ({ROWS + k}, 0x01, 2.5, {k})")
                cur.execute(f"UPDATE big SET z = {k} WHERE id = {k * 11}")
                cur.execute(f"DELETE FROM big WHERE id = {k * 13}")
        conn.commit()
        parked = landing.wait_for("parked (park 1)")
        landing.wait_for("park gate: the rewrite waits")

        parks = read_parks(LakeFiles.on_disk(), str(checkpoint))
        assert [(p.state, [t.table for t in p.tables]) for p in parks] == [(State.REWRITING, ["big"])]
        # The rewrite waits; two batches after the one that parked the table commit, landing the other table's rows
        seen = max(_ids(lake, db, "o", lake_format), default=0)
        landing.until(lambda: committed_batches(checkpoint) >= parks[0].tables[0].batch + 3, timeout=60)
        assert max(_ids(lake, db, "o", lake_format)) > max(seen, altered + 1)
        assert [p.state for p in read_parks(LakeFiles.on_disk(), str(checkpoint))] == [State.REWRITING]
        big = _read(lake, db, "big", lake_format)
        assert big is not None and ROWS + 1 not in big.column("id").to_pylist() and 13 in big.column("id").to_pylist()
        assert _is_string(big.schema.field("a").type)  # not rewritten yet
        assert not any("rewritten in" in line for line in landing.lines[parked:])
        timings["parked, the other table landing"] = time.monotonic() - started

        # One kill while the table is parked, on each format at another point: on Iceberg as its rewrite waits (the
        # next run runs it again); on Delta once the gate lets the rewrite go, mid-catch-up (the catch-up held once
        # its first part has committed; the next run lands it again, its committed part skipped). What either does
        # is the parks' own, the formats' alike (streaming_job/statements/parking_work.py, sink_parks.py), and a
        # format's part of a catch-up landed again (its writer identity's skip, lake_format.LakeFormat.part) is a
        # batch's part's, killed on both formats by test_land_statements.py
        if lake_format == "delta":
            gate.touch()
            landing.wait_for("park gate: the catch-up waits")
            parks = read_parks(LakeFiles.on_disk(), str(checkpoint))
            assert [(p.state, [t.table for t in p.tables]) for p in parks] == [(State.CATCHING_UP, ["big"])]
            big = _read(lake, db, "big", lake_format)
            assert big is not None and _is_binary(big.schema.field("a").type)  # rewritten
            ids = set(big.column("id").to_pylist())
            assert {ROWS + 1, ROWS + 3} <= ids and 13 not in ids  # the changes before the ADD COLUMN: landed
            assert ROWS + 4 not in ids and 52 in ids and "z" not in big.schema.names  # those after it: not yet
            timings["catching up"] = time.monotonic() - started
        os.killpg(landing.proc.pid, 9)
        landing.proc.wait()
        tables = _status(kafka, prefix, lake, lake_format, capfd)
        state = State.CATCHING_UP if lake_format == "delta" else State.REWRITING
        assert (tables[f"{db}.big"]["parked"] or "").startswith(state), tables[f"{db}.big"]
        assert time.time() - 300 < tables[f"{db}.big"]["parked_since"] < time.time()
        assert tables[f"{db}.o"]["parked"] is None

        # The job started again (no gate): the catch-up landed again, or the rewrite run again and its catch-up; the
        # batches after it
        landing = jobs.enter_context(RunningLand([*BINLAKE, *args], env, tmp_path / "land-2.log"))
        landing.wait_for("its catch-up was interrupted: landing it again" if lake_format == "delta"
                         else "park 1: its rewrite runs again")
        timings["caught up"] = time.monotonic() - started
        workload.stop.set()
        workload.join()
        watcher.reach(mariadb)
        landing.until(lambda: landed_everything(kafka, prefix, checkpoint), timeout=120)  # the rest landed
        landing.stop()
        timings["all landed"] = time.monotonic() - started
    sys.stderr.write(f"timings: {timings}\n")

    # Every mirror equals the server's SELECT, as delta-rs or pyiceberg reads it
    _assert_mirror(conn, lake, db, "o", lake_format)
    rewritten = _assert_mirror(conn, lake, db, "big", lake_format)
    assert _is_binary(rewritten.schema.field("a").type)
    # (the ALTER's types cannot join big's first change log: a second generation)
    _assert_changes_once(mariadb, lake, db, lake_format, {"big": 2, "o": 1})


@pytest.mark.parametrize("lake_format", FORMATS)
def test_tables_swapped_by_rename_while_one_is_parked(mariadb, kafka, spark, tmp_path, monkeypatch, capfd,
                                                      lake_format) -> None:
    """An ALTER parks `a`; RENAME TABLE a TO tmp, b TO a, tmp TO b names it: `b` and `tmp` join its park, in
    the same batch (`--trigger available-now`), and catch up with it; each changed afterwards under its new name."""
    db = prefix = f"parkren_{lake_format}"
    conn, lake, land = _landed_in_process(mariadb, kafka, monkeypatch, tmp_path, db, lake_format,
                                          "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1)",
                                          "INSERT INTO a SELECT seq, CONCAT('a-', seq) FROM seq_1_to_40",
                                          "CREATE TABLE b (id INT PRIMARY KEY, w INT, t VARCHAR(10))",
                                          "INSERT INTO b SELECT seq, seq * 10, CONCAT('b', seq) FROM seq_1_to_30")
    assert len(_ids(lake, db, "a", lake_format)) == 40 and len(_ids(lake, db, "b", lake_format)) == 30

    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("ALTER TABLE a MODIFY v VARBINARY(20)")  # a rewrite: parks `a`
        cur.execute("INSERT INTO a VALUES (41, 0x00ff)")
        cur.execute("UPDATE a SET v = 0x01 WHERE id = 2")
        cur.execute("DELETE FROM a WHERE id = 3")
        cur.execute("UPDATE b SET w = -1 WHERE id = 4")
        conn.commit()
        cur.execute("RENAME TABLE a TO tmp, b TO a, tmp TO b")
        cur.execute("INSERT INTO a VALUES (31, 310, 'a-now')")  # the former b
        cur.execute("UPDATE a SET t = 'moved' WHERE id = 5")
        cur.execute("DELETE FROM a WHERE id = 6")
        cur.execute("INSERT INTO b VALUES (42, 0x4242)")  # the former a
        cur.execute("UPDATE b SET v = 0x07 WHERE id = 7")
        cur.execute("DELETE FROM b WHERE id = 8")
    conn.commit()
    run_daemon(mariadb, kafka, prefix)
    capfd.readouterr()
    assert run_land(kafka, prefix, lake, *land) == 0
    said = capfd.readouterr().err  # (the job's log)
    assert "parked (park 1)" in said and "parked too (park 1)" in said, said[-3000:]
    assert read_parks(LakeFiles.on_disk(), str(lake / "_checkpoint")) == []

    for table in ("a", "b"):  # each mirror: its server table's rows, under its name now
        _assert_mirror(conn, lake, db, table, lake_format)
    moved = _read(lake, db, "b", lake_format)
    assert moved is not None and _is_binary(moved.schema.field("v").type)
    # the change logs stay with the names: `a`'s (a second generation since its ALTER: no join of latin1 text and
    # binary) holds the first table's changes, the rename's rows, then the former `b`'s; `tmp`'s the rename alone
    _assert_changes_once(mariadb, lake, db, lake_format, {"a": 2, "b": 1, "tmp": 1})
    _assert_renamed(lake, db, lake_format, [("a", "tmp"), ("b", "a"), ("tmp", "b")], {"tmp": "b"},
                    _status(kafka, db, lake, lake_format, capfd))


@pytest.mark.parametrize("lake_format", FORMATS)
def test_a_parked_table_renamed_in_a_later_batch(mariadb, kafka, spark, tmp_path, monkeypatch, capfd,
                                                 lake_format) -> None:
    """An ALTER parks `p` and its rewrite fails (the run stops; the park stays, rewriting); the next run's first
    batch has RENAME TABLE p TO p2, q TO p while the park's rewrite, run again, is held until that batch has
    landed: `p2` and `q` join the park, and each table's later changes land under its new name."""
    from streaming_job.land import sink

    db = prefix = f"parkmv_{lake_format}"
    conn, lake, land = _landed_in_process(mariadb, kafka, monkeypatch, tmp_path, db, lake_format,
                                          "CREATE TABLE p (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1)",
                                          "INSERT INTO p SELECT seq, CONCAT('p-', seq) FROM seq_1_to_40",
                                          "CREATE TABLE q (id INT PRIMARY KEY, w INT)",
                                          "INSERT INTO q SELECT seq, seq * 10 FROM seq_1_to_30")

    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = ''")
        cur.execute("ALTER TABLE p MODIFY v VARBINARY(20)")  # a rewrite: parks `p`
        cur.execute("INSERT INTO p VALUES (41, 0x00ff)")
        cur.execute("DELETE FROM p WHERE id = 3")
    conn.commit()
    run_daemon(mariadb, kafka, prefix)
    rewrite = sink.Lander._rewrite

    def failing(self: Any, what: Any) -> None:
        raise RuntimeError("the test's failed rewrite")

    monkeypatch.setattr(sink.Lander, "_rewrite", failing)
    assert run_land(kafka, prefix, lake, *land) != 0
    parks = read_parks(LakeFiles.on_disk(), str(lake / "_checkpoint"))
    assert [(p.state, [t.table for t in p.tables]) for p in parks] == [(State.REWRITING, ["p"])]
    # the failed run may have planned a batch past its last landed one (Spark's offsets log): the next run replays
    # it first, and the RENAME's records come in the batch after it
    planned = max(int(f.name) for f in (lake / "_checkpoint" / "offsets").iterdir() if f.name.isdigit())

    with conn.cursor() as cur:
        cur.execute("UPDATE p SET v = 0x01 WHERE id = 4")
        cur.execute("RENAME TABLE p TO p2, q TO p")
        cur.execute("INSERT INTO p2 VALUES (42, 0x4242)")  # the former p
        cur.execute("UPDATE p2 SET v = 0x07 WHERE id = 7")
        cur.execute("DELETE FROM p2 WHERE id = 8")
        cur.execute("INSERT INTO p VALUES (31, 310)")  # the former q
        cur.execute("UPDATE p SET w = -5 WHERE id = 5")
        cur.execute("DELETE FROM p WHERE id = 6")
    conn.commit()
    run_daemon(mariadb, kafka, prefix)

    def held(self: Any, what: Any) -> None:  # until the RENAME's batch (the first after `planned`) has landed
        deadline = time.monotonic() + 300
        while (self.parking.processed or 0) <= planned and time.monotonic() < deadline:
            time.sleep(0.1)
        rewrite(self, what)

    monkeypatch.setattr(sink.Lander, "_rewrite", held)
    capfd.readouterr()
    assert run_land(kafka, prefix, lake, *land) == 0
    said = capfd.readouterr().err  # (the job's log)
    assert "parked too (park 1)" in said and "caught up" in said, said[-3000:]
    assert read_parks(LakeFiles.on_disk(), str(lake / "_checkpoint")) == []

    for table in ("p", "p2"):  # each mirror: its server table's rows, under its name now
        _assert_mirror(conn, lake, db, table, lake_format)
    moved = _read(lake, db, "p2", lake_format)
    assert moved is not None and _is_binary(moved.schema.field("v").type)
    # the change logs stay with the names: `p`'s (a second generation since its ALTER) holds the first table's
    # changes, the rename's rows, then the former `q`'s; `p2`'s starts with the rename, `q`'s ends with it
    _assert_changes_once(mariadb, lake, db, lake_format, {"p": 2, "p2": 1, "q": 1})
    _assert_renamed(lake, db, lake_format, [("p", "p2"), ("q", "p")], {"q": "p"},
                    _status(kafka, db, lake, lake_format, capfd))
