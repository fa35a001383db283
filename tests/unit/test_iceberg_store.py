"""An Iceberg lake on an object store (iceberg_catalog.IcebergCatalog with ObjectStoreSettings): where its
default catalog lives, the tables' locations, and pyiceberg's FileIO settings from the same land.s3_* and
credentials as Delta's (no server: tests/integration/test_land_iceberg_s3.py lands into S3Proxy)."""

from __future__ import annotations

import pytest

from streaming_job.iceberg.catalog import IcebergCatalog
from streaming_job.iceberg.tables import WantedTable
from streaming_job.lake.object_store import ObjectStoreSettings
from streaming_job.runtime.errors import LandError


def test_the_default_catalog_of_a_bucket_lake_is_sqlite_in_the_local_checkpoint(tmp_path) -> None:
    where = IcebergCatalog("s3a://lake/x/", None, ObjectStoreSettings(), str(tmp_path / "ckpt"))
    assert where.url == f"sqlite:///{tmp_path}/ckpt/_iceberg_catalog.db"
    assert where.location("db", "t__changes") == "s3a://lake/x/db/t__changes"
    conf = where.spark_conf()
    assert conf["spark.sql.catalog.binlake.warehouse"] == "s3a://lake/x"
    assert conf["spark.sql.catalog.binlake.uri"] == f"jdbc:sqlite:{tmp_path}/ckpt/_iceberg_catalog.db"
    given = IcebergCatalog("s3a://lake/x", "mysql+pymysql://u:p@h:3306/cat", None, "s3a://lake/x/_checkpoint")
    assert given.url == "mysql+pymysql://u:p@h:3306/cat"
    local = IcebergCatalog(str(tmp_path / "lake"), None, None, str(tmp_path / "ckpt"))
    assert local.hadoop and not where.hadoop and not given.hadoop  # a local lake: the Hadoop catalog on its path
    assert local.url == (tmp_path / "lake").as_uri()
    assert local.location("db", "t") == (tmp_path / "lake" / "db" / "t").as_uri()


@pytest.mark.parametrize("checkpoint", ["s3a://lake/x/_checkpoint", None])
def test_a_bucket_lake_with_nowhere_for_sqlite_needs_a_catalog(checkpoint) -> None:
    with pytest.raises(LandError, match=r"^land.format iceberg: the lake s3a://lake/x is on an object store and the "
                                        r"checkpoint .* too: .* land.iceberg_catalog \(--iceberg-catalog"):
        IcebergCatalog("s3a://lake/x", None, None, checkpoint)


def test_pyicebergs_file_io_gets_the_stores_settings_and_credentials(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    store = ObjectStoreSettings("http://127.0.0.1:9094", path_style=True)
    assert store.fileio_properties() == {
        "s3.region": "us-east-1", "s3.force-virtual-addressing": "false", "s3.connect-timeout": "10",
        "s3.request-timeout": "60", "s3.endpoint": "http://127.0.0.1:9094", "s3.access-key-id": "AKID",
        "s3.secret-access-key": "s3cr3t"}
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = FILEID\naws_secret_access_key = filesecret\n"
                           "aws_session_token = tok\n")
    found = ObjectStoreSettings(region="eu-west-3", credentials_file=str(credentials)).fileio_properties()
    assert found == {"s3.region": "eu-west-3", "s3.force-virtual-addressing": "true", "s3.connect-timeout": "10",
                     "s3.request-timeout": "60", "s3.access-key-id": "FILEID", "s3.secret-access-key": "filesecret",
                     "s3.session-token": "tok"}
    where = IcebergCatalog("s3a://lake/x", None, ObjectStoreSettings(credentials_file=str(credentials)),
                           str(tmp_path / "ckpt"))
    assert "filesecret" not in repr(where) + str(where.spark_conf())  # the catalog's settings never hold it
    catalog = where.open()
    assert catalog.properties["s3.access-key-id"] == "FILEID"  # tables' FileIO: the store's, with these
    assert (tmp_path / "ckpt" / "_iceberg_catalog.db").exists()


def test_tables_of_one_new_namespace_created_on_many_threads(tmp_path) -> None:
    """A lake on a store lands every table on a thread of its own (sink.Lander): pyiceberg's
    create_namespace_if_not_exists checks, then inserts, so two threads' first tables of a namespace collided
    (an IntegrityError of the catalog's namespace table) before IcebergFormat serialised it."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    from streaming_job.iceberg.format import IcebergFormat

    lake = IcebergFormat(IcebergCatalog(str(tmp_path / "lake")), "app-1")
    schema = pa.schema([("a", pa.int64())])
    with ThreadPoolExecutor(16) as pool:  # 8 new namespaces, each one's first 16 tables at once
        made = list(pool.map(lambda i: lake.ready(WantedTable(f"db{i // 16}", f"t{i}", schema, [], dict)), range(128)))
    assert len(made) == 128
    assert sorted(t for n in range(8) for _, t in lake.catalog.list_tables(f"db{n}")) == sorted(
        f"t{i}" for i in range(128))


def test_a_rest_catalog_is_read_by_spark_as_icebergs_rest_catalog(tmp_path) -> None:
    where = IcebergCatalog(str(tmp_path), "https://catalog.example/api")
    assert where.rest and not IcebergCatalog(str(tmp_path)).rest
    assert where.spark_conf() == {"spark.sql.catalog.binlake": "org.apache.iceberg.spark.SparkCatalog",
                                  "spark.sql.catalog.binlake.type": "rest",
                                  "spark.sql.catalog.binlake.uri": "https://catalog.example/api"}
    # a lake and its checkpoint both on a store need no SQLite file with a REST catalog
    assert IcebergCatalog("s3a://lake/x", "http://127.0.0.1:8181", None, "s3a://lake/x/_checkpoint").rest
    with pytest.raises(LandError, match=r"^cannot open the Iceberg catalog http://127\.0\.0\.1:1: ConnectionError"):
        IcebergCatalog(str(tmp_path), "http://127.0.0.1:1").open()  # nothing answers: one line naming it
