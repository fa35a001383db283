"""A decoded batch's rows per table (batch_rows._row_indices, DriverBatch.table): every row of a table,
in batch order, none of another; a batch of one table is given whole."""

from __future__ import annotations

import random

import pyarrow as pa

from streaming_job.batch.batch_rows import _row_indices


def test_rows_are_found_per_table_in_batch_order() -> None:
    rng = random.Random(3)
    for n in (0, 1, 2, 50, 5_000):
        names = [(f"d{rng.randint(0, 2)}", f"t{rng.randint(0, 40)}") for _ in range(n)]
        rows = pa.table({"db": pa.array([d for d, _ in names], pa.string()),
                         "tbl": pa.array([t for _, t in names], pa.string())})
        expected: dict[tuple[str, str], list[int]] = {}
        for i, name in enumerate(names):
            expected.setdefault(name, []).append(i)
        assert {k: v.to_pylist() for k, v in _row_indices(rows).items()} == expected
