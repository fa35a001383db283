"""binlake verify on an Iceberg lake (`binlake land --format iceberg`): the daemon's chunks compared with the
Iceberg mirrors read by pyiceberg through the lake's catalog, the results in the catalog's table
``_binlake.verify`` (idempotent by the batch id in its snapshots' summaries), read back by ``binlake verify
--wait`` and ``binlake status``. What is compared against: the server's own rows, and differences the test
made behind binlake's back, in the source (the binlog off for the session) and in the lake (pyiceberg's own
writes to the mirror)."""

from __future__ import annotations

import signal

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ingester.cli.main import main
from streaming_job.iceberg.catalog import IcebergCatalog
from streaming_job.iceberg.verify import IcebergResults
from tests.harness.iceberg import catalog, pyiceberg_table
from tests.harness.land import run_land
from tests.harness.verify_run import (
    KEYS,
    ROWS,
    Writes,
    assert_clean,
    verified_source,
    verify_wait,
    verifying_daemon,
)

pytestmark = pytest.mark.integration
ICEBERG = ("--format", "iceberg")


def _tamper_lake(lake, changed: int, deleted: int) -> None:
    """In the Iceberg mirror vf.t, with pyiceberg (not binlake): row ``changed`` gets v + 1000, row ``deleted``
    goes, in one commit of their own."""
    table = catalog(lake).load_table(("vf", "t"))
    row = table.scan(row_filter=f"id == {changed}").to_arrow()
    assert len(row) == 1
    more = pc.add(row.column("v"), pa.scalar(1000, row.schema.field("v").type))
    row = row.set_column(row.schema.get_field_index("v"), "v", more)
    with table.transaction() as tx:
        tx.delete(f"id == {changed} or id == {deleted}")
        tx.append(row)


def test_verify_on_an_iceberg_lake_finds_every_kind_of_difference_and_no_false_one(make_mariadb, kafka, tmp_path,
                                                                                    capsys) -> None:
    server = verified_source(make_mariadb)
    prefix, lake = "verifyice", tmp_path / "lake"
    results = IcebergResults(IcebergCatalog(str(lake)))
    daemon = verifying_daemon(server, kafka, prefix, 6363)
    writes = Writes(server, ROWS)
    try:
        assert run_land(kafka, prefix, lake, *ICEBERG) == 0
        writes.start()
        # 1. under writes: every chunk matches (a false difference would fail here)
        status, run = verify_wait(server, lake, kafka, prefix, "vf.t,vf.k", None, *ICEBERG)
        first = results.read(run)
        assert_clean(status, first)
        assert sum(r["source_rows"] for r in first if r["table"] == "vf.k") == KEYS  # k's rows: none deleted
        # each chunk's result recorded once, though batches were landed by several job runs
        assert len({(r["table"], r["chunk"]) for r in first}) == len(first)
        # 2. differences behind binlake's back: in the lake (pyiceberg's writes) and in the source
        _tamper_lake(lake, 77, 99)
        with server.connect("vf") as quiet, quiet.cursor() as cur:
            cur.execute("SET sql_log_bin = 0")
            cur.execute("UPDATE t SET s = 'changed unseen' WHERE id = 555")
            cur.execute("DELETE FROM t WHERE id = 888")
            cur.execute("UPDATE k SET v = -1 WHERE a = 'K3' AND n = 10")
            quiet.commit()
        status, run = verify_wait(server, lake, kafka, prefix, "vf.t,vf.k", None, *ICEBERG)
        differ = [r for r in results.read(run) if not r["match"]]
        assert status == 1
        found = {(r["table"], tuple(k["key"]), k["lake"], tuple(k.get("columns", ())))
                 for r in differ for k in orjson.loads(r["keys"])}
        assert found == {("vf.t", (77,), "different", ("v",)), ("vf.t", (99,), "missing", ()),
                         ("vf.t", (555,), "different", ("s",)), ("vf.t", (888,), "extra", ()),
                         ("vf.k", ("K3", 10), "different", ("v",))}, differ
        for r in differ:  # each key in its chunk's range
            if r["table"] == "vf.t":
                low = orjson.loads(r["low"])[0] if r["low"] else 0
                high = orjson.loads(r["high"])[0] if r["high"] else 10**9
                assert all(low < k["key"][0] <= high for k in orjson.loads(r["keys"])), r
        counts = [(r["missing"], r["extra"], r["different"]) for r in differ if r["table"] == "vf.t"]
        assert tuple(map(sum, zip(*counts, strict=True))) == (1, 1, 2), differ
        err = capsys.readouterr().err
        assert "vf.t keys (" in err and "1 missing" in err and "1 extra" in err, err
        assert main(["status", "--json", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                     "--lake", str(lake), "--checkpoint", str(lake / "_checkpoint"), *ICEBERG]) == 0
        shown = {t["table"]: t["verify"] for t in orjson.loads(capsys.readouterr().out)["tables"]}
        assert shown["vf.t"]["run"] == run and shown["vf.t"]["complete"]
        assert shown["vf.t"]["differ"] == len([r for r in differ if r["table"] == "vf.t"])
        assert shown["vf.k"]["differ"] == 1
    finally:
        writes.stop.set()
        writes.join()
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
    assert writes.changes > 200
    # the results are a table of the lake's catalog other readers read too
    assert {r["run"] for r in pyiceberg_table(lake, "_binlake", "verify").to_pylist()} >= {run}
