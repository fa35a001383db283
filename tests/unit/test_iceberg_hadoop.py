"""Iceberg's Hadoop catalog on a path (iceberg_hadoop.HadoopCatalog), without a server: the layout Iceberg Java's
HadoopCatalog reads (``metadata/v<N>.metadata.json``, ``metadata/version-hint.text`` holding N), checked by the
file names and by pyiceberg's own path-table reader (StaticTable reads ``version-hint.text`` itself); commits
that race for one version; stale, missing and garbled hints; drops; namespaces; the lake's default catalog.
Spark's HadoopCatalog reading the same lake: tests/integration/test_land_iceberg.py."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import pickle
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table import StaticTable
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate
from pyiceberg.types import LongType

from streaming_job.format.lake_format import Undecodable
from streaming_job.iceberg.catalog import IcebergCatalog
from streaming_job.iceberg.hadoop import HadoopCatalog

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _versions(table: Path) -> list[str]:
    found = (n for n in os.listdir(table / "metadata") if n.startswith("v") and n != "version-hint.text")
    return sorted(found, key=lambda n: int(n[1:].split(".")[0]))


def _hint(table: Path) -> str:
    return (table / "metadata" / "version-hint.text").read_text()


def _catalog(tmp_path: Path) -> HadoopCatalog:
    catalog = HadoopCatalog("binlake", str(tmp_path / "lake"))
    catalog.create_namespace("db")
    return catalog


def test_tables_are_javas_layout_and_pyicebergs_path_reader_reads_them(tmp_path) -> None:
    catalog = _catalog(tmp_path)
    table = catalog.create_table("db.t", SCHEMA)
    where = tmp_path / "lake" / "db" / "t"
    assert table.location() == where.as_uri()
    assert _versions(where) == ["v1.metadata.json"] and _hint(where) == "1"
    table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    table.delete("id = 2")  # copy-on-write: an overwrite snapshot
    with table.transaction() as tx:
        tx.set_properties({"binlake.columns": "[]"})
        with tx.update_schema() as update:
            update.add_column("w", LongType())
    assert _versions(where) == [f"v{n}.metadata.json" for n in range(1, 5)] and _hint(where) == "4"
    assert table.metadata_location == (where / "metadata" / "v4.metadata.json").as_uri()
    # pyiceberg's reader of a table on a path, which follows version-hint.text by itself
    static = StaticTable.from_metadata(str(where))
    assert static.metadata_location.endswith("/db/t/metadata/v4.metadata.json")
    assert static.scan().to_arrow().to_pylist() == [{"id": 1, "v": "a", "w": None}, {"id": 3, "v": "c", "w": None}]
    assert static.properties["binlake.columns"] == "[]"
    entries = [e.metadata_file for e in static.metadata.metadata_log]  # each commit names its predecessor
    assert entries == [(where / "metadata" / f"v{n}.metadata.json").as_uri() for n in range(1, 4)]
    again = catalog.load_table(("db", "t"))
    assert again.metadata == static.metadata and again.metadata_location == table.metadata_location


def test_a_gzip_codec_names_the_file_as_java_does(tmp_path) -> None:
    catalog = _catalog(tmp_path)
    table = catalog.create_table("db.z", SCHEMA, properties={"write.metadata.compression-codec": "gzip"})
    table.append(pa.table({"id": [7], "v": ["x"]}, schema=SCHEMA))
    where = tmp_path / "lake" / "db" / "z"
    assert _versions(where) == ["v1.gz.metadata.json", "v2.gz.metadata.json"]
    assert json.loads(gzip.decompress((where / "metadata" / "v2.gz.metadata.json").read_bytes()))["format-version"] == 2
    found = StaticTable.from_metadata(str(where / "metadata" / "v2.gz.metadata.json"))
    assert found.scan().to_arrow().to_pylist() == [{"id": 7, "v": "x"}]
    assert catalog.load_table("db.z").scan().to_arrow().to_pylist() == [{"id": 7, "v": "x"}]


def test_of_two_writers_of_one_version_one_wins_the_other_gets_commit_failed(tmp_path) -> None:
    catalog = _catalog(tmp_path)
    table = catalog.create_table("db.t", SCHEMA)
    other = HadoopCatalog("binlake", str(tmp_path / "lake")).load_table("db.t")  # both at version 1
    table.append(pa.table({"id": [1], "v": ["mine"]}, schema=SCHEMA))  # version 2
    with pytest.raises(CommitFailedException):  # a change based on version 1's (no) snapshot: refused
        other.catalog.commit_table(other, (AssertRefSnapshotId(ref="main", snapshot_id=None),),
                                   (SetPropertiesUpdate(updates={"x": "y"}),))
    other.append(pa.table({"id": [2], "v": ["theirs"]}, schema=SCHEMA))  # pyiceberg retries an append, on v2
    # past the requirements, the file itself: version 2 exists, its name is taken
    where = tmp_path / "lake" / "db" / "t" / "metadata"
    before = (where / "v2.metadata.json").read_bytes()
    with pytest.raises(CommitFailedException, match=r"^Version 2 of db.t exists already"):
        catalog._publish(other.metadata, where / "v2.metadata.json", ("db", "t"), 2, created=False)
    (where / "v3.metadata.json").rename(where / "moved")  # as if v2 were the newest: the link itself refuses
    with pytest.raises(CommitFailedException, match=r"^Version 2 of db.t exists already"):
        catalog._publish(other.metadata, where / "v2.metadata.json", ("db", "t"), 2, created=False)
    (where / "moved").rename(where / "v3.metadata.json")
    with pytest.raises(TableAlreadyExistsError):
        catalog._publish(other.metadata, where / "v1.metadata.json", ("db", "t"), 1, created=True)
    assert (where / "v2.metadata.json").read_bytes() == before
    assert [n for n in os.listdir(where) if n.endswith(".tmp")] == []  # no temporary file left
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table("db.t", SCHEMA)
    assert sorted(catalog.load_table("db.t").scan().to_arrow().to_pylist(), key=str) == [
        {"id": 1, "v": "mine"}, {"id": 2, "v": "theirs"}]
    assert _versions(tmp_path / "lake" / "db" / "t") == [f"v{n}.metadata.json" for n in range(1, 4)]


def _writer(lake: str, writer: int, commits: int, queue: multiprocessing.Queue) -> None:
    """Commits a property of its own ``commits`` times, each retried until it wins; counts the lost races."""
    catalog = HadoopCatalog("binlake", lake)
    lost = 0
    for n in range(commits):
        while True:
            table = catalog.load_table("db.t")
            try:
                with table.transaction() as tx:
                    tx.set_properties({f"writer-{writer}": str(n)})
                break
            except CommitFailedException:
                lost += 1
    queue.put(lost)


def test_concurrent_writers_lose_no_commit(tmp_path) -> None:
    """Four processes commit to one table at once: a version's file is created once (os.link), so every
    commit a writer saw succeed is in the table's last metadata, each in a version of its own."""
    catalog = _catalog(tmp_path)
    catalog.create_table("db.t", SCHEMA)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    writers = [context.Process(target=_writer, args=(str(tmp_path / "lake"), w, 25, queue)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    lost = sum(queue.get(timeout=5) for _ in writers)
    table = catalog.load_table("db.t")
    assert {k: v for k, v in table.properties.items() if k.startswith("writer-")} == {
        f"writer-{w}": "24" for w in range(4)}
    where = tmp_path / "lake" / "db" / "t"
    assert _versions(where) == [f"v{n}.metadata.json" for n in range(1, 102)]  # 100 commits after the create
    assert len(table.metadata.metadata_log) == 100
    print(f"lost races: {lost}")


def test_a_stale_missing_or_garbled_hint_finds_the_newest_version(tmp_path) -> None:
    catalog = _catalog(tmp_path)
    table = catalog.create_table("db.t", SCHEMA)
    for i in range(3):
        table.append(pa.table({"id": [i], "v": [str(i)]}, schema=SCHEMA))
    where = tmp_path / "lake" / "db" / "t"
    hint = where / "metadata" / "version-hint.text"
    newest = (where / "metadata" / "v4.metadata.json").as_uri()
    for text in ("2", "", "garbage", "9"):  # a crash before the hint's update; an empty, a wrong, a future one
        hint.write_text(text)
        assert catalog.load_table("db.t").metadata_location == newest, text
    hint.unlink()  # a crash between the two writes of a table's first commit, or a hint lost
    assert catalog.load_table("db.t").metadata_location == newest
    hint.write_text("2")
    table = catalog.load_table("db.t")
    table.append(pa.table({"id": [9], "v": ["9"]}, schema=SCHEMA))  # commits version 5, not 3
    assert _versions(where)[-1] == "v5.metadata.json" and _hint(where) == "5"
    assert sorted(r["id"] for r in StaticTable.from_metadata(str(where)).scan().to_arrow().to_pylist()) == [
        0, 1, 2, 9]


def test_old_metadata_files_are_deleted_as_the_jobs_tables_ask(tmp_path) -> None:
    catalog = _catalog(tmp_path)
    table = catalog.create_table("db.t", SCHEMA, properties={
        "write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "3"})
    for i in range(6):
        table.append(pa.table({"id": [i], "v": [str(i)]}, schema=SCHEMA))
    where = tmp_path / "lake" / "db" / "t"
    assert _versions(where) == [f"v{n}.metadata.json" for n in range(4, 8)] and _hint(where) == "7"
    (where / "metadata" / "version-hint.text").unlink()  # the listing finds v7 among what is left
    assert len(catalog.load_table("db.t").scan().to_arrow()) == 6


def test_drop_list_and_namespaces(tmp_path) -> None:
    catalog = _catalog(tmp_path)
    lake = tmp_path / "lake"
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("db")
    catalog.create_namespace_if_not_exists("db")
    catalog.create_namespace(("a", "b"))
    for name in ("t", "u"):
        catalog.create_table(("db", name), SCHEMA)
    assert catalog.list_namespaces() == [("a",), ("db",)]  # directories that are not tables
    assert catalog.list_namespaces("a") == [("a", "b")]
    assert catalog.list_tables("db") == [("db", "t"), ("db", "u")] and catalog.list_tables("a") == []
    assert catalog.list_tables(("a", "b")) == []
    assert catalog.load_namespace_properties("db") == {"location": (lake / "db").as_uri()}
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("db.t")  # a table is no namespace
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table(("nope", "t"), SCHEMA)
    with pytest.raises(ValueError, match=r"lives at .*/lake/db/x \(its name's path\), not file:///elsewhere"):
        catalog.create_table(("db", "x"), SCHEMA, location="file:///elsewhere")
    assert catalog.create_table(("db", "y"), SCHEMA, location=(lake / "db" / "y").as_uri()).location() == (
        lake / "db" / "y").as_uri()  # its own path is fine
    with pytest.raises(ValueError, match="no namespace properties"):
        catalog.create_namespace("p", {"owner": "me"})
    with pytest.raises(ValueError, match="cannot name"):
        catalog.create_table(("db", ".."), SCHEMA)
    catalog.drop_table("db.u")
    assert not (lake / "db" / "u").exists() and catalog.list_tables("db") == [("db", "t"), ("db", "y")]
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.u")
    with pytest.raises(NoSuchTableError):
        catalog.drop_table("db.u")
    assert not catalog.table_exists("db.u") and catalog.table_exists("db.t")
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace("db")
    catalog.drop_namespace(("a", "b"))
    assert catalog.list_namespaces("a") == [] and catalog.namespace_exists("a")
    assert not catalog.namespace_exists(("a", "b"))


def test_a_local_lake_gets_the_hadoop_catalog_and_an_earlier_lakes_sqlite_catalog_stays(tmp_path) -> None:
    from tests.harness.iceberg import local_format

    new = IcebergCatalog(str(tmp_path / "new"))
    assert new.hadoop and isinstance(new.open(), HadoopCatalog)
    assert new.spark_conf() == {"spark.sql.catalog.binlake": "org.apache.iceberg.spark.SparkCatalog",
                                "spark.sql.catalog.binlake.type": "hadoop",
                                "spark.sql.catalog.binlake.warehouse": (tmp_path / "new").as_uri()}
    fmt = local_format(tmp_path / "new")
    # a table's path is its name here
    fmt.quarantine([Undecodable("p.db.t", 0, 5, "bad record", b"\x00", pickle.dumps({}))], 3)
    assert _hint(tmp_path / "new" / "_binlake" / "quarantine") == "2"  # created, then the batch's append
    assert not (tmp_path / "new" / "_quarantine").exists() and not (tmp_path / "new" / "_iceberg_catalog.db").exists()

    old = tmp_path / "old"  # a lake an earlier binlake made: its SQLite catalog in the lake
    old.mkdir()
    earlier = IcebergCatalog(str(old), f"sqlite:///{old}/_iceberg_catalog.db")
    earlier.open().create_namespace("db")
    earlier.open().create_table(("db", "t"), SCHEMA, location=earlier.location("db", "t"))
    kept = IcebergCatalog(str(old))
    assert not kept.hadoop and kept.url == f"sqlite:///{old}/_iceberg_catalog.db"
    assert kept.spark_conf()["spark.sql.catalog.binlake.type"] == "jdbc"
    fmt = local_format(old)
    assert fmt.table("db", "t") is not None  # found in the SQLite catalog
    fmt.quarantine([Undecodable("p.db.t", 0, 5, "bad record", b"\x00", pickle.dumps({}))], 3)
    assert (old / "_quarantine" / "metadata").is_dir() and not (old / "_binlake").exists()
    assert not list(old.glob("**/version-hint.text"))
