"""runtime/memory.release_unused: after a large batch the driver hands back what its allocators keep unused (Arrow's
pool and glibc's malloc arenas): the resident memory of a process that freed a batch's worth of Arrow buffers and
numpy arrays falls back near its start, where without it the allocators kept most of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = """
import json, sys
import numpy as np, pyarrow as pa

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20

start = rss()
buffers = [pa.array(np.arange(10_000_000)) for _ in range(8)]  # a batch's columns (Arrow's pool)
small = [np.random.rand(1000) for _ in range(100_000)]  # its many small arrays (malloc)
del buffers, small
freed = rss()
if sys.argv[1] == "release":
    from streaming_job.runtime.memory import release_unused
    release_unused()
print(json.dumps({"start": start, "freed": freed, "after": rss()}))
"""


def _run(how: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE, how], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=120)
    return json.loads(out.stdout)


def test_a_large_batchs_freed_memory_goes_back_to_the_system() -> None:
    kept, released = _run("keep"), _run("release")
    assert kept["after"] - kept["start"] > 400, kept  # freed, but kept by the allocators
    assert released["freed"] - released["start"] > 400, released
    assert released["after"] - released["start"] < 150, released  # handed back
