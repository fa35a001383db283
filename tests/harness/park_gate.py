"""`binlake land` whose parked tables' rewrites (streaming_job/statements/parking.py) wait for a gate: a file the test
creates; and whose catch-ups can be held mid-way by another.

A rewrite of a few thousand rows takes milliseconds; a test that shows the batches landing the other tables while a
mirror is rewritten, and a job killed while the table is parked, holds the rewrite at its start until the gate's
file exists (``BINLAKE_TEST_PARK_GATE``: its path). A test that kills the job during a park's catch-up holds the
catch-up once its first part with rows has committed (the park recorded as catching up, its writes begun), until
the file ``BINLAKE_TEST_CATCH_UP_GATE`` names exists. Everything else is the job as it is:

    python -m tests.harness.park_gate land --kafka ... (the arguments of ``binlake land``)
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

GATE = "BINLAKE_TEST_PARK_GATE"
CATCH_UP_GATE = "BINLAKE_TEST_CATCH_UP_GATE"
log = logging.getLogger("binlake.land")


def _wait(gate: Path, what: str) -> None:
    log.info("park gate: the %s waits for %s", what, gate)
    while not gate.exists():
        time.sleep(0.1)


def gate_rewrites(gate: Path) -> None:
    """Every parked table's rewrite of this process waits until ``gate`` exists."""
    from streaming_job.land import sink

    rewrite = sink.Lander._rewrite

    def gated(self: Any, what: Any) -> None:
        _wait(gate, "rewrite")
        rewrite(self, what)

    sink.Lander._rewrite = gated  # type: ignore[method-assign]


def gate_catch_ups(gate: Path) -> None:
    """Every park's catch-up of this process waits, after its first part with rows committed, until ``gate``
    exists."""
    from streaming_job.land import sink

    records, land = sink.Lander._records, sink.Lander._land
    catching = threading.local()

    def scoped(self: Any, rows: Any, scope: Any) -> Any:
        catching.up = scope.park is not None
        try:
            return records(self, rows, scope)
        finally:
            catching.up = False

    def landed(self: Any, rows: Any, meta: list[Any], *args: Any, **kwargs: Any) -> Any:
        stats = land(self, rows, meta, *args, **kwargs)
        if getattr(catching, "up", False) and meta:
            _wait(gate, "catch-up")
        return stats

    sink.Lander._records = scoped  # type: ignore[method-assign]
    sink.Lander._land = landed  # type: ignore[method-assign]


if __name__ == "__main__":
    from ingester.cli.main import main

    if os.environ.get(GATE):
        gate_rewrites(Path(os.environ[GATE]))
    if os.environ.get(CATCH_UP_GATE):
        gate_catch_ups(Path(os.environ[CATCH_UP_GATE]))
    sys.exit(main(sys.argv[1:]))
