"""The job keeps its Iceberg tables bounded (iceberg_maintenance.py), on pyiceberg's SQL catalog in a SQLite
file: small files compacted in replace snapshots that keep each table's last batch known (its batch's own snapshot
expired), and the files of
expired snapshots deleted while every live snapshot still reads."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

import pyarrow as pa

from streaming_job.iceberg.catalog import landed_batch
from streaming_job.iceberg.maintenance import IcebergMaintenance
from streaming_job.iceberg.tables import WantedTable, key_filter
from tests.harness.iceberg import catalog, local_format

_DAYS = [datetime.date(2026, 11, 25), datetime.date(2026, 11, 26)]


def _log_batch(fmt: Any, table: Any, batch: int) -> list[dict[str, Any]]:
    rows = [{"seq": batch * 10 + i, "commit_date": _DAYS[(batch + i) % 2], "v": f"b{batch}"} for i in range(3)]
    properties = fmt._batch(batch)
    fmt._commit("db", "t__changes", table, lambda tx: tx.append(pa.Table.from_pylist(rows, _LOG),
                                                                snapshot_properties=properties), properties)
    fmt.upkeep.settle()  # the commit's upkeep (iceberg/upkeep.py) done
    return rows


def _mirror_batch(fmt: Any, table: Any, batch: int, expected: dict[int, str], rng: random.Random) -> None:
    keys = sorted(set(rng.sample(range(60), 6)))
    for k in keys[:2]:
        expected.pop(k, None)  # deleted
    upserts = pa.table({"id": pa.array(keys[2:], pa.int64()), "v": [f"b{batch}"] * len(keys[2:])})
    expected.update({k: f"b{batch}" for k in keys[2:]})
    properties = fmt._batch(batch)

    def apply(tx: Any) -> None:  # as IcebergFormat._mirror: the batch's keys deleted, the upserts appended
        if table.current_snapshot() is not None:
            tx.delete(key_filter(pa.table({"id": pa.array(keys, pa.int64())}), ["id"]), snapshot_properties=properties)
        tx.append(upserts, snapshot_properties=properties)

    fmt._commit("db", "t", table, apply, properties, ["id"])
    fmt.upkeep.settle()


_LOG = pa.schema([("seq", pa.int64()), ("commit_date", pa.date32()), ("v", pa.string())])
_MIRROR = pa.schema([("id", pa.int64()), ("v", pa.string())])


def test_small_files_are_compacted_in_replace_snapshots_that_keep_the_last_batch_known(tmp_path) -> None:
    fmt = local_format(tmp_path)
    # snapshots expired after each commit: a compaction's snapshot is then all that is left of a table
    fmt.maintenance = IcebergMaintenance(compact_files=3, retention=datetime.timedelta(0), expire_every=1)
    log = fmt.ready(WantedTable("db", "t__changes", _LOG, [], dict, partition="commit_date"))
    mirror = fmt.ready(WantedTable("db", "t", _MIRROR, [], dict))
    landed: list[dict[str, Any]] = []
    expected: dict[int, str] = {}
    rng = random.Random(7)
    replaced = set()
    for batch in range(16):
        landed += _log_batch(fmt, log, batch)
        _mirror_batch(fmt, mirror, batch, expected, rng)
        for table in (log, mirror):
            files = table.scan().plan_files()
            by_date: dict[Any, int] = {}
            for f in files:
                by_date[tuple(f.file.partition)] = by_date.get(tuple(f.file.partition), 0) + 1
            assert max(by_date.values()) < 3, (batch, by_date)  # at most compact_files - 1 per partition
            # the batch is known (a replayed batch is skipped) whatever snapshot is the current one
            assert landed_batch(table, "app-1") == batch and fmt._has(table, batch) and not fmt._has(table, batch + 1)
            current = table.current_snapshot()
            replaced.add((current.summary.operation.value, len(table.snapshots())))
    assert ("replace", 1) in replaced  # the batch known from the compaction's snapshot alone
    reread = catalog(tmp_path)  # a reader of its own
    rows = reread.load_table(("db", "t__changes")).scan().to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["seq"]) == sorted(landed, key=lambda r: r["seq"])
    assert {r["id"]: r["v"] for r in reread.load_table(("db", "t")).scan().to_arrow().to_pylist()} == expected


def _on_disk(table: Any) -> set[str]:
    root = Path(table.location().removeprefix("file://"))
    return {p.as_uri() for p in root.rglob("*") if p.suffix in (".parquet", ".avro")}


def _named(table: Any, needed: bool) -> set[str]:
    """The files the table's snapshots name: manifest lists, manifests, data files (``needed``: only those a
    snapshot reads, not data files its manifests list as deleted)."""
    from pyiceberg.manifest import ManifestEntryStatus

    out: set[str] = set()
    for s in table.snapshots():
        out.add(s.manifest_list)
        for m in s.manifests(table.io):
            out.add(m.manifest_path)
            out.update(e.data_file.file_path for e in m.fetch_manifest_entry(table.io, discard_deleted=False)
                       if not needed or e.status != ManifestEntryStatus.DELETED)
    return out


def test_expired_snapshots_files_are_deleted_and_every_live_snapshot_still_reads(tmp_path) -> None:
    fmt = local_format(tmp_path)
    fmt.maintenance = IcebergMaintenance(compact_files=4, retention=datetime.timedelta(0), expire_every=7)
    mirror = fmt.ready(WantedTable("db", "t", _MIRROR, [], dict))
    expected: dict[int, str] = {}
    rng = random.Random(3)
    for batch in range(13):
        _mirror_batch(fmt, mirror, batch, expected, rng)
    inflight = Path(mirror.location().removeprefix("file://")) / "data" / "in-flight.parquet"
    inflight.write_bytes(b"a file of a commit not made yet")  # named by no metadata: never deleted
    before = _on_disk(mirror)
    assert len(mirror.snapshots()) > 1 and before <= _named(mirror, needed=False) | {inflight.as_uri()}
    _mirror_batch(fmt, mirror, 13, expected, rng)  # the 14th commit expires every snapshot but the current one
    assert len(mirror.snapshots()) == 1
    left = _on_disk(mirror)
    assert _named(mirror, needed=True) <= left <= _named(mirror, needed=False) | {inflight.as_uri()}
    assert len(left) < len(before) // 3, (len(left), len(before))
    reread = catalog(tmp_path).load_table(("db", "t"))
    assert {r["id"]: r["v"] for r in reread.scan().to_arrow().to_pylist()} == expected
    assert landed_batch(reread, "app-1") == 13
    for batch in range(14, 20):  # and goes on: 7 more commits, their snapshots expired in turn
        _mirror_batch(fmt, mirror, batch, expected, rng)
    assert _named(mirror, needed=True) <= _on_disk(mirror) <= _named(mirror, needed=False) | {inflight.as_uri()}
    assert {r["id"]: r["v"] for r in mirror.scan().to_arrow().to_pylist()} == expected


def test_the_metadata_versions_setting_bounds_new_and_existing_tables(tmp_path) -> None:
    """land.iceberg_metadata_versions: a new table is made with it, a table made with another value takes it at
    the job's first commit to it; the table then keeps that many previous metadata files."""
    fmt = local_format(tmp_path)
    made = fmt.ready(WantedTable("db", "t", _MIRROR, [],
                                 lambda: {"write.metadata.delete-after-commit.enabled": "true"}))
    assert made.metadata.properties["write.metadata.previous-versions-max"] == "20"  # the default
    fmt = local_format(tmp_path)  # a job run again with the setting changed
    fmt.maintenance = IcebergMaintenance(metadata_versions=2)
    mirror = fmt.ready(WantedTable("db", "t", _MIRROR, [], dict))
    expected: dict[int, str] = {}
    rng = random.Random(5)
    for batch in range(6):
        _mirror_batch(fmt, mirror, batch, expected, rng)
    reread = catalog(tmp_path).load_table(("db", "t"))
    assert reread.metadata.properties["write.metadata.previous-versions-max"] == "2"
    assert len(reread.metadata.metadata_log) == 2
    metadata = Path(reread.location().removeprefix("file://")) / "metadata"
    assert len(list(metadata.glob("*.metadata.json"))) == 3  # the current one and two previous
    assert {r["id"]: r["v"] for r in reread.scan().to_arrow().to_pylist()} == expected


def test_medium_files_are_merged_tier_by_tier_up_to_the_merge_rows(tmp_path) -> None:
    """No file is small (small_file_bytes 1): each batch's file is a medium one, merged with others of like rows of
    its partition once it has MERGE_FILES (compact_files) under half of merge_rows, until the merged files hold
    that half or more. A partition keeps at most MERGE_FILES such files and about a file per half merge_rows rows,
    never one past merge_rows."""
    from streaming_job.batch.small_files import MERGE_FILES

    fmt = local_format(tmp_path)
    fmt.maintenance = IcebergMaintenance(compact_files=MERGE_FILES, small_file_bytes=1, merge_rows=40)
    log = fmt.ready(WantedTable("db", "t__changes", _LOG, [], dict, partition="commit_date"))
    landed: list[dict[str, Any]] = []
    for batch in range(60):
        landed += _log_batch(fmt, log, batch)
        by_date: dict[Any, list[int]] = {}
        for task in log.scan().plan_files():
            by_date.setdefault(tuple(task.file.partition), []).append(task.file.record_count)
        for counts in by_date.values():
            assert max(counts) <= 40, (batch, by_date)
            assert sum(1 for n in counts if n < 20) <= MERGE_FILES, (batch, by_date)
            assert len(counts) <= sum(counts) // 20 + MERGE_FILES, (batch, by_date)
    assert {n for counts in by_date.values() for n in counts if n >= 20}  # merged up to the top tier
    rows = catalog(tmp_path).load_table(("db", "t__changes")).scan().to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["seq"]) == sorted(landed, key=lambda r: r["seq"])
