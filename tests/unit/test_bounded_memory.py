"""A compressed transaction far larger than memory we allow is decoded in constant memory."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib

import zstandard

from tests.corpus import CORPUS
from tests.harness.binlogs import packed_int

FDE_SOURCE = CORPUS / "rust-mysql-common" / "transaction_compression.000001"


def _query_event(text: bytes) -> bytes:
    post = struct.pack("<IIBHH", 1, 0, 0, 0, 0)
    body = post + b"\0" + text
    return struct.pack("<IBIIIH", 0, 2, 1, 19 + len(body), 0, 0) + body


def _with_crc(event: bytes) -> bytes:
    return event + zlib.crc32(event).to_bytes(4, "little")


def _payload_file(path, events: int, text_size: int) -> int:
    inner = _query_event(b"-- " + b"x" * text_size)
    total = len(inner) * events
    cctx = zstandard.ZstdCompressor(level=3)
    chunks = []
    comp = cctx.compressobj(size=total)
    for _ in range(events):
        chunks.append(comp.compress(inner))
    chunks.append(comp.flush())
    payload = b"".join(chunks)
    fields = b"".join(packed_int(k) + packed_int(len(packed_int(v))) + packed_int(v)
                      for k, v in ((1, len(payload)), (2, 0), (3, total))) + b"\0"
    fde = FDE_SOURCE.read_bytes()[4:126]
    body = fields + payload
    header = struct.pack("<IBIIIH", 0, 40, 1, 19 + len(body) + 4, 126 + 19 + len(body) + 4, 0)
    path.write_bytes(b"\xfebin" + fde + _with_crc(header + body))
    return total


def test_a_huge_compressed_transaction_streams_in_bounded_memory(tmp_path) -> None:
    path = tmp_path / "huge-payload.000001"
    total = _payload_file(path, events=400, text_size=1 << 20)  # 400 MiB of inner events
    assert path.stat().st_size < 2 << 20
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across execve, so a child forked from a
    # big pytest process would report the parent's size.
    script = f"""
from ingester.sources.binlog_file import read_binlog_file
n = 0
for ev in read_binlog_file({str(path)!r}):
    n += ev.in_payload
hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(n, hwm)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    inner, max_rss_kb = map(int, out.split())
    assert inner == 400
    assert total > 400 << 20
    assert max_rss_kb < 150 * 1024, f"peak RSS {max_rss_kb} KiB while streaming {total} bytes"
