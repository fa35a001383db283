"""Where a mirror file's rows of a batch's keys are (streaming_job/batch/key_index.py): runs of consecutive keys,
sorted keys and the key columns themselves each find exactly the rows that numpy's own membership test (np.isin)
or pyarrow's join find, whatever the key's integer type, gaps, nulls and the batch's keys outside the file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from streaming_job.batch.key_index import BatchKeys, KeyColumns, KeyRuns, SortedKeys, file_keys


def _expected(file: np.ndarray, batch: np.ndarray) -> list[int]:
    return np.flatnonzero(np.isin(file, batch)).tolist()


def _positions(file: pa.Array, batch: pa.Array) -> list[int]:
    found = file_keys(pa.table({"id": file})).positions(BatchKeys(pa.table({"id": batch}), ["id"]))
    assert found.dtype == np.uint64
    return found.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_each_kind_finds_what_a_membership_test_finds(seed: int) -> None:
    rnd = np.random.default_rng(seed)
    for _ in range(20):
        rows = int(rnd.integers(0, 3_000))
        gaps = rnd.random() < 0.5  # AUTO_INCREMENT with a few holes, or keys spread far apart
        holes = np.where(rnd.random(rows) < 0.01, rnd.integers(2, 50, rows), 1)
        steps = holes if gaps else rnd.integers(1, 10**6, rows)
        keys = int(rnd.integers(-(10**12), 10**12)) + np.cumsum(steps)
        picked = rnd.choice(keys, min(len(keys), int(rnd.integers(0, 200))), replace=False) if rows else keys[:0]
        outside = rnd.integers(-(10**12), 10**12 + 10**8, int(rnd.integers(0, 200)))
        batch = np.concatenate([picked, outside, keys[:1] - 1, keys[-1:] + 1])
        assert _positions(pa.array(keys, pa.int64()), pa.array(batch, pa.int64())) == _expected(keys, batch)


def test_consecutive_keys_are_kept_as_runs_and_others_as_they_are() -> None:
    dense = np.arange(1, 1_000_001, dtype=np.int64)
    runs = file_keys(pa.table({"id": dense}))
    assert isinstance(runs, KeyRuns) and runs.rows == 1_000_000 and runs.nbytes == 24  # one run, not 8 MB
    holes = np.delete(dense, [10, 500_000, 999_998])
    assert isinstance(file_keys(pa.table({"id": holes})), KeyRuns)
    sparse = np.arange(0, 3_000_000, 3, dtype=np.int64)
    assert isinstance(file_keys(pa.table({"id": sparse})), SortedKeys)
    assert isinstance(file_keys(pa.table({"id": sparse[::-1].copy()})), KeyColumns)  # another order: scanned
    assert isinstance(file_keys(pa.table({"id": [1, 2, 2, 3]})), KeyColumns)  # a key twice: scanned
    assert isinstance(file_keys(pa.table({"id": [1, None, 3]})), KeyColumns)
    assert isinstance(file_keys(pa.table({"id": ["a", "b"]})), KeyColumns)
    assert isinstance(file_keys(pa.table({"a": [1, 2], "b": [1, 2]})), KeyColumns)
    batch = np.array([11, 12, 500_001, 1_000_000, 0, 1_000_001])  # 11 and 500,001 gone, 0 and 1,000,001 outside
    assert _positions(pa.array(holes), pa.array(batch)) == _expected(holes, batch) == [10, 999_996]


def test_a_key_of_another_integer_type_than_the_files() -> None:
    small = pa.array(np.arange(-5, 5, dtype=np.int32))
    assert _positions(small, pa.array([-5, 4, 2**31 + 3, -(2**31) - 6, 2**40], pa.int64())) == [0, 9]
    assert _positions(small, pa.array([-(2**63), 0, 2**63 - 1], pa.int64())) == [5]


def test_an_unsigned_bigint_key_near_the_top_of_its_range() -> None:
    top = [2**64 - 5, 2**64 - 4, 2**64 - 3, 2**64 - 1]  # decimal(20,0), as the lake holds an unsigned BIGINT
    file = pa.array(top, pa.decimal128(20, 0))
    assert isinstance(file_keys(pa.table({"id": file})), KeyRuns | SortedKeys)
    assert _positions(file, pa.array([2**64 - 1, 2**64 - 4, 2**64 - 2, 7], pa.decimal128(20, 0))) == [1, 3]


def test_nulls_match_nothing_and_several_columns_join() -> None:
    file = pa.table({"a": [5, 1, 9, 1, None], "b": ["x", "y", "x", "x", "x"]})
    latest = pa.table({"a": [1, 9, 7, None], "b": ["x", "x", "x", "x"]})
    assert file_keys(file.select(["a"])).positions(BatchKeys(latest, ["a"])).tolist() == [1, 2, 3]
    assert file_keys(file).positions(BatchKeys(latest, ["a", "b"])).tolist() == [2, 3]
    assert file_keys(file).positions(BatchKeys(latest.slice(0, 0), ["a", "b"])).tolist() == []
    assert _positions(pa.array([1, 2, 3]), pa.array([None, 2, None], pa.int64())) == [1]


def test_files_read_again_past_the_memory_kept_are_said_once_per_period(caplog, monkeypatch) -> None:
    """The driver keeps the files' keys within land.key_memory; where what the batches touch does not fit, a file
    dropped for want of room and read again by a later batch is said in a warning naming the setting, at most every
    WARN_SECONDS; a file dropped because it is gone (compacted, removed) is not counted."""
    import logging

    from streaming_job.batch import recent_files
    from streaming_job.batch.recent_files import RecentFiles

    class Sized:
        nbytes = 100

    clock = [1_000.0]
    monkeypatch.setattr(recent_files.time, "monotonic", lambda: clock[0])
    kept: RecentFiles[Sized] = RecentFiles(250, "land.key_memory")
    with caplog.at_level(logging.WARNING, logger="binlake.land"):
        for path in ("a", "b", "c"):  # "a" dropped for want of room
            kept.put(path, Sized())
        assert kept.size == 200 and kept.get("a") is None and kept.again == 0 and not caplog.records
        kept.put("b", Sized())  # put again while kept: counted once
        assert kept.size == 200
        kept.put("a", Sized())  # read again: "c" dropped in turn
        assert kept.again == 1
        (line,) = [r.getMessage() for r in caplog.records]
        assert "more than land.key_memory (0 MiB): 1 files dropped for want of room were read again" in line
        kept.put("c", Sized())
        kept.drop(["b"])  # gone: forgotten, not read again
        kept.put("b", Sized())
        assert kept.again == 2 and len(caplog.records) == 1  # within the period: not said again
        clock[0] += recent_files.WARN_SECONDS  # the next put says what was read again meanwhile
        kept.put("z", Sized())
        assert len(caplog.records) == 2 and ": 1 files dropped" in caplog.records[-1].getMessage()
    quiet: RecentFiles[Sized] = RecentFiles(150)  # no setting named (the small files' rows): never said
    for path in ("a", "b", "a", "b"):
        quiet.put(path, Sized())
    assert quiet.again == 0
