"""`binlake land` that ends itself with SIGKILL at a chosen point of its work: a crash exactly there, where a kill
from outside lands at a random moment. Run as a process: ``python -m tests.harness.killed_land POINT <land args>``.

Points:
- ``iceberg-compaction``: an Iceberg table's compaction (iceberg/compaction.py) has written its data files, its
  merged delete files, its manifests and its manifest list, and added its snapshot to the transaction, but the
  table's new metadata is not written (the catalog's commit is next)."""

from __future__ import annotations

import os
import signal
import sys


def _iceberg_compaction() -> None:
    from streaming_job.iceberg import replace

    written = replace.ReplaceFiles.commit

    def commit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        written(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    replace.ReplaceFiles.commit = commit  # type: ignore[method-assign]


POINTS = {"iceberg-compaction": _iceberg_compaction}


def main(argv: list[str]) -> int:
    POINTS[argv[0]]()
    from ingester.cli.main import main as binlake

    return binlake(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
