"""binlake verify: the daemon reads a table chunk by chunk between watermarks, the land job compares each
chunk with the mirror at the same point of the stream (streaming_job/land/verify.py), under a steady write
workload. What is compared against: the server's own rows, and differences made behind binlake's back
(a Delta write to the mirror; a source change with the binlog off for the session)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import orjson
import pytest

from ingester.cli.main import main
from ingester.daemon.kafka_io import read_checkpoint
from streaming_job.format.verify_results import read_results
from streaming_job.lake.files import LakeFiles
from tests.harness.daemon import BINLAKE
from tests.harness.land import mirror_rows, run_land
from tests.harness.verify_run import (
    ROWS,
    Writes,
    assert_clean,
    verified_source,
    verify_wait,
    verifying_daemon,
)

pytestmark = pytest.mark.integration


def test_verify_under_writes_finds_both_kinds_of_difference_and_passes_after_a_snapshot(make_mariadb, kafka, spark,
                                                                                       tmp_path, capsys) -> None:
    server = verified_source(make_mariadb)
    prefix, lake = "verify", tmp_path / "lake"
    daemon = verifying_daemon(server, kafka, prefix, 6161)
    writes = Writes(server, ROWS)
    try:
        assert run_land(kafka, prefix, lake) == 0
        writes.start()
        # 1. under writes: every chunk matches (a false difference would fail here)
        status, run = verify_wait(server, lake, kafka, prefix, "vf.t,vf.k")
        first = read_results(LakeFiles.on_disk(), str(lake), run)
        assert_clean(status, first)
        # 2. differences behind binlake's back, both found with their key ranges
        from delta.tables import DeltaTable

        DeltaTable.forPath(spark, str(lake / "vf" / "t")).update("id = 77", {"v": "v + 1000"})
        with server.connect("vf") as quiet, quiet.cursor() as cur:
            cur.execute("SET sql_log_bin = 0")
            cur.execute("UPDATE t SET s = 'changed unseen' WHERE id = 555")
            cur.execute("UPDATE k SET v = -1 WHERE a = 'K3' AND n = 10")
            quiet.commit()
        status, run = verify_wait(server, lake, kafka, prefix, "vf.t,vf.k")
        second = read_results(LakeFiles.on_disk(), str(lake), run)
        differ = [r for r in second if not r["match"]]
        assert status == 1
        found = {(r["table"], tuple(k["key"]), k["lake"], tuple(k.get("columns", ())))
                 for r in differ for k in orjson.loads(r["keys"])}
        assert found == {("vf.t", (77,), "different", ("v",)), ("vf.t", (555,), "different", ("s",)),
                         ("vf.k", ("K3", 10), "different", ("v",))}, differ
        ranges = {r["table"]: (r["low"], r["high"]) for r in differ if r["table"] == "vf.t"}
        assert len([r for r in differ if r["table"] == "vf.t"]) == 2, ranges
        for r in differ:
            if r["table"] == "vf.t":
                key = orjson.loads(r["keys"])[0]["key"][0]
                low = orjson.loads(r["low"])[0] if r["low"] else 0
                high = orjson.loads(r["high"])[0] if r["high"] else 10**9
                assert low < key <= high, r
        err = capsys.readouterr().err
        assert "vf.t keys (" in err and "1 different in the lake" in err, err
        assert main(["status", "--json", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                     "--lake", str(lake), "--checkpoint", str(lake / "_checkpoint")]) == 0
        shown = {t["table"]: t["verify"] for t in orjson.loads(capsys.readouterr().out)["tables"]}
        assert shown["vf.t"]["run"] == run and shown["vf.t"]["differ"] == 2 and shown["vf.t"]["complete"]
        assert shown["vf.k"]["differ"] == 1
        # 3. a re-snapshot of those tables repairs the mirrors: verify passes
        assert main(["snapshot", "--source", server.url, "--signal-table", "binlake.signal", "--tables",
                     "vf.t,vf.k", "--wait"]) == 0
        status, run = verify_wait(server, lake, kafka, prefix, "vf.t,vf.k")
        assert status == 0, [r for r in read_results(LakeFiles.on_disk(), str(lake), run) if not r["match"]]
        # 4. a row deleted behind binlake's back: the lake has a row the source does not (a re-snapshot
        # upserts what the source has; it does not delete such rows: docs/VERIFY.md)
        with server.connect("vf") as quiet, quiet.cursor() as cur:
            cur.execute("SET sql_log_bin = 0")
            cur.execute("DELETE FROM t WHERE id = 888")
            quiet.commit()
        status, run = verify_wait(server, lake, kafka, prefix, "vf.t")
        differ = [r for r in read_results(LakeFiles.on_disk(), str(lake), run) if not r["match"]]
        assert status == 1 and [orjson.loads(r["keys"]) for r in differ] == [[{"key": [888], "lake": "extra"}]]
    finally:
        writes.stop.set()
        writes.join()
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
    assert writes.changes > 200
    # the mirror is the server's table (the verify rows were compared, never landed), but for the row
    # deleted unseen
    assert run_land(kafka, prefix, lake) == 0
    expected = {row[0]: row[1:] for row in server.execute("SELECT id, v, s FROM vf.t")}
    mirror, _ = mirror_rows(spark, lake, "vf", "t")
    assert mirror.pop((888,))  # deleted with the binlog off: the lake cannot know
    assert {k[0]: (r["v"], r["s"]) for k, r in mirror.items()} == expected


# NO_LOG lands as in test_land.py and verifies as MINIMAL. The mirror is read by the driver from its files
# (FULL) or by Spark (MINIMAL; what lakes the driver cannot read get): both readers on every type.
@pytest.mark.parametrize(("metadata", "reader"), [("FULL", "driver"), ("MINIMAL", "spark")])
def test_verify_matches_on_every_type_with_masks_and_a_schema_change(make_mariadb, kafka, spark, tmp_path,
                                                                    metadata, reader, monkeypatch) -> None:
    """The type zoo (one canonical value per type on both sides), masked columns (the masked values are
    compared), a column added after the rows (the mirror's default), on servers with and without column
    names in their TABLE_MAPs (MINIMAL: the schema history names them); then a source change with the binlog
    off is found in the zoo's table."""
    from streaming_job.delta.verify import DeltaMirrors
    from tests.harness import zoo

    reads = {"driver": 0, "spark": 0}
    driver_log = DeltaMirrors._driver_log

    def counted(self: DeltaMirrors, path: str) -> object:
        found = driver_log(self, path) if reader == "driver" else None
        reads["driver" if found is not None else "spark"] += 1
        return found

    monkeypatch.setattr(DeltaMirrors, "_driver_log", counted)

    server = make_mariadb(binlog_row_metadata=metadata)
    db = f"vz{metadata.lower().replace('_', '')}"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    server.execute("CREATE DATABASE binlake")
    conn = server.connect(db)
    zoo.create(conn, rows=False)
    prefix, lake = f"vzoo{metadata.lower().replace('_', '')}", tmp_path / "lake"
    config = tmp_path / "binlake.yaml"
    config.write_text(orjson.dumps({"filters": {"columns": {f"{db}.strs.vc": "hash", f"{db}.strs.c": "mask",
                                                            f"{db}.strs.tx": "exclude"}, "mask_key": "k1"},
                                    "snapshot_signal_table": "binlake.signal", "snapshot_chunk_rows": 3}).decode())
    daemon = subprocess.Popen([*BINLAKE, "run", "--config", str(config), "--source", server.url, "--kafka",
                               kafka.bootstrap, "--topic-prefix", prefix, "--server-id", "6262"],
                              env={**os.environ, "PYTHONPATH": os.getcwd()}, stderr=(tmp_path / "run.log").open("wb"))
    tables = ",".join(f"{db}.{t}" for t in zoo.TABLES)
    try:
        deadline = time.monotonic() + 60  # the schema history is captured (first checkpoint) before the rows
        while read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}") is None:
            assert time.monotonic() < deadline and daemon.poll() is None, (tmp_path / "run.log").read_text()[-2000:]
            time.sleep(0.2)
        zoo.write(conn)
        with conn.cursor() as cur:
            cur.execute("ALTER TABLE ints ADD COLUMN added VARCHAR(10) DEFAULT 'seven'")
            cur.execute("INSERT INTO ints (id, i) VALUES (1000, 1)")
        conn.commit()
        status, run = verify_wait(server, lake, kafka, prefix, tables, config)
        results = read_results(LakeFiles.on_disk(), str(lake), run)
        assert status == 0, [r for r in results if not r["match"]]
        assert {r["table"] for r in results} == {f"{db}.{t}" for t in zoo.TABLES}
        assert sum(r["source_rows"] for r in results) == sum(
            server.execute(f"SELECT COUNT(*) FROM {db}.`{t}`")[0][0] for t in zoo.TABLES)
        with server.connect(db) as quiet, quiet.cursor() as cur:
            cur.execute("SET sql_log_bin = 0")
            cur.execute("UPDATE strs SET vl = 'behind its back' ORDER BY id LIMIT 1")
            quiet.commit()
        status, run = verify_wait(server, lake, kafka, prefix, f"{db}.strs", config)
        differ = [r for r in read_results(LakeFiles.on_disk(), str(lake), run) if not r["match"]]
        assert status == 1 and len(differ) == 1
        assert [k["columns"] for k in orjson.loads(differ[0]["keys"])] == [["vl"]]
        assert reads[reader] >= len(zoo.TABLES) + 1 and not reads[{"driver": "spark", "spark": "driver"}[reader]]
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
