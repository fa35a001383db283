"""A long read's progress (a snapshot, a verify run): rows done / estimated, rate and ETA."""

from __future__ import annotations

import logging
import sys
import time
from typing import IO

log = logging.getLogger("binlake.snapshot")


class Progress:
    """Rows done / estimated, rate and ETA: one updating line on a terminal, a log line now and then otherwise."""

    def __init__(self, estimate: int, done: int, stream: IO[str] | None = None, tty: bool | None = None,
                 what: str = "snapshot") -> None:
        self.what = what  # the line's first word
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.estimate = estimate
        self.start_rows = done
        self.started = self.last = time.monotonic()
        self.shown = False

    def line(self, rows: int, table: str, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.started, 1e-6)
        rate = (rows - self.start_rows) / elapsed
        estimate = max(self.estimate, rows)
        left = estimate - rows
        eta = f"{int(left / rate) // 60}:{int(left / rate) % 60:02d}" if rate > 0 else "?"
        pct = 100 * rows // estimate if estimate else 100
        return f"{self.what} {table}: {rows:,}/{estimate:,} rows ({pct}%), {rate:,.0f} rows/s, ETA {eta}"

    def update(self, rows: int, table: str) -> None:
        now = time.monotonic()
        if now - self.last < (0.2 if self.tty else 10.0):
            return
        self.last = now
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line(rows, table, now))
            self.stream.flush()
            self.shown = True
        else:
            log.info("%s", self.line(rows, table, now))

    def finish(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
