"""The driver's split of a table's records into one run per core (delta/landing.py's land_on_threads): large
batches are split at record boundaries into runs of about equal bytes, in order, every record in exactly one run;
small ones stay one run (one change-log file), and an empty batch gives nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from streaming_job.delta.landing import _THREADED_BYTES, land_on_threads

SCHEMA = pa.schema([("offsets", pa.list_(pa.int64()))])


def _records(sizes: list[int]) -> pa.Table:
    return pa.table({"topic": ["t"] * len(sizes), "partition": [0] * len(sizes), "offset": list(range(len(sizes))),
                     "data": [b"x" * s for s in sizes]})


def _runs(batches):
    """A run's answer: the offsets it was given, as one row (none for no records, as land_partition)."""
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    if offsets:
        yield pa.RecordBatch.from_pydict({"offsets": [offsets]}, schema=SCHEMA)


def runs(sizes: list[int], threads: int = 2) -> list[list[int]]:
    with ThreadPoolExecutor(threads) as pool:
        return land_on_threads(_runs, _records(sizes), SCHEMA, pool, threads).column("offsets").to_pylist()


def test_small_batches_stay_one_run_and_an_empty_one_gives_nothing() -> None:
    assert runs([]) == []
    assert runs([100, 200]) == [[0, 1]]
    assert runs([_THREADED_BYTES + 1]) == [[0]]  # one record cannot be split
    assert runs([_THREADED_BYTES, _THREADED_BYTES], threads=1) == [[0, 1]]


def test_large_batches_split_by_bytes_at_record_boundaries() -> None:
    mib = 1 << 20
    assert runs([5 * mib, 5 * mib]) == [[0], [1]]
    assert runs([mib] * 10) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert runs([8 * mib, mib, mib]) == [[0], [1, 2]]
    split = runs([mib] * 12, threads=3)
    assert split == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
