"""The codec fuzz harness (fuzz/codec.py): its seeds and past findings replay clean, and a short
coverage-guided run finds nothing (the long run is a documented command, fuzz/README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fuzz.codec import one_input, seeds

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = sorted((ROOT / "fuzz" / "regressions").iterdir())


def test_regressions_end_in_output_or_binlog_error() -> None:
    assert REGRESSIONS, "fuzz/regressions holds the inputs past runs found"
    for path in REGRESSIONS:
        one_input(path.read_bytes())


def test_seeds_decode_as_the_corpus_does() -> None:
    """Every seed window is valid: the harness runs it without an error of any kind but BinlogError."""
    count = 0
    for seed in seeds():
        one_input(seed)
        count += 1
    assert count > 1000


# Linux keeps a process's peak RSS across fork and exec: a fuzzer started by this (test session's, often
# large) process would see the session's peak as its own and stop on -rss_limit_mb at once. Started by a
# small launcher process instead, it counts its own memory only.
_LAUNCHER = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"]


def test_short_coverage_guided_run(tmp_path: Path) -> None:
    """A few seconds of atheris (libFuzzer) from the past findings: a finding exits non-zero."""
    (tmp_path / "corpus").mkdir()
    run = subprocess.run(
        [*_LAUNCHER, sys.executable, "-m", "fuzz.codec", "-max_total_time=8", "-timeout=10", "-rss_limit_mb=1024",
         f"-artifact_prefix={tmp_path}/", str(tmp_path / "corpus"), str(ROOT / "fuzz" / "regressions")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Done" in run.stderr and "cov:" in run.stderr
