"""Finding a batch's keys in a large mirror's files (docs/LAND.md, "Deletion vectors"): the driver's lookup of the
rows a batch of updates at scattered keys replaces, for its deletion vectors, in mirrors of 10,000,000 and
100,000,000 rows (files of 100,000 rows written in key order, as the driver writes them), without Spark or servers.

Each batch: 2,000 distinct keys spread over the whole mirror; the files whose key range holds one of them
(mirror_driver.MirrorFiles.holding, from the files' ranges), and in each the positions of the batch's keys, from
the file's keys kept in memory (512 MiB at most, the least recently used dropped) or read from its Parquet file.
Side by side:

- ``columns``: the key column kept as it was read (8 bytes a row) and searched by bisection: binlake before
  2026-11-30 (mirror_driver._positions);
- ``index``: streaming_job/batch/key_index.file_keys: runs of consecutive keys (a table keyed by AUTO_INCREMENT),
  sorted numbers otherwise.

Keys: ``dense`` (AUTO_INCREMENT, one in a thousand deleted before the load) and ``sparse`` (distinct random
BIGINTs). Reported: each batch's lookup time after a warm-up batch (p50, max), the memory the kept keys take, and
how many files a batch read from disk. ``--key-memory``: the memory kept (land.key_memory, MiB; several: side by
side).

    python bench/run_key_lookup.py [--rows 10000000,100000000] [--keys dense,sparse] [--modes columns,index]
        [--key-memory 512] [--batches 10] [--output bench/results/key-lookup.md]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from run_decode import _cpu_model, _git_revision

from ingester.config import LandConfig
from streaming_job.batch.key_index import BatchKeys, file_keys, key_numbers
from streaming_job.batch.key_range import KeyRange
from streaming_job.batch.recent_files import RecentFiles

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "key-lookup.md"
FILE_ROWS = 100_000
BATCH_KEYS = 2_000


class Run(NamedTuple):
    rows: int
    keys: str
    mode: str
    budget: int  # bytes of keys kept at most (land.key_memory)
    p50: float
    max: float
    kept_bytes: int
    files_read: float  # per batch, from disk


class _Columns:
    """binlake before key_index: the key column as read, checked for order once and searched by bisection."""

    def __init__(self, keys: pa.Table) -> None:
        self.keys = keys
        self.rows = len(keys)
        numbers = key_numbers(keys.column(0))
        self.ordered = bool(len(numbers) < 2 or np.all(numbers[1:] >= numbers[:-1]))

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes

    def positions(self, batch: BatchKeys) -> np.ndarray:
        column = key_numbers(self.keys.column(0))  # as _positions did, each batch
        wanted = np.unique(key_numbers(batch.latest.column(0).drop_null()))
        at = np.searchsorted(column, wanted)
        inside = at < len(column)
        at = at[inside]
        return np.sort(at[column[at] == wanted[inside]]).astype(np.uint64)


def _write(directory: Path, rows: int, dense: bool, rnd: np.random.Generator) -> tuple[list[tuple[str, KeyRange]],
                                                                                     np.ndarray]:
    """The mirror's files, and its keys."""
    if dense:
        drop = np.unique(rnd.integers(0, rows + rows // 1000, rows // 500))[: rows // 1000]
        keys = np.delete(np.arange(1, rows + rows // 1000 + 1, dtype=np.int64), drop)[:rows]
    else:
        keys = np.unique(rnd.integers(-(2**62), 2**62, rows + rows // 100))[:rows]
    files = []
    for i, start in enumerate(range(0, rows, FILE_ROWS)):
        part = keys[start : start + FILE_ROWS]
        path = directory / f"part-{i:05d}.parquet"
        pq.write_table(pa.table({"id": part, "v": np.zeros(len(part), np.int64)}), path, compression="zstd")
        files.append((str(path), KeyRange(int(part[0]), int(part[-1]))))
    return files, keys


def _lookup(files: list[tuple[str, KeyRange]], batches: list[np.ndarray], make: Callable[[pa.Table], Any],
            rows: int, keys: str, mode: str, budget: int) -> Run:
    kept: RecentFiles[Any] = RecentFiles(budget)
    times, reads = [], []
    for number, wanted in enumerate(batches):
        batch = BatchKeys(pa.table({"id": wanted}), ["id"])
        started, read, found = time.perf_counter(), 0, 0
        for path, bounds in files:
            if np.searchsorted(wanted, bounds.low, "left") >= np.searchsorted(wanted, bounds.high, "right"):
                continue  # MirrorFiles.holding: no key of the batch in the file's range
            index = kept.get(path)
            if index is None:
                index = make(pq.read_table(path, columns=["id"]))
                kept.put(path, index)
                read += 1
            found += len(index.positions(batch))
        assert found == len(wanted), (found, len(wanted))  # every key of the batch, once
        if number:  # the first batch reads every file: a warm-up
            times.append(time.perf_counter() - started)
            reads.append(read)
    return Run(rows, keys, mode, budget, float(np.median(times)), max(times), kept.size, float(np.mean(reads)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default="10000000,100000000", help="mirror sizes, comma-separated")
    p.add_argument("--keys", default="dense,sparse", help="of dense, sparse")
    p.add_argument("--modes", default="columns,index", help="of columns, index")
    p.add_argument("--key-memory", default=str(LandConfig.key_memory >> 20),
                   help="MiB of keys kept (land.key_memory), comma-separated: side by side")
    p.add_argument("--batches", type=int, default=10, help="batches after the warm-up one")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    runs: list[Run] = []
    for rows in (int(r) for r in args.rows.split(",")):
        for keys in args.keys.split(","):
            directory = Path(tempfile.mkdtemp(prefix="bl-keys-"))
            try:
                rnd = np.random.default_rng(rows)
                files, mirror = _write(directory, rows, keys == "dense", rnd)
                batches = [np.unique(rnd.choice(mirror, BATCH_KEYS)) for _ in range(args.batches + 1)]
                del mirror
                for mode in args.modes.split(","):
                    for budget in (int(m) << 20 for m in args.key_memory.split(",")):
                        runs.append(_lookup(files, batches, MAKE[mode], rows, keys, mode, budget))
                        print(runs[-1], flush=True)
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    args.output.write_text(_report(runs, args.batches))
    return 0


def _report(runs: list[Run], batches: int) -> str:
    lines = ["# binlake land: finding a batch's keys in a large mirror's files", "",
             f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_git_revision()}, {_cpu_model()}, one thread.", "",
             f"{batches} batches of {BATCH_KEYS:,} keys spread over a mirror in files of {FILE_ROWS:,} rows written in "
             "key order (bench/run_key_lookup.py), after a warm-up batch; the files' keys kept in memory within "
             "the memory given (land.key_memory; the least recently used dropped), read from Parquet when not. "
             "`columns`: "
             "the key column as read, searched by bisection (binlake before); `index`: key_index.file_keys (runs of "
             "consecutive keys, else sorted numbers). `dense`: AUTO_INCREMENT keys, one in a thousand deleted; "
             "`sparse`: distinct random BIGINTs.", "",
             "| mirror rows | keys | mode | kept at most | batch p50 | batch max | keys kept in memory "
             "| files read a batch |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r.rows:,} | {r.keys} | {r.mode} | {r.budget >> 20:,} MiB | {r.p50 * 1000:,.1f} ms | "
                     f"{r.max * 1000:,.1f} ms | "
                     f"{r.kept_bytes / 2**20:,.1f} MiB | {r.files_read:,.0f} |")
    lines.append("")
    for rows in sorted({r.rows for r in runs}):
        for keys, budget in sorted({(r.keys, r.budget) for r in runs if r.rows == rows}):
            pair = {r.mode: r for r in runs if (r.rows, r.keys, r.budget) == (rows, keys, budget)}
            if len(pair) == 2:
                faster = pair["columns"].p50 / pair["index"].p50
                lines.append(f"- {rows:,} rows, {keys} keys, {budget >> 20:,} MiB: index {faster:.1f}x faster than "
                             f"columns (p50), keys kept {pair['columns'].kept_bytes / 2**20:,.0f} MiB -> "
                             f"{pair['index'].kept_bytes / 2**20:,.1f} MiB.")
    return "\n".join(lines) + "\n"


MAKE: dict[str, Callable[[pa.Table], Any]] = {"columns": _Columns, "index": file_keys}


if __name__ == "__main__":
    raise SystemExit(main())
