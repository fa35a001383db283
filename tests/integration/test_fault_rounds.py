"""Fault rounds in the suite: one kill -9 per victim (daemon, landing job, Kafka, MariaDB) under a steady
workload; after each, mirrors == the server's SELECT and the change logs hold exactly the row changes
mariadb-binlog --verbose shows for each GTID (bench/faults.py; the long run is its --rounds 50)."""

from __future__ import annotations

import os
import random

import pytest

from bench.faults import VICTIMS, run_rounds

pytestmark = pytest.mark.integration


def test_one_kill_minus_nine_per_victim_loses_nothing_and_lands_nothing_twice(tmp_path, capsys) -> None:
    # A new seed each run explores other moments; BINLAKE_FAULTS_SEED replays a printed one.
    seed = int(os.environ.get("BINLAKE_FAULTS_SEED") or random.SystemRandom().randrange(1_000_000))
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        with capsys.disabled():
            print(line, flush=True)

    results = run_rounds(tmp_path, len(VICTIMS), seed, say=say)
    assert all(r.ok for r in results), "\n".join(lines)
    assert sorted(r.victim for r in results) == sorted(VICTIMS), lines
