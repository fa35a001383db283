"""binlake verify's Iceberg parts that need no server, against pyiceberg's own SQL catalog on SQLite (a file):
a mirror's rows as verify reads them (a key range, keys looked up), and the results table, recorded once per
micro-batch and read back as `binlake verify --wait` and `binlake status` read it."""

from __future__ import annotations

import datetime

import pyarrow as pa

from streaming_job.batch.mirror import COMMIT_TS, SEQ
from streaming_job.format.mirror_read import KeyCut
from streaming_job.iceberg.catalog import IcebergCatalog
from streaming_job.iceberg.tables import columns_property, mirror_schema
from streaming_job.iceberg.verify import IcebergMirror, IcebergResults
from tests.harness.iceberg import catalog, local_format

_COLUMNS = [("a", "string"), ("n", "int"), ("v", "bigint")]
_NOW = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)


def _mirror(tmp_path) -> IcebergMirror:
    """A mirror keyed by (a, n) with rows n = 0..99 (a: 'x' for even n, 'y' for odd), in two data files."""
    lake = tmp_path / "lake"
    found = catalog(lake)
    found.create_namespace("db")
    table = found.create_table(("db", "m"), mirror_schema(_COLUMNS), properties=columns_property(_COLUMNS))
    for part in (range(0, 50), range(50, 100)):
        table.append(pa.Table.from_pylist([{"a": "xy"[n % 2], "n": n, "v": n * 10, SEQ: bytes([n]), COMMIT_TS: _NOW}
                                           for n in part], schema=mirror_schema(_COLUMNS)))
    return IcebergMirror(catalog(lake).load_table(("db", "m")))


def test_a_mirrors_rows_of_a_key_range_and_of_keys_looked_up(tmp_path) -> None:
    mirror = _mirror(tmp_path)
    assert mirror.columns == _COLUMNS
    types = dict(_COLUMNS)
    # keys ordered as MySQL orders them (n first): the rows whose first key column lies in the range, or more
    cut = KeyCut(types, ["v"], ["n", "a"], low=(10, "x"), high=(20, "x"))
    rows = mirror.rows(cut)
    assert rows.schema == cut.schema
    assert sorted(rows.column(SEQ).to_pylist()) == [bytes([n]) for n in range(10, 21)]
    assert sorted(rows.column("v").to_pylist()) == [n * 10 for n in range(10, 21)]
    assert len(mirror.rows(KeyCut(types, ["v"], ["n"], low=None, high=(2,)))) == 3
    assert len(mirror.rows(KeyCut(types, ["v"], ["n"], low=(97,), high=None))) == 3  # 97 too: a superset
    # keys looked up (an order the lake does not cut as MySQL: text under a collation)
    looked = {(r["a"], r["n"]): r["v"] for r in mirror.rows(
        KeyCut(types, ["v"], ["a", "n"], keys=[("x", 4), ("y", 5), ("x", 5)])).to_pylist()}
    assert looked[("x", 4)] == 40 and looked[("y", 5)] == 50 and ("x", 5) not in looked  # the mirror has no x 5
    assert len(mirror.rows(KeyCut(types, ["v"], ["a", "n"], keys=[]))) == 0


def _result(run: str, chunk: int, match: bool, batch_id: int) -> dict:
    return {"run": run, "table": "db.t", "chunk": chunk, "low": None, "high": None, "source_rows": 5, "lake_rows": 5,
            "excluded": 0, "missing": 0 if match else 1, "extra": 0, "different": 0, "match": match, "keys": "[]",
            "exact": True, "at": "p", "kafka_topic": "x.db.t", "kafka_partition": 0, "kafka_offset": chunk,
            "batch_id": batch_id, "checked_ts": _NOW + datetime.timedelta(seconds=chunk)}


def test_results_are_recorded_once_per_batch_and_read_back_by_run(tmp_path) -> None:
    lake = tmp_path / "lake"
    results = IcebergResults(IcebergCatalog(str(lake)))
    assert results.read() == []  # no results table yet
    local_format(lake).record_verify([_result("r1", 0, True, 3), _result("r1", 1, False, 3)], 3)
    local_format(lake).record_verify([_result("r1", 0, True, 3), _result("r1", 1, False, 3)], 3)  # batch 3 replayed
    local_format(lake, "another-job").record_verify([_result("r2", 2, True, 3)], 3)
    local_format(lake).record_verify([_result("r2", 3, True, 4)], 4)
    assert [(r["run"], r["chunk"], r["match"]) for r in results.read()] == [
        ("r1", 0, True), ("r1", 1, False), ("r2", 2, True), ("r2", 3, True)]
    assert [r["chunk"] for r in results.read("r2")] == [2, 3]
    assert results.read("r1")[1]["checked_ts"] == _NOW + datetime.timedelta(seconds=1)
    assert (lake / "_binlake" / "verify" / "metadata").is_dir()  # the Hadoop catalog: where its name says


def test_results_format_found_from_the_lake(tmp_path):
    """`binlake verify --wait` and `binlake status` without --format read an Iceberg lake's results as Iceberg's."""
    from ingester.cli.land import _results_format

    assert _results_format("delta", str(tmp_path)) == "delta"  # nothing in it yet: as configured
    (tmp_path / "_binlake" / "verify" / "metadata").mkdir(parents=True)  # the Hadoop catalog's results table
    assert _results_format("delta", str(tmp_path)) == "iceberg"
    assert _results_format("iceberg", str(tmp_path)) == "iceberg"
    (tmp_path / "_verify" / "_delta_log").mkdir(parents=True)  # Delta's results table: a Delta lake after all
    assert _results_format("delta", str(tmp_path)) == "delta"
    other = tmp_path / "sqlite"
    other.mkdir()
    (other / "_iceberg_catalog.db").write_bytes(b"")  # an earlier lake's SQLite catalog
    assert _results_format("delta", str(other)) == "iceberg"
    assert _results_format("delta", "s3a://bucket/lake") == "delta"  # a store is not looked into
    hadoop = tmp_path / "hadoop"
    (hadoop / "db" / "t" / "metadata").mkdir(parents=True)
    assert _results_format("delta", str(hadoop)) == "delta"
    (hadoop / "db" / "t" / "metadata" / "version-hint.text").write_text("1")  # a table, no results yet
    assert _results_format("delta", str(hadoop)) == "iceberg"
