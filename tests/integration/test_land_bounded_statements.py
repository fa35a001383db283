"""Table statements whose entries a bounded micro-batch splits (docs/LAND.md, "Table statements", "A statement cut by
the bound"): a bound (`--max-offsets-per-trigger` on Spark's Kafka source, `--max-batch-bytes` on binlake's) cuts
each topic in proportion to what it holds, so a batch reads the small topic of a rename's new name past the
rename's entry while the old name's large topic stops before its last rows and its entry. The rename waits for its
other entry (its tables held from it on, as a park's), the old name's last rows land before it, and the tables
catch up after it. A plain rename and a swap (`RENAME TABLE a TO tmp, b TO a, tmp TO b`) in one stream, landed by a
bounded run killed (SIGKILL) as a batch brings an awaited entry, then by another to the end (available-now: run
after run while its batches end short of Kafka's offsets at its start), on Delta and Iceberg, a source each: every
mirror equals the server's SELECT (delta-rs's or pyiceberg's read), every row change of the binlog is once in the
change logs (mariadb-binlog --verbose's counts)."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from streaming_job.lake.files import LakeFiles
from streaming_job.lake.generations import change_log_name
from streaming_job.statements.parking import read_parks
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import run_daemon
from tests.harness.delta_rs import delta_rs_table
from tests.harness.iceberg import pyiceberg_table
from tests.harness.land import RunningLand, land_command, plain_rows, run_land

pytestmark = pytest.mark.integration
DB = "boundst"
# a batch's bound: the large topics' rows before a statement in several batches (a transaction per row: a record
# and a commit marker, ~250 bytes of Kafka's log)
BOUNDS = {"delta": ["--max-offsets-per-trigger", "8"], "iceberg": ["--max-batch-bytes", "2000"]}


def _read(lake: Path, table: str, lake_format: str) -> Any:
    """A lake table as delta-rs or pyiceberg reads it (None: not there)."""
    if lake_format == "iceberg":
        return pyiceberg_table(lake, DB, table)
    path = lake / DB / table
    return delta_rs_table(path) if (path / "_delta_log").is_dir() else None


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


@pytest.mark.parametrize("lake_format", ["delta", "iceberg"])
def test_statements_split_by_the_bound_land_once_in_order(make_mariadb, kafka, spark, tmp_path, monkeypatch,
                                                          capfd, lake_format) -> None:
    mariadb = make_mariadb()  # a binlog of this test's alone
    lake, prefix = tmp_path / "lake", f"{DB}{lake_format}"
    bounded = [*BOUNDS[lake_format], "--format", lake_format]
    mariadb.execute(f"CREATE DATABASE {DB}")
    monkeypatch.setenv("BINLAKE_FILTERS_INCLUDE", f"{DB}.*")
    conn = mariadb.connect(DB, autocommit=True)
    with conn.cursor() as cur:
        for sql in ("CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(20))",
                    "CREATE TABLE a (id INT PRIMARY KEY, s VARCHAR(20))",
                    "CREATE TABLE b (id INT PRIMARY KEY, s VARCHAR(20))",
                    "INSERT INTO b VALUES (1, 'b1'), (2, 'b2')"):
            cur.execute(sql)
        # a transaction (a record, and a commit marker) per row: the large topics, cut early in each batch
        for i in range(1, 25):
            cur.execute(f"INSERT INTO k VALUES ({i}, 'k{i}')")
            cur.execute(f"INSERT INTO a VALUES ({i}, 'a{i}')")
        cur.execute("UPDATE k SET v = 'late' WHERE id = 3")
        cur.execute("DELETE FROM a WHERE id = 4")
        cur.execute("RENAME TABLE k TO k2")
        cur.execute("RENAME TABLE a TO tmp, b TO a, tmp TO b")
        cur.execute("UPDATE k2 SET v = 'after' WHERE id = 5")
        cur.execute("INSERT INTO k2 VALUES (100, 'k2')")
        cur.execute("INSERT INTO a VALUES (3, 'a-now')")  # the former b
        cur.execute("UPDATE b SET s = 'b-now' WHERE id = 7")  # the former a
        cur.execute("DELETE FROM b WHERE id = 8")
    run_daemon(mariadb, kafka, prefix)
    # killed (SIGKILL) as a batch brings a rename's awaited entry (mid-batch: recorded, the batch not committed), then
    # landed to the end by another run
    cmd, env = land_command(kafka, prefix, lake)
    with RunningLand([*cmd, *bounded], env, tmp_path / "land.log") as first:
        first.kill_at("its entries have all come (batch", timeout=120)
    said = "".join(line for line in first.lines if " binlake.land " in line)
    assert "waits for its entry in" in said, said[-6000:]
    capfd.readouterr()
    assert run_land(kafka, prefix, lake, *bounded) == 0
    said += "\n".join(line for line in capfd.readouterr().err.splitlines() if " binlake.land " in line)  # its log
    assert read_parks(LakeFiles.on_disk(), str(lake / "_checkpoint")) == []

    for table in ("k2", "a", "b"):  # each mirror: its server table's rows, under its name now
        want = {k[0]: {c: _plain(v) for c, v in r.items()} for k, r in plain_rows(conn, table, "id").items()}
        found = _read(lake, table, lake_format)
        assert found is not None, table
        names = list(next(iter(want.values())))
        assert {r["id"]: r for r in found.select(names).to_pylist()} == want, (table, said[-6000:])
    for table in ("k", "tmp"):  # renamed away: ended, empty
        found = _read(lake, table, lake_format)
        assert found is None or found.num_rows == 0, (table, found.to_pylist())

    mariadb.flush_logs()
    counts = verbose_counts(mariadb.binlog_files()[:-1], DB)
    for table in ("k", "k2", "a", "b"):
        rows, number = [], 1
        while (found := _read(lake, change_log_name(table, number), lake_format)) is not None:
            rows += found.select(["op", "seq", "row_index"]).to_pylist()
            number += 1
        changes = [r for r in rows if r["op"] in ("insert", "update", "delete")]
        assert dict(collections.Counter(r["op"] for r in changes)) == {
            op: counts[(op, table)] for op in ("insert", "update", "delete") if counts[(op, table)]}, table
        assert len({(r["seq"], r["row_index"]) for r in changes}) == len(changes), (table, "twice")
