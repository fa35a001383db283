"""binlake run -> Kafka -> binlake land --format iceberg -> Iceberg tables (the default catalog of a local lake:
Iceberg's Hadoop catalog on the lake's path, written by binlake's HadoopCatalog on pyiceberg), against real
servers: every mirror equals the server's SELECT, read by Spark (Iceberg's Java runtime, the lake as its
HadoopCatalog, type=hadoop) and by pyiceberg (StaticTable, which follows each table's version-hint.text); every
change once in the change logs; a micro-batch replayed after its tables committed (Spark's commit of it lost,
as in a crash) lands nothing twice."""

from __future__ import annotations

import pytest

from tests.harness import zoo
from tests.harness.daemon import run_daemon
from tests.harness.iceberg import snapshot_count
from tests.harness.land import run_land
from tests.harness.zoo_lake import assert_zoo_landed, zoo_written

pytestmark = pytest.mark.integration


def test_every_type_lands_in_iceberg_once_and_a_replayed_batch_lands_nothing_twice(make_mariadb, kafka, spark,
                                                                                     tmp_path, monkeypatch) -> None:
    server = make_mariadb()
    db = "icezoo"
    prefix = "landice"
    monkeypatch.setenv("BINLAKE_KAFKA_MAX_RECORD_BYTES", "20000")  # big rows as chunks
    conn = zoo_written(server, db)
    run_daemon(server, kafka, prefix)
    lake = tmp_path / "lake"
    assert run_land(kafka, prefix, lake, "--format", "iceberg") == 0
    assert not (lake / "_iceberg_catalog.db").exists()  # no SQL catalog: the tables' metadata is all there is
    hint = lake / db / "acct" / "metadata" / "version-hint.text"
    assert (hint.parent / f"v{int(hint.read_text())}.metadata.json").is_file()
    assert_zoo_landed(spark, lake, server, conn, db, "iceberg")

    # The last micro-batch again, as after a crash between its tables' commits and Spark's own: every table
    # finds the batch in its snapshots' summaries and commits nothing
    commits = sorted((lake / "_checkpoint" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of it
    tables = [*(t for name in (*zoo.TABLES, "acct", "ledger") for t in (name, f"{name}__changes")), "nopk__changes"]
    snapshots = {t: snapshot_count(lake, db, t) for t in tables}
    assert run_land(kafka, prefix, lake, "--format", "iceberg") == 0
    assert (lake / "_checkpoint" / "commits" / commits[-1].name).exists()  # replayed, and committed this time
    assert {t: snapshot_count(lake, db, t) for t in tables} == snapshots
    assert_zoo_landed(spark, lake, server, conn, db, "iceberg")
