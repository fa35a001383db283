"""The land job's C column walker (ingester/codec/_columns.c, streaming_job/decode/arrow_rows.py) against the
Python columnar decoder and lake conversions, which stay the reference.

Differential, on data we did not pick the answers for: random tables of every column type with random
(and damaged) rows, where both must give the same lake values or fail alike; real-corpus and real-server
data are compared in test_columnar.py and the type zoo. A few values are also checked against
independently computed expectations (datetime arithmetic, Decimal), not against either path.
"""

from __future__ import annotations

import datetime
import struct
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.codec import land_alike
from ingester.codec import BinlogDecoder
from ingester.codec.events import RowsEvent
from ingester.sources.binlog_file import _check_header, frames_in
from streaming_job.decode import arrow_rows
from tests.harness.binlogs import MARIADB_FDE, binlog_event, format_description, synthetic_binlog


def test_the_walker_is_built() -> None:
    assert arrow_rows.native is not None, "ingester/codec/_columns.c is not built (pip install -e .)"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_synthetic_rows_of_every_column_type_land_alike(data) -> None:
    land_alike(synthetic_binlog(data))


def _table_map(types: bytes, metadata: bytes, optional: bytes = b"") -> bytes:
    n = len(types)
    return (b"\x2a\0\0\0\0\0\x01\0" + b"\x02db\0" + b"\x01t\0" + bytes([n]) + types + bytes([len(metadata)])
            + metadata + b"\xff" * ((n + 7) // 8) + optional)


def _binlog(types: bytes, metadata: bytes, rows: list[bytes], optional: bytes = b"") -> bytes:
    """A MariaDB binlog with one table and one WRITE_ROWS event of ``rows`` (each: null bitmap + values)."""
    fde = format_description(MARIADB_FDE)
    n = len(types)
    body = b"\x2a\0\0\0\0\0" + b"\x01\0" + bytes([n]) + b"\xff" * ((n + 7) // 8) + b"".join(rows)
    raw = bytearray(b"\xfebin" + fde)
    for code, payload in ((19, _table_map(types, metadata, optional)), (23, body)):
        raw += binlog_event(code, payload, len(raw), fde[-5] == 1)
    return bytes(raw)


def _walked(data: bytes) -> list[list[object]]:
    """The after images' lake values of the file's one rows event, which the walker decodes (not the
    Python path behind it; raw columns are the codec's); the Python path gives the same."""
    land_alike(data)
    dec = BinlogDecoder("t", columnar=arrow_rows.compile_arrow_rows)
    _check_header(data, dec, "t")
    events = [ev for pos, raw in frames_in(data, 4, None, dec, "t") for ev in dec.events(raw, pos)
              if isinstance(ev, RowsEvent)]
    assert len(events) == 1 and isinstance(events[0].rows, arrow_rows.ArrowImages)
    _, (slots, aligned) = events[0].rows.images()
    n, tm = len(events[0].rows), events[0].table_map
    # a raw column holds the codec's values, which decode.py makes an array as for the Python path
    return [(arrow_rows.LakeColumn(tm.columns[i], tm.is_mariadb).array(slots[i]) if w.raw
             else w.array([(n, slots[i])], n)).to_pylist() for i, w in enumerate(aligned) if w is not None]


def _datetime2(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: bytes = b"") -> bytes:
    packed = ((y * 13 + mo) << 5 | d) << 17 | h << 12 | mi << 6 | s
    return (packed + 0x8000000000).to_bytes(5, "big") + frac


def test_edge_values_match_independent_arithmetic() -> None:
    """DATETIME(6), DATE (a zero date is NULL), BIGINT UNSIGNED, DECIMAL(20,4) negative, BIT(64), TIME(3)
    negative: the walker's values equal values written down by hand from the binlog layouts."""
    types = bytes([18, 10, 8, 246, 16, 19])  # DATETIME2, DATE, LONGLONG, NEWDECIMAL, BIT, TIME2
    metadata = bytes([6, 20, 4, 0, 8, 3])
    unsigned = b"\x01\x01\x80"  # SIGNEDNESS: the first numeric column (the BIGINT) is unsigned
    # DECIMAL(20,4) 123456789.0001: 16 integer digits as 7 + 9 (4 + 4 bytes), 4 fraction digits (2 bytes),
    # sign bit set when positive; negative: every byte inverted
    positive = bytearray((0).to_bytes(4, "big") + (123456789).to_bytes(4, "big") + (1).to_bytes(2, "big"))
    positive[0] |= 0x80
    negative = bytes(b ^ 0xFF for b in positive)
    # TIME(3) -00:00:01.500: int part -2 (offset 0x800000), fraction 0x10000 - 5000 (hundreds of micros)
    time3 = (0x800000 - 2).to_bytes(3, "big") + (0x10000 - 5000).to_bytes(2, "big")
    row = (b"\0" + _datetime2(2024, 2, 29, 23, 59, 58, (123456).to_bytes(3, "big"))
           + (2024 << 9).to_bytes(3, "little") + (2**64 - 1).to_bytes(8, "little") + negative
           + (2**64 - 1).to_bytes(8, "big") + time3)
    values = _walked(_binlog(types, metadata, [row, b"\x3f"], unsigned))
    assert values == [
        [datetime.datetime(2024, 2, 29, 23, 59, 58, 123456), None],
        [None, None],  # 2024-00-00: a zero date
        [Decimal(2**64 - 1), None],
        [Decimal("-123456789.0001"), None],
        [-1, None],  # BIT(64) all ones: its 64 bits as a signed BIGINT
        [-1_500_000, None],  # TIME as signed microseconds
    ]


def test_strings_with_invalid_utf8_or_other_charsets_go_through_the_codec() -> None:
    """An invalid UTF-8 value makes Python decode that column (U+FFFD), valid ones pass as they are; a
    latin1 column passes ASCII and has Python decode the rest (cp1252, as the server's latin1)."""
    types = bytes([15, 15])
    metadata = struct.pack("<HH", 40, 40)
    charsets = b"\x03\x02" + bytes([45, 8])  # COLUMN_CHARSET: utf8mb4_general_ci, latin1_swedish_ci
    emoji = "é😀".encode()
    rows = [b"\0\x03abc\x02ok", b"\0\x02\xff\xfe\x02\xe9t", b"\0" + bytes([len(emoji)]) + emoji + b"\x01\x80"]
    values = _walked(_binlog(types, metadata, rows, charsets))
    assert values == [["abc", "\ufffd\ufffd", "é😀"], ["ok", "ét", "€"]]


def test_json_null_document_lands_as_text_null() -> None:
    """A JSON column holding the null document (the literal type 0x04, value 0x00; an empty value is read
    as the null literal) lands as the JSON text "null", SQL NULL as the lake's NULL; nulls inside a
    document stay in its text. The walker passes JSON to the codec: both paths give these values."""
    documents = [bytes.fromhex("04 00"), None, b"", bytes.fromhex("02 0100 0700 04 0000"),
                 bytes.fromhex("00 0100 0c00 0b00 0100 04 0000 61"), bytes.fromhex("0c 04 6e756c6c")]
    rows = [b"\x01" if doc is None else b"\0" + struct.pack("<I", len(doc)) + doc for doc in documents]
    values = _walked(_binlog(bytes([245]), bytes([4]), rows))
    assert values == [["null", None, "null", "[null]", '{"a":null}', '"null"']]
