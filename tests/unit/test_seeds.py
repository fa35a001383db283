"""Test vectors from the seed documents (../shared/seeds): real hexdumps printed by real tools."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ingester.codec import BinlogDecoder
from ingester.codec import events as E
from ingester.dump.text import event_text, hexdump
from tests.corpus import CORPUS

SEEDS = CORPUS.parents[1] / "seeds"


def _seed(prefix: str) -> str:
    return next(SEEDS.glob(f"{prefix}_*.txt")).read_text()


def _mysqlbinlog_hexdump_block(text: str) -> list[str]:
    """The '# Position ...' block of the first event in a mysqlbinlog --hexdump listing."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Position"))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not re.match(r"^# [0-9a-f]{8} ", line):
            break
        block.append(line)
    return block


def _bytes_from_mysqlbinlog_hexdump(block: list[str]) -> bytes:
    out = bytearray()
    for line in block[1:]:
        hexpart = line[11:].split("|")[0]
        out += bytes.fromhex(hexpart.replace(" ", ""))
    return bytes(out)


def test_mysql_8_0_34_format_description_with_crc32() -> None:
    block = _mysqlbinlog_hexdump_block(_seed("003"))
    raw = _bytes_from_mysqlbinlog_hexdump(block)
    assert len(raw) == 122
    dec = BinlogDecoder("seed-003")
    ev = dec.decode(raw, 4)
    assert isinstance(ev, E.FormatDescriptionEvent)
    assert (ev.server_version, ev.binlog_version, ev.server_id) == ("8.0.34", 4, 593308)
    assert (ev.timestamp, ev.log_pos, ev.flags) == (1700546874, 126, 1)  # in-use flag set
    assert ev.checksum_algorithm == 1
    assert ev.header_length == 19
    assert int.from_bytes(raw[-4:], "little") == 0xCDE035A1
    # The CRC covers the event with the in-use flag cleared: flipping the flag must not matter.
    cleared = bytearray(raw)
    cleared[17] = 0
    assert BinlogDecoder().decode(bytes(cleared), 4).checksum_algorithm == 1
    # ... and any other bit must.
    damaged = bytearray(raw)
    damaged[30] ^= 1
    with pytest.raises(Exception, match="at byte 4: CRC32 mismatch"):
        BinlogDecoder("seed-003").decode(bytes(damaged), 4)
    # Our --hexdump layout is mysqlbinlog's, byte for byte.
    assert list(hexdump(raw, 4, 19)) == block
    assert "end_log_pos 126 CRC32 0xcde035a1" in event_text(dec, ev, raw, False)


def _bytes_from_hexdump_c(text: str, start: str) -> bytes:
    """Bytes of a `hexdump -C` listing flattened onto one line in the seed."""
    chunk = text[text.index(start):]
    out = bytearray()
    for m in re.finditer(r"([0-9a-f]{8}) ((?:[0-9a-f]{2} ){1,16}) ?\|", chunk):
        out += bytes.fromhex(m.group(2).replace(" ", ""))
        if len(m.group(2).split()) < 16:
            break
    return bytes(out)


def test_mysql_5_5_2_relay_log_format_description() -> None:
    raw = _bytes_from_hexdump_c(_seed("002"), "$ hexdump -v -s 4 -C relay-bin.000001")
    assert len(raw) == 0x67
    ev = BinlogDecoder("seed-002").decode(raw, 4)
    assert isinstance(ev, E.FormatDescriptionEvent)
    assert ev.server_version == "5.5.2-m2"
    assert ev.checksum_algorithm is None  # before 5.6.1: no checksum field
    assert ev.log_pos == 0x6B
    assert ev.post_header_lengths == [
        0x38, 0x0D, 0x00, 0x08, 0x00, 0x12, 0x00, 0x04, 0x04, 0x04, 0x04, 0x12, 0x00, 0x00,
        0x54, 0x00, 0x04, 0x1A, 0x08, 0x00, 0x00, 0x00, 0x08, 0x08, 0x08, 0x02, 0x00,
    ]


def test_v4_file_header_from_seed() -> None:
    raw = _bytes_from_hexdump_c(_seed("002"), "$ hexdump -C /tmp/binlog-test.log")
    assert raw[:4] == b"\xfebin"
    assert raw[4 + 4] == 0x0F  # the first event is a FORMAT_DESCRIPTION_EVENT
    assert b"mysql-proxy-0.7.0" in raw
    assert Path  # module used for SEEDS
