"""``binlake dump``: the offline binlog reader (mysqlbinlog-like text or the JSONL contract)."""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from ..codec import BinlogDecoder, BinlogError, charset_notices
from ..codec.events import TransactionPayloadEvent
from ..dump import native
from ..dump.jsonl import event_json
from ..dump.native import render_jsonl
from ..sources.binlog_file import binlog_frames, frames_in, open_binlog, prime_segment, skip_to, transaction_starts

# Below this size, starting workers costs more than it saves. The native JSONL emitter is several
# times faster than the Python decoder, so pool start-up and spooling weigh more: it splits from 64 MiB.
_PARALLEL_MIN_FILE = 8 << 20
_NATIVE_SPEEDUP = 8
_SEGMENT = 256 << 10


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump", help="decode binlog files to text or JSON lines",
                       description="Decode binlog or relay-log files offline.")
    p.add_argument("files", nargs="*", metavar="FILE")
    p.add_argument("--source", metavar="URL",
                   help="read from a server's replication stream instead: mysql://USER[:PASSWORD]@HOST:PORT "
                        "(or BINLAKE_SOURCE)")
    p.add_argument("--start-file", metavar="NAME", help="with --source: binlog file to start at (default: oldest)")
    p.add_argument("--server-id", type=int, default=54321, help="with --source: our replica server_id")
    p.add_argument("--exit-at-end", action="store_true",
                   help="with --source: stop once caught up (non-blocking dump) instead of waiting for more")
    p.add_argument("--format", choices=("text", "jsonl"), default="text")
    p.add_argument("--hexdump", action="store_true", help="with --format text: add each event's bytes")
    p.add_argument("--start-position", type=int, metavar="N", help="skip events before byte N")
    p.add_argument("--stop-position", type=int, metavar="N", help="stop before the event at byte N")
    p.add_argument("--no-verify-checksum", action="store_true", help="do not check event CRC32s")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="decode large files in N processes, split at transaction boundaries "
                        "(default: one per CPU; output order is unchanged)")
    p.set_defaults(run=run)


def render(dec: BinlogDecoder, frames: Iterable[tuple[int, bytes]], hexdump: bool = False) -> Iterator[bytes]:
    """The text lines of each event of ``frames`` (payload inner events expanded)."""
    from ..dump.text import event_text  # imported on use: keeps `dump --format jsonl` quick to start

    decode = dec.decode
    for pos, raw in frames:
        outer = decode(raw, pos)
        for ev in dec.expand(outer) if type(outer) is TransactionPayloadEvent else (outer,):
            yield event_text(dec, ev, None if ev.in_payload else raw, hexdump).encode("utf-8", "surrogateescape")


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
    threshold = _PARALLEL_MIN_FILE * (_NATIVE_SPEEDUP if fmt == "jsonl" and native.native else 1)
    if jobs > 1 and start is None and stop is None and os.path.getsize(path) >= threshold:
        _dump_parallel(path, out, fmt, hexdump, verify, jobs)
        return
    dec = BinlogDecoder(path, verify_checksums=verify)
    if fmt != "jsonl":
        _write(render(dec, binlog_frames(path, dec, start_position=start, stop_position=stop), hexdump), out)
        return
    with open_binlog(path, dec) as buf:
        pos = 4 if start is None else skip_to(buf, dec, path, start, stop)
        _write(render_jsonl(dec, buf, pos, stop, path), out)


_worker_decoders: dict[tuple[str, bool], BinlogDecoder] = {}


def _render_segment(args: tuple[str, int, int | None, str, bool, bool, str]) -> tuple[BinlogError | None, list]:
    """Worker: write one segment's output to a spool file; return the error that ended it early and the
    codec's notices (tables of unknown charsets), which the parent says once.

    A worker keeps one decoder per file, so table maps and their compiled row decoders are
    reused across the segments it is given."""
    path, start, stop, fmt, hexdump, verify, spool = args
    dec = _worker_decoders.get((path, verify))
    if dec is None:
        dec = _worker_decoders[(path, verify)] = BinlogDecoder(path, verify_checksums=verify)
    notices = charset_notices.notices = []
    with open(spool, "wb") as out:
        try:
            with open_binlog(path, dec) as buf:
                prime_segment(buf, dec, path)
                if fmt == "jsonl":
                    _write(render_jsonl(dec, buf, start, stop, path), out)
                else:
                    _write(render(dec, frames_in(buf, start, stop, dec, path), hexdump), out)
        except BinlogError as exc:
            return exc, notices
    return None, notices


def _dump_parallel(path: str, out: BinaryIO, fmt: str, hexdump: bool, verify: bool, jobs: int) -> None:
    """Segments between GTID events decode in worker processes into spool files, copied out in
    file order. Boundaries are found while the workers run; at most 2 x jobs segments are in
    flight, so memory and spool space stay bounded whatever the file size."""
    import multiprocessing  # imported on use, like the rest of the parallel machinery
    import tempfile

    gap = max(_SEGMENT, os.path.getsize(path) // (jobs * 16))
    bounds = itertools.chain((4,), transaction_starts(path, gap), (None,))  # found while workers run
    with tempfile.TemporaryDirectory(prefix="binlake-dump-") as spool_dir, \
            multiprocessing.get_context("fork").Pool(jobs) as pool:
        pending: deque[tuple[Any, str]] = deque()
        for i, (start, stop) in enumerate(itertools.pairwise(bounds)):
            spool = os.path.join(spool_dir, f"{i}.out")
            pending.append((pool.apply_async(_render_segment, ((path, start, stop, fmt, hexdump, verify, spool),)),
                            spool))
            if len(pending) >= 2 * jobs:
                _emit(*pending.popleft(), out)
        while pending:
            _emit(*pending.popleft(), out)


def _emit(result: Any, spool: str, out: BinaryIO) -> None:
    import shutil

    error, notices = result.get()
    for notice in notices:
        charset_notices.say_unknown_charsets(*notice)
    with open(spool, "rb") as fh:
        shutil.copyfileobj(fh, out, 1 << 20)
    os.unlink(spool)
    if error is not None:
        raise error


def _dump_stream(args: argparse.Namespace, out: BinaryIO) -> None:
    from ..sources.replication import BinlogStream

    stream = BinlogStream(args.source, server_id=args.server_id, start_file=args.start_file,
                          start_position=args.start_position or 4, non_blocking=args.exit_at_end)
    dec = BinlogDecoder(str(stream.source))  # only for the text renderer's header lengths
    if args.format == "jsonl":
        for ev in stream.events():
            out.write(event_json(ev))
            if not args.exit_at_end:
                out.flush()
        return
    from ..dump.text import event_text

    for ev in stream.events():
        out.write(event_text(dec, ev, None, False).encode("utf-8", "surrogateescape"))
        if not args.exit_at_end:
            out.flush()


def run(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    args.source = args.source or os.environ.get("BINLAKE_SOURCE")
    if args.source:
        _dump_stream(args, out)
        out.flush()
        return 0
    if not args.files:
        raise SystemExit("binlake dump: give binlog FILEs or --source URL")
    jobs = args.jobs or os.cpu_count() or 1
    for path in args.files:
        dump_file(path, out, args.format, args.hexdump, args.start_position, args.stop_position,
                  not args.no_verify_checksum, jobs)
    out.flush()
    return 0
