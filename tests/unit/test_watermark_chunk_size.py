"""ingester/daemon/resnapshot.ChunkSize: a re-snapshot's and verify's watermark chunks grow while they read fast,
shrink when slow, and start again for each table. Expected sizes written by hand."""

from __future__ import annotations

import pytest

from ingester.config import ConfigError, load_config
from ingester.daemon.resnapshot import ChunkSize


def test_chunks_double_while_fast_up_to_twenty_times_the_setting() -> None:
    size = ChunkSize(5000)
    seen = []
    for _ in range(8):
        rows = size.of("db.t")
        seen.append(rows)
        size.read(rows, 0.05)
    assert seen == [5000, 10_000, 20_000, 40_000, 80_000, 100_000, 100_000, 100_000]


def test_a_slow_chunk_halves_down_to_the_setting_and_a_middling_one_keeps_the_size() -> None:
    size = ChunkSize(1000)
    for _ in range(3):
        size.read(size.of("db.t"), 0.01)
    assert size.of("db.t") == 8000
    size.read(8000, 0.5)
    assert size.of("db.t") == 8000
    size.read(8000, 3.0)
    size.read(4000, 3.0)
    size.read(2000, 3.0)
    size.read(1000, 3.0)
    assert size.of("db.t") == 1000


def test_a_short_last_chunk_says_nothing_and_a_new_table_starts_again() -> None:
    size = ChunkSize(1000, growth=4)
    size.read(size.of("db.a"), 0.01)
    size.read(17, 0.001)  # the table's last rows
    assert size.of("db.a") == 2000
    assert size.of("db.b") == 1000


def test_a_growth_of_one_keeps_the_chunks_fixed_and_less_is_refused() -> None:
    size = ChunkSize(300, growth=1)
    size.read(size.of("db.t"), 0.001)
    assert size.of("db.t") == 300
    assert load_config(environ={"BINLAKE_SNAPSHOT_CHUNK_GROWTH": "3"}).snapshot_chunk_growth == 3
    with pytest.raises(ConfigError, match="snapshot_chunk_growth: must be at least 1, got 0"):
        load_config(environ={"BINLAKE_SNAPSHOT_CHUNK_GROWTH": "0"})
