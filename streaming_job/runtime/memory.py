"""Memory the driver's allocators keep after a large micro-batch, handed back to the system.

A batch's Arrow buffers (pyarrow's default pool: mimalloc) and its numpy arrays and Python objects (glibc's
malloc, with an arena per thread of the driver's threads) are freed at its end, but both allocators keep freed
pages for their next allocations: the driver's resident memory then follows the largest batches so far and the
arenas' fragmentation, not what is live (bench/results/backlog.md: the driver's Python grew 1.3 -> 1.6 GiB over a
12,000,000-row backlog while Arrow's live memory at each batch's end stayed at 58-76 MiB). After a batch of at
least ``RELEASE_ROWS`` row changes the driver asks both to return what they keep unused: pyarrow's
``MemoryPool.release_unused`` and glibc's ``malloc_trim(0)`` (free pages of every arena, not only the heap's top).
Smaller batches skip it: a trickle's batch every second has little to give back."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

import pyarrow as pa

RELEASE_ROWS = 100_000


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, None where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_unused() -> None:
    """What pyarrow's default pool and glibc's malloc keep unused, returned to the system."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)
