"""Compaction of a merge-on-read Iceberg mirror (streaming_job/iceberg/compaction.py), on a local table without
Spark: batches of random updates, deletes and re-inserts deleted by position (position_deletes.locate and
stage_batch), some copy-on-write as pyiceberg's delete does them, each followed by the job's compaction; after every
step pyiceberg's scan equals a dict kept aside (no row deleted by position comes back), no delete file is ever a
compaction's candidate, a delete file naming only rewritten data files leaves the snapshot (and its file leaves the
disk with the snapshots that named it), one naming a live data file stays, a file whose deleted rows pass the share
is rewritten, and the number of live delete files stays bounded (merged into one file-scoped delete file per data
file)."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming_job.batch.small_files import MERGE_SHARE
from streaming_job.iceberg import compaction
from streaming_job.iceberg.maintenance import IcebergMaintenance, expire
from streaming_job.iceberg.position_deletes import locate, stage_batch
from streaming_job.iceberg.rewrite import InProcess
from streaming_job.iceberg.tables import WantedTable
from tests.harness.iceberg import catalog, local_format

_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
_NAME = ("db", "t")
_FILE_ROWS = 2000


def _rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}-{i}" for i in ids]}, schema=_SCHEMA)


def _props(batch_id: int) -> dict[str, str]:
    return {"binlake.app-id": "app-1", "binlake.batch-id": str(batch_id)}


def _scan(table: Any) -> dict[int, str]:
    rows = table.scan().to_arrow().to_pylist()
    found = {r["id"]: r["v"] for r in rows}
    assert len(found) == len(rows), "a key live twice"
    return found


def _live(table: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The current snapshot's live data files and position delete files, by path."""
    from pyiceberg.manifest import DataFileContent, ManifestContent

    data, deletes = {}, {}
    for m in table.current_snapshot().manifests(table.io):
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
            f = e.data_file
            if m.content == ManifestContent.DELETES:
                assert f.content == DataFileContent.POSITION_DELETES
                deletes[f.file_path] = f
            else:
                assert f.content == DataFileContent.DATA
                data[f.file_path] = f
    return data, deletes


def _positions(table: Any, path: str) -> list[tuple[str, int]]:
    with table.io.new_input(path).open() as f:
        rows = pq.read_table(f)
    return list(zip(rows.column("file_path").to_pylist(), rows.column("pos").to_pylist(), strict=True))


def _named(table: Any, path: str) -> set[str]:
    return {p for p, _ in _positions(table, path)}


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def _mor(table: Any, upserts: list[int], deleted: list[int], batch_id: int) -> None:
    """A merge-on-read batch: its keys' live rows deleted by position, its upserts appended, in one snapshot."""
    keys = pa.table({"id": pa.array(sorted({*upserts, *deleted}), pa.int64())})
    located = locate(table, keys, ["id"])
    with table.transaction() as tx:
        stage_batch(tx, table, _rows(upserts, f"b{batch_id}"), located, _props(batch_id), ["id"])


def _cow(table: Any, upserts: list[int], deleted: list[int], batch_id: int) -> None:
    """A copy-on-write batch as pyiceberg's delete makes it (the files holding its keys rewritten)."""
    from pyiceberg.expressions import In

    with table.transaction() as tx:
        tx.delete(In("id", sorted({*upserts, *deleted})), snapshot_properties=_props(batch_id))
        if upserts:
            tx.append(_rows(upserts, f"b{batch_id}"), snapshot_properties=_props(batch_id))


class _Planned:
    """Compaction.plan spied on: every plan's data files (each must be a live data file, never a delete file)."""

    def __init__(self, monkeypatch: Any) -> None:
        self.plans: list[compaction.Plan] = []
        plan = compaction.Compaction.plan

        def spy(this: Any, files: Any, io: Any, merge_rows: int, tidy: bool = False) -> Any:
            out = plan(this, files, io, merge_rows, tidy)
            assert set(out.data) <= set(files.data) and not set(out.data) & set(files.deletes)
            self.plans.append(out)
            return out

        monkeypatch.setattr(compaction.Compaction, "plan", spy)


def _mirror(tmp_path: Path, compact_files: int = 4) -> tuple[Any, IcebergMaintenance]:
    table = local_format(tmp_path).ready(WantedTable("db", "t", _SCHEMA, [], dict))
    for start in range(0, 3 * _FILE_ROWS, _FILE_ROWS):  # three large files in key order
        table.append(_rows(list(range(start, start + _FILE_ROWS)), "v0"))
    smallest = min(f.file_size_in_bytes for f in _live(table)[0].values())
    # the initial files are large (not merged with others: half of merge_rows), a batch's (tens of rows) small
    return table, IcebergMaintenance(compact_files=compact_files, small_file_bytes=smallest,
                                     merge_rows=2 * _FILE_ROWS + 1, rewriter=InProcess())


def _check(table: Any, expected: dict[int, str]) -> None:
    """The scan equals ``expected``; the summary's totals are the live files'; the scan's rows are the data files'
    rows less the live delete files' positions in live data files."""
    assert _scan(table) == expected
    data, deletes = _live(table)
    summary = table.current_snapshot().summary
    assert int(summary["total-data-files"]) == len(data)
    assert int(summary["total-delete-files"]) == len(deletes)
    assert int(summary["total-records"]) == sum(f.record_count for f in data.values())
    assert int(summary["total-position-deletes"]) == sum(f.record_count for f in deletes.values())
    applied = {(p, q) for d in deletes for p, q in _positions(table, d) if p in data}
    assert len(expected) == int(summary["total-records"]) - len(applied)


def test_random_batches_compacted_read_as_the_expected_rows(tmp_path: Path, monkeypatch: Any) -> None:
    table, upkeep = _mirror(tmp_path)
    planned = _Planned(monkeypatch)
    expected = _scan(table)
    rnd = random.Random(41)
    removed: set[str] = set()
    replaces = 0
    for batch_id in range(1, 19):
        keys = sorted({7, 2500} | set(rnd.sample(range(0, 6600), 30)))
        deleted = [k for k in keys if k in expected and k != 7 and rnd.random() < 0.3]
        upserts = [k for k in keys if k not in deleted]
        (_cow if batch_id % 6 == 0 else _mor)(table, upserts, deleted, batch_id)
        for k in deleted:
            del expected[k]
        expected.update({k: f"b{batch_id}-{k}" for k in upserts})
        _check(table, expected)

        before_data, before_deletes = _live(table)
        if not upkeep.compact(_NAME, table, _props(batch_id), ["id"]):
            assert compaction.excess_deletes(list(before_deletes.values())) < upkeep.compact_files
            continue
        replaces += 1
        current = table.current_snapshot()
        assert current.summary.operation.value == "replace"
        assert {k: current.summary[k] for k in _props(batch_id)} == _props(batch_id)
        _check(table, expected)
        data, deletes = _live(table)
        # bounded, whatever the number of batches: one file-scoped delete file per data file, and fewer than
        # compact_files others (naming several data files, or a data file's past its first); merged ones file-scoped
        assert compaction.excess_deletes(list(deletes.values())) < upkeep.compact_files
        assert all(compaction.file_scope(deletes[n]) in data for n in set(deletes) - set(before_deletes))
        for path in before_deletes:
            if path not in deletes:
                removed.add(path)
                # removed: it named no data file left, or its rows were merged into a new delete file
                gone = not _named(table, path) & set(data)
                merged = any(set(_positions(table, path)) & set(_positions(table, n))
                             for n in set(deletes) - set(before_deletes))
                assert gone or merged, path
        for path in deletes:
            assert _named(table, path) & set(data), "a delete file naming no live data file stays"
        assert not set(deletes) & set(before_data)
    assert replaces >= 3 and any(p.dropped for p in planned.plans) and any(p.merged for p in planned.plans)
    assert _scan(catalog(tmp_path).load_table(_NAME)) == expected

    # the files of the removed delete files leave the disk with the snapshots that named them
    assert all(_local(p).exists() for p in removed)
    expire(table, datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1))
    assert len(table.snapshots()) == 1
    assert not [p for p in removed if _local(p).exists()]
    assert all(_local(p).exists() for p in _live(table)[1])
    _check(table, expected)


def test_a_file_whose_deleted_share_passes_the_bound_is_rewritten(tmp_path: Path) -> None:
    table, upkeep = _mirror(tmp_path, compact_files=8)
    expected = _scan(table)
    deleted = list(range(0, int(_FILE_ROWS * MERGE_SHARE) - 10))  # just under the share of the first file
    _mor(table, [], deleted, 1)
    for k in deleted:
        del expected[k]
    assert not upkeep.compact(_NAME, table, _props(1), ["id"])
    first = sorted(_live(table)[0].values(), key=lambda f: f.record_count)
    _mor(table, [], list(range(1000, 1020)), 2)  # and now over it
    for k in range(1000, 1020):
        del expected[k]
    before, deletes = _live(table)
    assert len(deletes) == 2
    assert upkeep.compact(_NAME, table, _props(2), ["id"])
    data, left = _live(table)
    assert not left  # both named only the rewritten file
    assert set(before) - set(data) == {f.file_path for f in first if f.record_count == _FILE_ROWS
                                       and f.lower_bounds[1] == (0).to_bytes(8, "little")}
    summary = table.current_snapshot().summary
    assert summary.operation.value == "replace" and summary["binlake.batch-id"] == "2"
    assert int(summary["removed-position-deletes"]) == len(deleted) + 20
    assert len(_scan(table)) == int(summary["total-records"])  # no delete file left
    _check(table, expected)


def test_a_delete_file_naming_a_live_file_stays_and_a_dangling_one_goes(tmp_path: Path) -> None:
    table, upkeep = _mirror(tmp_path)
    expected = _scan(table)
    # one delete file naming a large file (2000..3999) and a small one (the batch's keys 9000..): it stays
    _mor(table, list(range(9000, 9010)), [], 1)
    _mor(table, [], [2100, 9001], 2)
    spanning = set(_live(table)[1])
    # one naming only 4000..5999, which pyiceberg's copy-on-write delete then rewrites: it dangles
    _mor(table, [], [4100], 3)
    dangling = set(_live(table)[1]) - spanning
    _cow(table, [], [4200], 4)
    expected.update({k: f"b1-{k}" for k in range(9000, 9010)})
    for k in [2100, 9001, 4100, 4200]:
        del expected[k]
    _check(table, expected)
    for batch_id in (5, 6, 7):  # small files enough to compact: the dangling delete file goes with them
        _mor(table, [10_000 + batch_id], [], batch_id)
        expected[10_000 + batch_id] = f"b{batch_id}-{10_000 + batch_id}"
    assert upkeep.compact(_NAME, table, _props(7), ["id"])
    _, deletes = _live(table)
    assert set(deletes) == spanning  # its small file rewritten, its large one live
    _check(table, expected)
    (path,) = dangling
    assert _local(path).exists()
    expire(table, datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1))
    assert not _local(path).exists() and all(_local(p).exists() for p in spanning)
    _check(catalog(tmp_path).load_table(_NAME), expected)


@pytest.mark.parametrize("rows", [0, 5])
def test_a_file_whose_rows_are_all_deleted_is_rewritten_to_nothing(tmp_path: Path, rows: int) -> None:
    table, upkeep = _mirror(tmp_path)
    expected = _scan(table)
    deleted = list(range(_FILE_ROWS, 2 * _FILE_ROWS - rows))
    _mor(table, [], deleted, 1)
    for k in deleted:
        del expected[k]
    assert upkeep.compact(_NAME, table, _props(1), ["id"])
    data, deletes = _live(table)
    assert not deletes and len(data) == (2 if not rows else 3)
    _check(table, expected)


@pytest.mark.parametrize("beside", ["append", "delete", "cow", "none"])
def test_a_compaction_read_before_a_batch_commits_after_it_or_is_given_up(tmp_path: Path, beside: str) -> None:
    """The upkeep reads and writes a compaction while the job's writers go on (Compaction.prepare, from a copy of
    the table), then commits it after the newest snapshot (finish): beside a batch appending new keys it commits,
    with the newest batch's ids; beside a batch deleting by position a row of a file it rewrites, it commits with
    that row deleted in its new file (moved.py); beside a batch rewriting such a file (copy-on-write), it is given up
    and its files deleted (that row would be doubled)."""
    from streaming_job.iceberg.upkeep import copy_of

    table, upkeep = _mirror(tmp_path)
    expected = _scan(table)
    for batch_id in range(1, 5):  # four small files: a compaction is due
        _mor(table, [10_000 + batch_id], [], batch_id)
        expected[10_000 + batch_id] = f"b{batch_id}-{10_000 + batch_id}"
    compactor = upkeep._compactor()
    prepared = compactor.prepare(_NAME, copy_of(table), ["id"])
    assert prepared is not None and len(prepared.data) == 4 and len(prepared.added) == 1
    written = [_local(f.file_path) for f in prepared.added]
    assert all(p.exists() for p in written)
    before = table.current_snapshot().snapshot_id
    if beside == "append":
        _mor(table, [20_000], [], 5)
        expected[20_000] = "b5-20000"
    elif beside == "delete":  # an update of a row in a file the compaction rewrites: deleted there by position
        _mor(table, [10_002], [], 5)
        expected[10_002] = "b5-10002"
    elif beside == "cow":
        _cow(table, [10_003], [], 5)
        expected[10_003] = "b5-10003"
    committed = compactor.finish(_NAME, table, prepared, _props(4))
    assert committed == (beside != "cow")
    current = table.current_snapshot()
    if committed:
        assert current.summary.operation.value == "replace"
        assert current.summary["binlake.batch-id"] == ("4" if beside == "none" else "5")  # the newest batch's
        assert current.parent_snapshot_id != before or beside == "none"
        assert all(p.exists() for p in written)
    else:
        assert current.summary["binlake.batch-id"] == "5" and current.summary.operation.value != "replace"
        assert not any(p.exists() for p in written)
    _check(table, expected)
    assert upkeep.compact(_NAME, table, _props(5), ["id"]) != committed  # the next one plans anew
    _check(table, expected)
    _check(catalog(tmp_path).load_table(_NAME), expected)


@pytest.mark.parametrize("seed", range(3))
def test_rows_deleted_while_a_compaction_runs_stay_deleted_in_its_new_files(tmp_path: Path, seed: int) -> None:
    """Under a steady load of spread updates each batch deletes by position rows of the very files a compaction
    is rewriting: between each compaction's read (prepare, on a copy of the table) and its commit (finish), random
    batches update, delete and re-insert keys everywhere (among them keys of the files it rewrites, some twice), and
    every compaction commits anyway, the rows deleted since deleted in its new files (moved.py; every other one
    follows them in two steps, catch_up beside the batches and finish after more): pyiceberg's scan equals the dict
    kept aside after every commit, also from a fresh catalog, and the moved deletes are in delete files of the
    compaction's own that name its new files only."""
    from streaming_job.iceberg.upkeep import copy_of

    rnd = random.Random(seed)
    table, upkeep = _mirror(tmp_path)
    expected = _scan(table)
    compactor = upkeep._compactor()
    batch_id, followed = 0, 0

    def batch(keys: list[int]) -> None:
        nonlocal batch_id
        batch_id += 1
        deleted = [k for k in keys if k in expected and rnd.random() < 0.3]
        upserts = [k for k in keys if k not in deleted]
        _mor(table, upserts, deleted, batch_id)
        for k in deleted:
            del expected[k]
        expected.update({k: f"b{batch_id}-{k}" for k in upserts})

    batch(list(range(int(_FILE_ROWS * MERGE_SHARE) + 10)))  # the first large file past the share: rewritten
    for turn in range(6):
        for _ in range(4):  # small files: due
            batch(rnd.sample(range(0, 7000), 25))
        prepared = compactor.prepare(_NAME, copy_of(table), ["id"])
        assert prepared is not None
        rewritten, known = {f.file_path for f in prepared.data}, set(prepared.known_deletes)
        for _ in range(rnd.randint(1, 3)):
            batch([*rnd.sample(list(expected), 40), *rnd.sample(range(0, 7000), 5)])
        if turn % 2:  # followed beside the writers first (as the upkeep does), then the batches since by finish
            assert compactor.catch_up(_NAME, copy_of(table), prepared)
            for _ in range(rnd.randint(1, 2)):
                batch([*rnd.sample(list(expected), 40), *rnd.sample(range(0, 7000), 5)])
        naming = {d.file_path for d in _live(table)[1].values()} - known
        hits = any(_named(table, d) & rewritten for d in naming)
        assert compactor.finish(_NAME, table, prepared, _props(batch_id))
        _check(table, expected)
        added = {f.file_path for f in prepared.added}
        moved = [d for d in _live(table)[1] if f"{prepared.write_id}-moved" in d]
        assert bool(moved) == hits
        assert all(_named(table, d) <= added for d in moved)
        followed += len(moved)
    assert followed >= 3
    assert _scan(catalog(tmp_path).load_table(_NAME)) == expected


def test_a_quiet_tables_tidy_compactions_leave_no_deleted_row_nor_two_small_files(tmp_path: Path) -> None:
    table, upkeep = _mirror(tmp_path)
    expected = _scan(table)
    rnd = random.Random(5)
    for batch_id in (1, 2, 3):  # spread deletes and updates, each file's deleted share under MERGE_SHARE
        keys = rnd.sample(range(0, 3 * _FILE_ROWS), 24)
        deleted, upserts = keys[:12], [*keys[12:], 10_000 + batch_id]
        _mor(table, upserts, deleted, batch_id)
        for k in deleted:
            expected.pop(k, None)
        expected.update({k: f"b{batch_id}-{k}" for k in upserts})
    assert not upkeep.compact(_NAME, table, _props(3), ["id"])  # nothing due by the batches' rules
    assert len(_live(table)[1]) == 3
    steps = 0
    while (prepared := upkeep.prepare(_NAME, table, ["id"], tidy=True)) is not None:
        assert upkeep.finish(_NAME, table, prepared, _props(3), commits=0)
        steps += 1
        assert steps < 10, "a tidy pass that never ends"
        current = table.current_snapshot().summary
        assert current.operation.value == "replace" and current["binlake.batch-id"] == "3"
        _check(table, expected)
    data, deletes = _live(table)
    # one file, as a compacted table has: the files under TIDY_RATIO times a compaction's rows merged
    assert steps == 1 and not deletes and len(data) == 1
    assert sum(f.record_count for f in data.values()) == len(expected)  # no deleted row left in a file
    assert _scan(catalog(tmp_path).load_table(_NAME)) == expected


def test_a_file_past_a_compactions_rows_whose_deleted_share_passes_the_bound_is_rewritten_alone(tmp_path: Path) -> None:
    table, upkeep = _mirror(tmp_path, compact_files=8)
    upkeep.merge_rows = _FILE_ROWS // 2  # each of the three files holds twice a compaction's rows
    expected = _scan(table)
    deleted = list(range(_FILE_ROWS, _FILE_ROWS + int(_FILE_ROWS * MERGE_SHARE) + 10))  # the second file's
    _mor(table, [], deleted, 1)
    for k in deleted:
        del expected[k]
    before, _ = _live(table)
    assert upkeep.compact(_NAME, table, _props(1), ["id"])
    data, deletes = _live(table)
    assert not deletes and len(set(before) - set(data)) == 1 and len(data) == 3
    _check(table, expected)
