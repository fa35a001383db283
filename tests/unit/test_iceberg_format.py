"""The Iceberg format's parts that need no server: the catalog's JDBC URL for Spark, the mirror's key filters
and the batch ids in snapshot summaries, against pyiceberg's own SQL catalog on SQLite (a file)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from streaming_job.format.lake_format import Undecodable
from streaming_job.iceberg.catalog import IcebergCatalog, batch_properties, jdbc_url, landed_batch
from streaming_job.iceberg.format import IcebergFormat
from streaming_job.iceberg.tables import WantedTable, change_log_schema, key_filter, mirror_schema
from streaming_job.runtime.errors import LandError
from tests.harness.iceberg import local_format


def _format(tmp_path) -> IcebergFormat:
    return local_format(tmp_path / "lake")


def test_spark_reads_the_catalog_pyiceberg_writes_as_icebergs_jdbc_catalog(tmp_path) -> None:
    assert jdbc_url("sqlite:////var/lake/_iceberg_catalog.db") == ("jdbc:sqlite:/var/lake/_iceberg_catalog.db", {})
    assert jdbc_url("mysql+pymysql://ice:p%40ss@db.example:3307/catalog") == (
        "jdbc:mariadb://db.example:3307/catalog", {"user": "ice", "password": "p@ss"})
    conf = IcebergCatalog(str(tmp_path), f"sqlite:///{tmp_path}/cat.db").spark_conf()
    assert conf["spark.sql.catalog.binlake.uri"] == f"jdbc:sqlite:{tmp_path}/cat.db"
    assert conf["spark.sql.catalog.binlake.type"] == "jdbc"
    with pytest.raises(LandError, match=r"^land.iceberg_catalog oracle://u:\*\*\*@h/x: use a sqlite"):
        jdbc_url("oracle://u:pw@h/x")
    with pytest.raises(LandError, match=r"the lake abfss://b/lake must be a local path or on S3"):
        IcebergCatalog("abfss://b/lake")


@pytest.mark.parametrize(("pk", "types"), [(["id"], [pa.int64()]), (["a", "b"], [pa.string(), pa.int32()]),
                                           (["d", "t"], [pa.decimal128(20, 0), pa.timestamp("us", tz="UTC")])],
                         ids=["int", "string-int", "decimal-timestamp"])
def test_a_key_filter_deletes_exactly_the_batchs_keys(tmp_path, pk, types) -> None:
    values = {
        pa.int64(): list(range(3000)), pa.string(): [f"k{i % 7}" for i in range(3000)],
        pa.int32(): [i // 7 for i in range(3000)],
        pa.decimal128(20, 0): [Decimal(2**64 - 1 - i % 5) for i in range(3000)],
        pa.timestamp("us", tz="UTC"): [datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
                                       + datetime.timedelta(microseconds=i // 5) for i in range(3000)],
    }
    rows = pa.table({**{k: pa.array(values[t], t) for k, t in zip(pk, types, strict=True)},
                     "v": pa.array(range(3000), pa.int64())})
    catalog = IcebergCatalog(str(tmp_path)).open()
    catalog.create_namespace("db")
    table = catalog.create_table(("db", "t"), rows.schema)
    table.append(rows)
    gone = rows.take(list(range(0, 3000, 3)))  # 1,000 keys, a deep OR were it not balanced
    table.delete(key_filter(gone.select(pk), pk))
    left = {tuple(r[k] for k in pk) for r in table.scan().to_arrow().to_pylist()}
    assert left == {tuple(r[k] for k in pk) for r in rows.to_pylist()} - {tuple(r[k] for k in pk)
                                                                           for r in gone.to_pylist()}


def test_a_tables_last_batch_is_its_newest_snapshot_of_the_job(tmp_path) -> None:
    catalog = IcebergCatalog(str(tmp_path)).open()
    catalog.create_namespace("db")
    table = catalog.create_table(("db", "t"), pa.schema([("id", pa.int64())]))
    assert landed_batch(table, "app-1") is None
    table.append(pa.table({"id": [1]}), snapshot_properties=batch_properties("app-1", 7))
    table.append(pa.table({"id": [2]}))  # another writer's snapshot (e.g. maintenance): looked through
    table.append(pa.table({"id": [3]}), snapshot_properties=batch_properties("app-2", 9))
    assert landed_batch(table, "app-1") == 7
    assert landed_batch(table, "app-2") == 9


def test_tables_are_created_evolved_by_icebergs_promotions_and_stop_on_others(tmp_path) -> None:
    fmt = _format(tmp_path)
    columns = [("id", "int"), ("f", "float"), ("t", "tinyint")]
    fmt.ready(WantedTable("db", "t__changes", change_log_schema(columns), columns, dict, partition="commit_date"))
    assert fmt.lake_columns("db", "t") == []  # created by ready without binlake's columns property: a new table
    wider = [("id", "bigint"), ("f", "double"), ("t", "smallint"), ("added", "string")]
    fmt.ready(WantedTable("db", "t", mirror_schema(columns), columns, dict))
    mirror = fmt.ready(WantedTable("db", "t", mirror_schema(wider), wider, dict))
    # an added column comes last, after binlake's, as in a Delta mirror
    assert [(f.name, str(f.field_type)) for f in mirror.schema().fields] == [
        ("id", "long"), ("f", "double"), ("t", "int"), ("_binlake_seq", "binary"),
        ("_binlake_commit_ts", "timestamptz"), ("added", "string")]
    unsigned = [("id", "decimal(20,0)"), *wider[1:]]
    with pytest.raises(LandError, match=r"^the Iceberg table db.t cannot take the batch's columns \(Iceberg's "):
        fmt.ready(WantedTable("db", "t", mirror_schema(unsigned), unsigned, dict))
    log = IcebergCatalog(str(tmp_path / "lake")).open().load_table(("db", "t__changes"))
    assert [f.name for f in log.spec().fields] == ["commit_date"]
    assert log.location() == (tmp_path / "lake" / "db" / "t__changes").as_uri()


def test_quarantined_records_land_once_per_batch(tmp_path) -> None:
    import pickle

    fmt = _format(tmp_path)
    errors = [Undecodable("p.db.t", 0, 5, "bad record", b"\x00", pickle.dumps({"h": b"v"}))]
    fmt.quarantine(errors, 3)
    fmt.quarantine(errors, 3)  # the batch replayed
    rows = IcebergCatalog(str(tmp_path / "lake")).open().load_table(("_binlake", "quarantine")).scan().to_arrow()
    assert rows.drop_columns(["ingest_ts"]).to_pylist() == [
        {"topic": "p.db.t", "partition": 0, "offset": 5, "error": "bad record", "value": b"\x00",
         "headers": [("h", b"v")], "batch_id": 3}]


def test_old_snapshots_are_expired_as_the_job_commits_and_its_last_batch_stays_known(tmp_path) -> None:
    from streaming_job.iceberg.maintenance import IcebergMaintenance

    fmt = _format(tmp_path)
    # (no compaction's snapshot among them)
    fmt.maintenance = IcebergMaintenance(compact_files=32, retention=datetime.timedelta(0), expire_every=3)
    table = fmt.ready(WantedTable("db", "t", pa.schema([("id", pa.int64())]), [], dict))
    counts = []
    for batch in range(6):
        properties = fmt._batch(batch)
        fmt._commit("db", "t", table, lambda tx, p=properties, b=batch: tx.append(pa.table({"id": [b]}),
                                                                                  snapshot_properties=p), properties)
        fmt.upkeep.settle()  # the commit's upkeep (iceberg/upkeep.py) done
        counts.append(len(table.snapshots()))
    assert counts == [1, 2, 1, 2, 3, 1]  # every third commit leaves only the current snapshot
    assert landed_batch(table, "app-1") == 5 and len(table.scan().to_arrow()) == 6


def test_rows_older_than_an_add_column_get_its_default_where_null() -> None:
    from streaming_job.batch.default_values import fill_older, with_columns
    from streaming_job.batch.defaults import Default

    rows = pa.table({"id": [1, 2, 3], "_binlake_seq": [b"\x01", b"\x05", b"\x09"]})
    schema = pa.schema([("id", pa.int32()), ("_binlake_seq", pa.binary()), ("c", pa.string())])
    widened = with_columns(rows, ["id", "_binlake_seq", "c"], schema)
    widened = widened.set_column(2, "c", pa.array([None, "kept", None], pa.string()))
    filled = fill_older(widened, [Default("c", b"\x06", "'dflt'", "ALTER TABLE t ADD c ...")],
                        {"c": pa.scalar("dflt")}, "_binlake_seq")
    assert filled.column("c").to_pylist() == ["dflt", "kept", None]  # row 3 is newer than the statement
