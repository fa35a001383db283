"""Which small files a batch's commit compacts (streaming_job/batch/small_files.py: a mirror's, MirrorFiles.small,
and a change log's, ChangeLogFiles.pick), and which
files it rewrites rather than gives a deletion vector: a bounded amount of work whatever the table's size.
A bulk load leaves well-compressed files of a few MiB holding hundreds of
thousands of rows each, under land.small_file_bytes: compacting by bytes alone rewrote most of a 10,000,000-row
mirror in one batch (9.5 s, bench/run_big_tables.py --keys hot)."""

from __future__ import annotations

import orjson

from streaming_job.batch.key_range import KeyRange
from streaming_job.batch.small_files import (
    COMPACT_ROWS,
    SMALL_ROWS,
    FileSize,
    fewest_rows,
    is_small,
    tidy_pick,
    tiered,
)
from streaming_job.delta.commit import LiveFile
from streaming_job.delta.compaction import ChangeLogFiles
from streaming_job.delta.mirror_driver import MirrorFiles, rewritten_not_vectored

MIB = 1 << 20


def _files(specs: list[tuple[str, int, int | None, int]]) -> MirrorFiles:
    """(name, bytes, rows or None for no statistics, lowest key) each."""
    live, ranges, sizes = {}, {}, {}
    for name, size, rows, low in specs:
        stats = None if rows is None else orjson.dumps({"numRecords": rows, "minValues": {"id": low},
                                                        "maxValues": {"id": low + (rows or 1) - 1}}).decode()
        live[name] = LiveFile(name, size, stats, None, {}, 0)
        ranges[name] = KeyRange(low, low + (rows or 1) - 1)
        sizes[name] = size
    return MirrorFiles(1, live, ranges, sizes, "id", "bigint")


def test_the_trickles_files_are_compacted_and_a_bulk_loads_are_not():
    bulk = [(f"bulk{i}", 3 * MIB, 240_000, i * 240_000) for i in range(30)]  # under 8 MiB, many rows
    trickle = [(f"t{i}", 40_000, 2_000, 10_000_000 - i * 2_000) for i in range(32)]  # a batch's updated rows each
    files = _files(bulk + trickle)
    chosen = files.small(8 * MIB, 32, set(), 256 * MIB)
    assert sorted(chosen) == sorted(n for n, *_ in trickle)
    assert chosen == sorted(chosen, key=lambda n: files.ranges[n])  # written back in key order
    assert sum(files.rows(n) for n in chosen) <= COMPACT_ROWS


def test_fewest_rows_first_within_the_row_budget():
    rows = [40_000, 45_000, 5_000, 30_000, 49_000, 48_000, 47_000, 46_000, 44_000]  # 354,000: more than the budget
    files = _files([(f"f{i}", MIB, n, i * 1_000_000) for i, n in enumerate(rows)])
    chosen = files.small(8 * MIB, 3, set(), 256 * MIB)
    assert sorted(chosen) == ["f0", "f1", "f2", "f3", "f7", "f8"]  # 5,000 + 30,000 + ... + 46,000 = 210,000
    assert files.small(8 * MIB, 10, set(), 256 * MIB) == []  # fewer small files than compact_files: none
    assert files.small(8 * MIB, 3, {f"f{i}" for i in range(8)}, 256 * MIB) == []  # one left: nothing to do
    assert sorted(files.small(8 * MIB, 3, set(), 2 * MIB)) == ["f2", "f3"]  # the byte budget holds too


def test_a_file_without_statistics_is_not_taken():
    files = _files([("known1", MIB, 1_000, 0), ("known2", MIB, 1_000, 5_000), ("unknown", MIB, None, 9_000)])
    assert sorted(files.small(8 * MIB, 2, set(), 256 * MIB)) == ["known1", "known2"]  # nor counted


def test_a_touched_file_is_rewritten_by_its_rows_not_its_bytes():
    """A bulk load's file of 240,000 rows in 700 KiB was rewritten whole by a batch that changed one of its rows
    (it was under 1 MiB): 23 such files in one batch took 5.1 s at 10,000,000 rows. It gets a vector now."""
    assert not rewritten_not_vectored(240_000, 700 * 1024, 1, 8 * MIB)
    assert not rewritten_not_vectored(240_000, 3 * MIB, 70_000, 8 * MIB)  # 29%: still a vector
    assert rewritten_not_vectored(240_000, 3 * MIB, 80_000, 8 * MIB)  # more than 30% deleted
    assert rewritten_not_vectored(2_000, 40_000, 1, 8 * MIB)  # a trickle's file: cheap to write
    assert not rewritten_not_vectored(2_000, 40_000, 1, 1)  # ... unless no file is small (land.small_file_bytes)


def test_a_change_logs_compaction_takes_the_trickles_files_not_a_bulk_loads():
    """The change log's side (delta/compaction.ChangeLogFiles): a preload's change-log files of 100,000 and
    550,000 rows, each under 8 MiB, were compacted with the trickle's in one batch (2.7 s at 1,000,000 rows)."""
    files = ChangeLogFiles(1, {}, {})
    for name, size, rows in [("bulk1", 2 * MIB, 100_000), ("bulk2", 7 * MIB, 550_000), ("none", MIB, 1 << 62)]:
        files.add(name, "2026-11-30", size, rows, 8 * MIB)
    for i in range(40):
        files.add(f"t{i:02d}", "2026-11-30", 60_000, 2_000 + i, 8 * MIB)
    files.add("other-day", "2026-11-29", 60_000, 10, 8 * MIB)
    assert sorted(files.files) == sorted([*(f"t{i:02d}" for i in range(40)), "other-day"])
    date, names = files.pick(32, 256 * MIB) or ("", [])
    assert date == "2026-11-30" and names == sorted(names)
    assert names == [f"t{i:02d}" for i in range(40)]  # 40 files of ~2,000 rows: within the budget
    assert files.pick(41, 256 * MIB) is None
    assert len((files.pick(32, 20 * 60_000) or ("", []))[1]) == 20  # the byte budget
    files.update(2, [("c", "2026-11-30", 3 * MIB, 240_000)], [f"t{i:02d}" for i in range(30)], 8 * MIB)
    assert "c" not in files.files and files.pick(10, 256 * MIB) == ("2026-11-30", [f"t{i:02d}" for i in range(30, 40)])


def test_fewest_rows_stop_at_the_first_file_past_a_budget():
    files = [FileSize("a", 10, 100), FileSize("b", 10, 200), FileSize("c", 10, 300), FileSize("d", 1, 50)]
    assert [f.name for f in fewest_rows(files, 1_000, 350)] == ["d", "a", "b"]
    assert [f.name for f in fewest_rows(files, 21, 10_000)] == ["d", "a", "b"]
    assert [f.name for f in fewest_rows(files, 20, 10_000)] == ["d", "a"]
    assert not is_small(100, SMALL_ROWS, 1 << 20) and is_small(100, SMALL_ROWS - 1, 1 << 20)
    assert not is_small(1 << 20, 1, 1 << 20)


def test_a_tiered_merge_takes_files_of_like_rows_fewest_first() -> None:
    def sizes(*rows: int) -> list[FileSize]:
        return [FileSize(f"f{i}-{n}", n * 10, n) for i, n in enumerate(rows)]

    def picked(files: list[FileSize], rows_budget: int = 10**9, byte_budget: int = 10**12) -> list[int]:
        return [f.rows for f in tiered(files, byte_budget, rows_budget)]

    # four times the rows taken before, at most: the 2,000,000-row file waits for a tier of its own
    assert picked(sizes(200_000, 60_000, 50_000, 2_000_000, 70_000)) == [50_000, 60_000, 70_000, 200_000]
    assert picked(sizes(50_000, 300_000, 250_000)) == []  # 250,000 > 4 x 50,000: none (fewer than two)
    # files under the floor join whatever came before: a one-row file does not keep the batches' files apart
    assert picked(sizes(1, 206, 1_900, 2_000, 2_100)) == [1, 206, 1_900, 2_000, 2_100]
    assert picked(sizes(1, 20_000, 30_000)) == [1, 20_000, 30_000]  # 30,000 <= 4 x 20,001
    assert picked(sizes(1, 50_000)) == []  # past the floor's 40,000
    assert picked(sizes(10, 20, 30, 40), rows_budget=60) == [10, 20, 30]  # the rows budget
    assert picked(sizes(10, 20, 30, 40), byte_budget=300) == [10, 20]  # and the bytes'


def test_a_quiet_tables_pass_takes_the_files_with_deleted_rows_and_the_open_files_beside_them() -> None:
    """delta/tidy.py: files with deleted rows first (fewest rows first), then open files within what is left; the
    smallest such file alone where none fits; open files alone only two or more at once."""
    def f(name: str, rows: int, size: int = MIB) -> FileSize:
        return FileSize(name, size, rows)

    heavy = [f("h1", 900_000), f("h2", 300_000), f("h3", 3_000_000)]
    open_ = [f("o1", 1_000_000), f("o2", 10), f("o3", 1_500_000)]
    picked = [x.name for x in tidy_pick(heavy, open_, 1 << 40, 4_000_000)]
    assert picked == ["h2", "h1", "o2", "o1", "o3"]  # h3 waits for the next pass (1.2M + 3M > 4M)
    assert [x.name for x in tidy_pick([f("big", 9_000_000)], open_, 1 << 40, 4_000_000)] == ["big"]  # alone
    assert [x.name for x in tidy_pick([f("h", 10, 3 * MIB)], open_, 2 * MIB, 4_000_000)] == ["h"]  # by bytes too
    assert tidy_pick([], [f("o", 10)], 1 << 40, 4_000_000) == []  # one open file: nothing merged
    assert [x.name for x in tidy_pick([], open_[:2], 1 << 40, 4_000_000)] == ["o2", "o1"]
    assert tidy_pick([], [], 1 << 40, 4_000_000) == []
