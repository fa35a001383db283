"""`binlake land` whose parked tables' rewrites (streaming_job/parking.py) wait for a gate: a file the test creates.

A rewrite of a few thousand rows takes milliseconds; a test that shows the batches landing the other tables while a
mirror is rewritten, and a job killed while the table is parked, holds the rewrite at its start until the gate's
file exists (``BINLAKE_TEST_PARK_GATE``: its path). Everything else is the job as it is:

    python -m tests.harness.park_gate land --kafka ... (the arguments of ``binlake land``)
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

GATE = "BINLAKE_TEST_PARK_GATE"


def gate_rewrites(gate: Path) -> None:
    """Every parked table's rewrite of this process waits until ``gate`` exists."""
    from streaming_job import sink

    rewrite = sink.Lander._rewrite

    def gated(self: Any, what: Any) -> None:
        logging.getLogger("binlake.land").info("park gate: the rewrite waits for %s", gate)
        while not gate.exists():
            time.sleep(0.1)
        rewrite(self, what)

    sink.Lander._rewrite = gated  # type: ignore[method-assign]


if __name__ == "__main__":
    from ingester.cli.main import main

    gate_rewrites(Path(os.environ[GATE]))
    sys.exit(main(sys.argv[1:]))
