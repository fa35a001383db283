"""``binlake dump``: the offline binlog reader (mysqlbinlog-like text or the JSONL contract)."""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO

from ..codec import BinlogDecoder
from ..dump.jsonl import event_json
from ..dump.text import event_text
from ..sources.binlog_file import binlog_frames


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump", help="decode binlog files to text or JSON lines",
                       description="Decode binlog or relay-log files offline.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--format", choices=("text", "jsonl"), default="text")
    p.add_argument("--hexdump", action="store_true", help="with --format text: add each event's bytes")
    p.add_argument("--start-position", type=int, metavar="N", help="skip events before byte N")
    p.add_argument("--stop-position", type=int, metavar="N", help="stop before the event at byte N")
    p.add_argument("--no-verify-checksum", action="store_true", help="do not check event CRC32s")
    p.set_defaults(run=run)


def dump_file(path: str, out: BinaryIO, fmt: str, hexdump: bool = False, start: int | None = None,
              stop: int | None = None, verify: bool = True) -> None:
    dec = BinlogDecoder(path, verify_checksums=verify)
    buffer: list[bytes] = []
    size = 0
    for pos, raw in binlog_frames(path, dec, start_position=start, stop_position=stop):
        for ev in dec.events(raw, pos):
            if fmt == "jsonl":
                line = event_json(ev)
            else:
                line = event_text(dec, ev, None if ev.in_payload else raw, hexdump).encode(
                    "utf-8", "surrogateescape")
            buffer.append(line)
            size += len(line)
        if size > 1 << 20:
            out.write(b"".join(buffer))
            buffer.clear()
            size = 0
    out.write(b"".join(buffer))


def run(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    for path in args.files:
        dump_file(path, out, args.format, args.hexdump, args.start_position, args.stop_position,
                  not args.no_verify_checksum)
    out.flush()
    return 0
