"""The v4 event header, read in one place for the Python code (the decoder, the record builder, the
replication stream, the column masks, the daemon): 19 bytes of timestamp u32, type u8, server_id u32,
event_size u32, log_pos u32, flags u16, little-endian. The C modules read it with _bytes.h's readers at
the same offsets (EV_* there)."""

from __future__ import annotations

import struct

HEADER = struct.Struct("<IBIIIH")  # the whole header: timestamp, type, server_id, size, log_pos, flags
TIMESTAMP, TYPE, SERVER_ID, SIZE, LOG_POS, FLAGS = 0, 4, 5, 9, 13, 17  # byte offsets
_U32 = struct.Struct("<I").unpack_from
_SIZE_AND_LOG_POS = struct.Struct("<II").unpack_from


def timestamp(raw: bytes) -> int:
    """Seconds since the epoch when the statement began on the server."""
    return int(_U32(raw, TIMESTAMP)[0])


def server_id(raw: bytes) -> int:
    return int(_U32(raw, SERVER_ID)[0])


def log_pos(raw: bytes) -> int:
    """The position after the event in its binlog file (0 in some relay logs and in payloads)."""
    return int(_U32(raw, LOG_POS)[0])


def size_and_log_pos(raw: bytes) -> tuple[int, int]:
    size, end = _SIZE_AND_LOG_POS(raw, SIZE)
    return int(size), int(end)
