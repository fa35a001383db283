"""Orphan files of an Iceberg table (iceberg_orphans.py), on pyiceberg's SQL catalog in a SQLite file: files the
test plants where a crash leaves them (a data file, a manifest, a manifest list and a metadata file no metadata
names) are deleted once older than the bound, when a job first loads the table; what live metadata names stays
(a snapshot expired from the current metadata but named by a previous metadata file in its log included), and
so do young files, files of other kinds and files beside data/ and metadata/."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import pyarrow as pa

from streaming_job.iceberg.maintenance import IcebergMaintenance
from streaming_job.iceberg.tables import WantedTable
from tests.harness.iceberg import catalog, local_format
from tests.harness.iceberg_files import local_path, metadata_locations, named, on_disk

_MIRROR = pa.schema([("id", pa.int64()), ("v", pa.string())])
_HOUR = 3600


def _commit(fmt, table, batch: int) -> None:
    rows = pa.table({"id": pa.array([batch], pa.int64()), "v": [f"b{batch}"]})
    properties = fmt._batch(batch)
    fmt._commit("db", "t", table, lambda tx: tx.append(rows, snapshot_properties=properties), properties)
    fmt.upkeep.settle()  # the commit's upkeep (iceberg/upkeep.py) done


def _age(paths, seconds: float) -> None:
    then = time.time() - seconds
    for p in paths:
        os.utime(p, (then, then))


def test_only_files_no_live_metadata_names_and_older_than_the_bound_are_removed(tmp_path) -> None:
    fmt = local_format(tmp_path)
    fmt.maintenance = IcebergMaintenance(metadata_versions=5, compact_files=32)  # (no compaction)
    mirror = fmt.ready(WantedTable("db", "t", _MIRROR, [], dict))
    for batch in range(4):
        _commit(fmt, mirror, batch)
    first = mirror.snapshots()[0]
    # the oldest snapshot expired from the metadata only (pyiceberg's expiry): its files are named now by the
    # previous metadata files in the log alone, and must stay
    mirror.maintenance.expire_snapshots().by_ids([first.snapshot_id]).commit()
    location = Path(mirror.location().removeprefix("file://"))
    data, metadata = location / "data", location / "metadata"
    planted = {data / "00000-0-crashed.parquet": b"PAR1 a batch's data file never committed",
               metadata / "crashed-m0.avro": b"a manifest never committed",
               metadata / "snap-1-crashed.avro": b"a manifest list never committed",
               metadata / "00099-crashed.metadata.json": b"{}"}
    kept = {data / "young.parquet": b"written a moment ago: maybe a commit in flight",
            location / "beside.parquet": b"not under data/ or metadata/"}
    hint = metadata / "version-hint.text"  # the Hadoop catalog's (the default here): never an orphan
    assert hint.exists()
    for p, content in {**planted, **kept}.items():
        p.write_bytes(content)
    kept[hint] = hint.read_bytes()
    current = metadata_locations(tmp_path)[("db", "t")]
    live = named(current, local_path)
    assert local_path(first.manifest_list) in live  # named by a previous metadata file only
    assert all(local_path(first.manifest_list) != local_path(s.manifest_list) for s in mirror.snapshots())
    everything = on_disk(location) | {location / "beside.parquet", metadata / "version-hint.text"}
    _age(everything - {data / "young.parquet"}, 2 * _HOUR)
    assert on_disk(location) - live == set(planted) | {data / "young.parquet"}
    before = {r["id"]: r["v"] for r in mirror.scan().to_arrow().to_pylist()}
    snapshots = {s.snapshot_id: mirror.scan(snapshot_id=s.snapshot_id).to_arrow().num_rows for s in mirror.snapshots()}

    job = local_format(tmp_path)  # a job started again: it looks at the table when it first loads it
    job.maintenance = IcebergMaintenance(orphan_age=datetime.timedelta(hours=1))
    table = job.table("db", "t")
    assert all(not p.exists() for p in planted), [p for p in planted if p.exists()]
    assert all(p.exists() for p in kept)
    assert on_disk(location) == live - set(planted) | {data / "young.parquet"}  # every named file stays
    reread = catalog(tmp_path).load_table(("db", "t"))
    assert {r["id"]: r["v"] for r in reread.scan().to_arrow().to_pylist()} == before
    assert {s.snapshot_id: reread.scan(snapshot_id=s.snapshot_id).to_arrow().num_rows
            for s in reread.snapshots()} == snapshots
    _commit(job, table, 4)  # and it lands on
    assert {r["id"] for r in catalog(tmp_path).load_table(("db", "t")).scan().to_arrow().to_pylist()} == {0, 1, 2, 3, 4}


def test_orphans_are_looked_for_every_n_commits_with_the_bound_at_zero(tmp_path) -> None:
    fmt = local_format(tmp_path)
    fmt.maintenance = IcebergMaintenance(orphan_age=datetime.timedelta(0), orphan_every=3)
    mirror = fmt.ready(WantedTable("db", "t", _MIRROR, [], dict))
    _commit(fmt, mirror, 0)
    location = Path(mirror.location().removeprefix("file://"))
    crashed = location / "data" / "crashed.parquet"
    crashed.write_bytes(b"PAR1")
    _commit(fmt, mirror, 1)
    assert crashed.exists()  # 2 commits: not yet
    _commit(fmt, mirror, 2)
    assert not crashed.exists()  # the third
    current = metadata_locations(tmp_path)[("db", "t")]
    assert on_disk(location) == named(current, local_path)
    assert sorted(r["id"] for r in mirror.scan().to_arrow().to_pylist()) == [0, 1, 2]


def test_a_creation_cut_short_by_a_crash_leaves_a_metadata_file_the_next_creation_removes(tmp_path) -> None:
    # a SQL catalog: a crash after the table's first metadata file was written and before the catalog named it
    # leaves that file at the table's location; the job creates the table again there and removes it
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    metadata = tmp_path / "db" / "t" / "metadata"
    metadata.mkdir(parents=True)
    crashed = metadata / "00000-crashed.metadata.json"
    crashed.write_bytes(b"{}")
    _age([crashed], 2 * _HOUR)
    fmt = local_format(tmp_path, uri=uri)
    fmt.maintenance = IcebergMaintenance(orphan_age=datetime.timedelta(hours=1))
    mirror = fmt.ready(WantedTable("db", "t", _MIRROR, [], dict))
    assert Path(mirror.location().removeprefix("file://")) == tmp_path / "db" / "t"
    assert not crashed.exists()
    _commit(fmt, mirror, 0)
    current = catalog(tmp_path, uri).load_table(("db", "t"))
    assert on_disk(tmp_path / "db" / "t") == named(current.metadata_location, local_path)
    assert [r["id"] for r in current.scan().to_arrow().to_pylist()] == [0]
