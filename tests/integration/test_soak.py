"""The soak in short (bench/soak.py; the documented run is 30 minutes at 1,000 tx/s): 75 s at 200 tx/s
through MariaDB -> binlake run -> Kafka -> binlake land -> Delta Lake, sampled every 4 s. 200 tx/s rather
than 1,000 keeps the suite's 2 CPUs in bounds; the length is the suite's (memory over hours is the bench's)."""

from __future__ import annotations

import pytest

from bench.soak import judge, run_soak

pytestmark = pytest.mark.integration


def test_a_short_soak_keeps_memory_flat_lag_bounded_and_mirrors_equal(tmp_path, capsys) -> None:
    with capsys.disabled():
        rows, mirrors = run_soak(tmp_path / "soak", minutes=1.25, rate=200, every=4, out=tmp_path / "soak",
                                 say=lambda line: print(line, flush=True))
    assert not mirrors
    assert len(rows) >= 12
    assert min(r["daemon_tps"] for r in rows[len(rows) // 2 :]) > 0, "the daemon stopped publishing"
    # The landing job's lag is its last micro-batch's (commit-to-mirror at that batch's end).
    verdict = judge(rows, max_rss_growth=0.2, max_daemon_lag=10.0, max_land_lag=300.0)
    assert not verdict.problems, verdict.summary
    assert (tmp_path / "soak.svg").read_text().startswith("<svg")
