"""``binlake dump``: the offline binlog reader (mysqlbinlog-like text or the JSONL contract)."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from ..codec import BinlogDecoder, BinlogError
from ..codec.events import TransactionPayloadEvent
from ..dump.jsonl import event_json
from ..dump.text import event_text
from ..sources.binlog_file import binlog_frames, segment_frames, transaction_starts

_PARALLEL_MIN_FILE = 8 << 20  # below this, starting workers costs more than it saves
_SEGMENT = 2 << 20


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump", help="decode binlog files to text or JSON lines",
                       description="Decode binlog or relay-log files offline.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--format", choices=("text", "jsonl"), default="text")
    p.add_argument("--hexdump", action="store_true", help="with --format text: add each event's bytes")
    p.add_argument("--start-position", type=int, metavar="N", help="skip events before byte N")
    p.add_argument("--stop-position", type=int, metavar="N", help="stop before the event at byte N")
    p.add_argument("--no-verify-checksum", action="store_true", help="do not check event CRC32s")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="decode large files in N processes, split at transaction boundaries "
                        "(default: one per CPU; output order is unchanged)")
    p.set_defaults(run=run)


def render(dec: BinlogDecoder, frames: Iterable[tuple[int, bytes]], fmt: str,
           hexdump: bool = False) -> Iterator[bytes]:
    """The output lines of each event of ``frames`` (payload inner events expanded)."""
    jsonl = fmt == "jsonl"
    for pos, raw in frames:
        ev = dec.decode(raw, pos)
        evs = dec.expand(ev) if type(ev) is TransactionPayloadEvent else (ev,)
        for ev in evs:
            if jsonl:
                yield event_json(ev)
            else:
                yield event_text(dec, ev, None if ev.in_payload else raw, hexdump).encode(
                    "utf-8", "surrogateescape")


def _write(lines: Iterable[bytes], out: BinaryIO) -> None:
    buffer: list[bytes] = []
    size = 0
    try:
        for line in lines:
            buffer.append(line)
            size += len(line)
            if size > 1 << 20:
                out.write(b"".join(buffer))
                buffer.clear()
                size = 0
    finally:  # on a decoding error, everything decoded before it is still written
        out.write(b"".join(buffer))


def dump_file(path: str, out: BinaryIO, fmt: str, hexdump: bool = False, start: int | None = None,
              stop: int | None = None, verify: bool = True, jobs: int = 1) -> None:
    if jobs > 1 and start is None and stop is None and os.path.getsize(path) >= _PARALLEL_MIN_FILE:
        starts = transaction_starts(path, _SEGMENT)
        if starts:
            _dump_parallel(path, starts, out, fmt, hexdump, verify, jobs)
            return
    dec = BinlogDecoder(path, verify_checksums=verify)
    _write(render(dec, binlog_frames(path, dec, start_position=start, stop_position=stop), fmt, hexdump), out)


def _render_segment(args: tuple[str, int, int | None, str, bool, bool]) -> tuple[bytes, BinlogError | None]:
    """Worker: one segment's output, and the error that ended it early (if any)."""
    path, start, stop, fmt, hexdump, verify = args
    dec = BinlogDecoder(path, verify_checksums=verify)
    lines: list[bytes] = []
    try:
        lines.extend(render(dec, segment_frames(path, dec, start, stop), fmt, hexdump))
    except BinlogError as exc:
        return b"".join(lines), exc
    return b"".join(lines), None


def _dump_parallel(path: str, starts: list[int], out: BinaryIO, fmt: str, hexdump: bool, verify: bool,
                   jobs: int) -> None:
    """Segments decode in worker processes; results are written in file order, with at most
    2 x jobs segments in flight so memory stays bounded whatever the file size."""
    dec = BinlogDecoder(path, verify_checksums=verify)
    _write(render(dec, binlog_frames(path, dec, stop_position=starts[0]), fmt, hexdump), out)
    bounds = [*starts, None]
    tasks = ((path, bounds[i], bounds[i + 1], fmt, hexdump, verify) for i in range(len(starts)))
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        pending: deque = deque()
        for task in tasks:
            pending.append(pool.apply_async(_render_segment, (task,)))
            if len(pending) >= 2 * jobs:
                _emit(pending.popleft().get(), out)
        while pending:
            _emit(pending.popleft().get(), out)


def _emit(result: tuple[bytes, BinlogError | None], out: BinaryIO) -> None:
    data, error = result
    out.write(data)
    if error is not None:
        raise error


def run(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    jobs = args.jobs or os.cpu_count() or 1
    for path in args.files:
        dump_file(path, out, args.format, args.hexdump, args.start_position, args.stop_position,
                  not args.no_verify_checksum, jobs)
    out.flush()
    return 0
