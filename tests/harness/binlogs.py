"""Binlog files for tests: synthetic ones (random tables of every column type and random rows, drawn with
hypothesis), events written by hand, and the row changes mariadb-binlog --verbose reads in real ones."""

from __future__ import annotations

import collections
import re
import struct
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.corpus import CORPUS

MYSQL_FDE = CORPUS / "osheroff-mysql-binlog-connector-java" / "mysql-bin.checksum-crc32"
MARIADB_FDE = CORPUS / "mariadb-operator-mariadb-poc" / "domain_id_0" / "mariadb-repl-bin.000005"
COLLATIONS = [None, 33, 45, 255, 63, 8, 11, 28]  # utf8mb3, utf8mb4 (x2), binary, latin1, ascii, gbk


def format_description(path: Path) -> bytes:
    """The body of the FORMAT_DESCRIPTION event of a binlog file (its first event)."""
    raw = path.read_bytes()
    return raw[4 : 4 + int.from_bytes(raw[13:17], "little")]


def packed_int(n: int) -> bytes:
    """A length-encoded integer (net_field_length), as the binlog writes lengths and counts."""
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def _decimal(draw, precision: int, scale: int) -> bytes:
    """A packed DECIMAL (mostly valid, sometimes with a corrupt digit group)."""
    intg = precision - scale
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    groups = ([(dig2bytes[intg % 9], intg % 9)] if intg % 9 else []) + [(4, 9)] * (intg // 9)
    groups += [(4, 9)] * (scale // 9) + ([(dig2bytes[scale % 9], scale % 9)] if scale % 9 else [])
    out = bytearray()
    for size, digits in groups:
        limit = 10**digits if draw(st.integers(0, 20)) else 1 << (8 * size)
        out += draw(st.integers(0, limit - 1)).to_bytes(size, "big")
    out[0] |= 0x80
    if draw(st.booleans()):
        out = bytearray(b ^ 0xFF for b in out)
    return bytes(out)


def _text(draw, size: int) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=size))
    alphabet = st.characters(max_codepoint=0x7F) if kind == 1 else st.characters(exclude_categories=["Cs"])
    return draw(st.text(alphabet, max_size=size)).encode("utf-8")[:size]


@st.composite
def _column(draw) -> tuple[int, bytes, Callable[[Any], bytes]]:
    """(type code, table-map metadata, function drawing a value's bytes) of one random column."""
    fsp = draw(st.integers(0, 6))
    nfrac = (fsp + 1) // 2
    kind = draw(st.sampled_from(["int", "float", "double", "year", "decimal", "date", "datetime2", "timestamp2",
                                 "time2", "bit", "enum", "set", "varchar", "char", "blob", "geometry", "json", "old"]))
    if kind == "old":  # pre-5.6 TIMESTAMP, DATETIME, TIME; NEWDATE; the NULL type (no bytes)
        code, size = draw(st.sampled_from([(7, 4), (12, 8), (11, 3), (14, 3), (6, 0)]))
        return code, b"", _binary(size)
    if kind == "int":
        code, size = draw(st.sampled_from([(1, 1), (2, 2), (9, 3), (3, 4), (8, 8)]))
        return code, b"", _binary(size)
    if kind == "float":
        return 4, b"\x04", _drawing(st.one_of(st.binary(min_size=4, max_size=4),
                                              st.floats(width=32).map(lambda f: struct.pack("<f", f))))
    if kind == "double":
        return 5, b"\x08", _drawing(st.one_of(
            st.binary(min_size=8, max_size=8), st.floats().map(lambda f: struct.pack("<d", f)),
            st.integers(-30, 30).map(lambda e: struct.pack("<d", 1.5 * 10.0**e))))
    if kind == "year":
        return 13, b"", _binary(1)
    if kind == "decimal":
        precision = draw(st.integers(1, 65))
        scale = draw(st.integers(0, min(30, precision)))
        return 246, bytes([precision, scale]), lambda d: _decimal(d, precision, scale)
    if kind == "date":
        return 10, b"", _binary(3)
    if kind in ("datetime2", "timestamp2", "time2"):
        code, size = {"datetime2": (18, 5), "timestamp2": (17, 4), "time2": (19, 3)}[kind]
        return code, bytes([fsp]), _binary(size + nfrac)
    if kind == "bit":
        bits = draw(st.integers(1, 64))
        return 16, bytes([bits % 8, bits // 8]), _binary((bits + 7) // 8)
    if kind in ("enum", "set"):
        size = draw(st.integers(1, 2)) if kind == "enum" else draw(st.integers(1, 8))
        return 254, bytes([247 if kind == "enum" else 248, size]), _binary(size)
    if kind in ("varchar", "char"):
        max_len = draw(st.sampled_from([10, 255, 300])) if kind == "varchar" else draw(st.integers(1, 255))
        prefix = 1 if max_len < 256 else 2
        meta = max_len.to_bytes(2, "little") if kind == "varchar" else bytes([254, max_len])
        return (15 if kind == "varchar" else 254), meta, _prefixed(prefix, max_len)
    if kind in ("blob", "geometry"):
        prefix = draw(st.integers(1, 4)) if kind == "blob" else 4
        return (252 if kind == "blob" else 255), bytes([prefix]), _prefixed(prefix, 60)
    # JSON (Python renders it): the literals null and true, an empty value (read as null), [null]
    return 245, b"\x04", _drawing(st.sampled_from([b"\x02\0\0\0\x04\x00", b"\x02\0\0\0\x04\x01", b"\0\0\0\0",
                                                   b"\x07\0\0\0\x02\x01\x00\x07\x00\x04\x00\x00"]))


def _drawing(strategy: st.SearchStrategy[bytes]) -> Callable[[Any], bytes]:
    return lambda draw: draw(strategy)


def _binary(size: int) -> Callable[[Any], bytes]:
    return _drawing(st.binary(min_size=size, max_size=size))


def _prefixed(prefix: int, max_len: int) -> Callable[[Any], bytes]:
    def value(draw: Any) -> bytes:
        text = _text(draw, max_len)
        return len(text).to_bytes(prefix, "little") + text

    return value


def binlog_event(code: int, body: bytes, pos: int, crc: bool) -> bytes:
    """An event of type ``code`` at ``pos`` of a file: header, ``body`` and, with ``crc``, its CRC32."""
    size = 19 + len(body) + (4 if crc else 0)
    raw = struct.pack("<IBIIIH", 1_700_000_000, code, 7, size, pos + size, 0) + body
    return raw + zlib.crc32(raw).to_bytes(4, "little") if crc else raw


def synthetic_binlog(data: Any, keys: bool = False) -> bytes:
    """A binlog file of random tables (every column type, random metadata) and rows (random values, NULLs,
    column bitmaps; sometimes a damaged byte), drawn with hypothesis's ``st.data()``. With ``keys``, the table
    map may also have a primary key, column visibility and geometry types (what Debezium's encoder reads)."""
    mariadb = data.draw(st.booleans())
    fde = format_description(MARIADB_FDE if mariadb else MYSQL_FDE)
    crc = fde[-5] == 1
    cols = data.draw(st.lists(_column(), min_size=1, max_size=8))
    n = len(cols)
    optional = b""
    if data.draw(st.booleans()):
        names = [data.draw(st.sampled_from([f"c{i}", "a\"b\\", "é\n", "c0"])) for i in range(n)]
        optional += b"\x04" + packed_int(len(b"".join(packed_int(len(x.encode())) + x.encode() for x in names)))
        optional += b"".join(packed_int(len(x.encode())) + x.encode() for x in names)
    numeric = [c for c in cols if c[0] in (1, 2, 3, 4, 5, 8, 9, 246)]
    if numeric and data.draw(st.booleans()):
        flags = data.draw(st.integers(0, (1 << len(numeric)) - 1)).to_bytes(8, "big")[-((len(numeric) + 7) // 8):]
        optional += b"\x01" + packed_int(len(flags)) + flags
    character = [c for c in cols if c[0] in (15, 252) or (c[0] == 254 and c[1][0] == 254)]
    if character and data.draw(st.booleans()):
        ids = b"".join(packed_int(data.draw(st.sampled_from([c for c in COLLATIONS if c]))) for _ in character)
        optional += b"\x03" + packed_int(len(ids)) + ids
    enums = [c for c in cols if c[0] == 254 and c[1][0] == 247]
    sets = [c for c in cols if c[0] == 254 and c[1][0] == 248]
    for kind, group in ((6, enums), (5, sets)):
        if group and data.draw(st.booleans()):
            one = packed_int(3) + b"".join(packed_int(len(x)) + x for x in (b"x", "ü".encode(), b'q"'))
            labels = one * len(group)
            optional += bytes([kind]) + packed_int(len(labels)) + labels
    if keys and data.draw(st.booleans()):  # SIMPLE_PRIMARY_KEY (a column twice, now and then), GEOMETRY_TYPE
        key = b"".join(packed_int(i) for i in data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3)))
        optional += b"\x08" + packed_int(len(key)) + key
        geometries = sum(1 for c in cols if c[0] == 255)
        if geometries:
            kinds = b"".join(packed_int(data.draw(st.sampled_from([0, 1, 2]))) for _ in range(geometries))
            optional += b"\x07" + packed_int(len(kinds)) + kinds
    if keys and data.draw(st.integers(0, 4)) == 0:  # COLUMN_VISIBILITY: a bit per column, most significant first
        visible = data.draw(st.integers(0, (1 << n) - 1)).to_bytes((n + 7) // 8, "big")
        optional += b"\x0c" + packed_int(len(visible)) + visible
    metadata = b"".join(c[1] for c in cols)
    table_map = (b"\x2a\0\0\0\0\0\x01\0" + b"\x02db\0" + b"\x05t\"\xc3\xa9x\0" + packed_int(n)
                 + bytes(c[0] for c in cols) + packed_int(len(metadata)) + metadata + b"\xff" * ((n + 7) // 8)
                 + optional)
    events = [(160, _text(data.draw, 40))] if mariadb else []  # ANNOTATE_ROWS: the statement
    events.append((19, table_map))
    v2 = not mariadb
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["write", "update", "delete"]))
        code = {"write": 23, "update": 24, "delete": 25}[kind] + (7 if v2 else 0)
        images = 2 if kind == "update" else 1
        bitmaps = [data.draw(st.integers(0, (1 << n) - 1)) | (data.draw(st.integers(0, 1)) and (1 << n) - 1)
                   for _ in range(images)]
        body = b"\x2a\0\0\0\0\0" + b"\x01\0" + (b"\x02\0" if v2 else b"") + packed_int(n)
        body += b"".join(b.to_bytes((n + 7) // 8, "little") for b in bitmaps)
        for _ in range(data.draw(st.integers(0, 4))):
            for bitmap in bitmaps:
                present = [c for i, c in enumerate(cols) if bitmap >> i & 1]
                nulls = data.draw(st.integers(0, (1 << len(present)) - 1)) if data.draw(st.booleans()) else 0
                body += nulls.to_bytes((len(present) + 7) // 8, "little")
                body += b"".join(c[2](data.draw) for k, c in enumerate(present) if not nulls >> k & 1)
        if data.draw(st.integers(0, 9)) == 0 and len(body) > 12:  # damage
            i = data.draw(st.integers(12, len(body) - 1))
            body = body[:i] + bytes([data.draw(st.integers(0, 255))]) + body[i + 1 :]
        events += [(code, body), (16, b"\x05" + bytes(7))]
    raw = bytearray(b"\xfebin" + fde)
    for code, body in events:
        raw += binlog_event(code, body, len(raw), crc)
    return bytes(raw)


def table_binlog(body_of_rows: bytes, code: int = 30, mariadb: bool = False, nullable: bytes = b"\x02") -> bytes:
    """A binlog of db.t (id INT NOT NULL primary key, name VARCHAR(20) utf8mb4; ``nullable`` the table map's
    NULL bitmap) and one rows event."""
    fde = format_description(MARIADB_FDE if mariadb else MYSQL_FDE)
    crc = fde[-5] == 1
    table_map = name_table_map(0x2A, b"t", nullable)
    bitmaps = b"\x03" * (2 if code in (24, 31) else 1)
    rows = b"\x2a\0\0\0\0\0\x01\0" + (b"\x02\0" if code >= 30 else b"") + b"\x02" + bitmaps
    raw = bytearray(b"\xfebin" + fde)
    for c, body in ((19, table_map), (code, rows + body_of_rows), (16, bytes(8))):
        raw += binlog_event(c, body, len(raw), crc)
    return bytes(raw)


def name_table_map(table_id: int, table: bytes, nullable: bytes = b"\x02") -> bytes:
    """The TABLE_MAP body of db.<table> (id INT NOT NULL primary key, name VARCHAR(20) utf8mb4; ``nullable`` its
    NULL bitmap), table_binlog's table."""
    optional = b"\x04\x08\x02id\x04name" + b"\x03\x01\x2d" + b"\x08\x01\x00"
    return (table_id.to_bytes(6, "little") + b"\x01\0" + b"\x02db\0" + bytes([len(table)]) + table + b"\0"
            + b"\x02\x03\x0f" + b"\x02" + (80).to_bytes(2, "little") + nullable + optional)


def two_table_binlog(tmp_path: Path, events: int) -> Path:
    """mysql-bin.000001 in ``tmp_path``, tables db.t and db.u of name_table_map. One transaction: a row of db.u,
    ``events`` rows events of 20 rows of db.t (one more row of u halfway), then a small transaction of a row each:
    ids from 0, names ``row <id>``."""
    fde = format_description(MYSQL_FDE)
    crc = fde[-5] == 1

    def rows(table_id: int, first: int, count: int) -> bytes:
        return (table_id.to_bytes(6, "little") + b"\x01\0\x02\0\x02\x03"
                + b"".join(name_row(i, b"row %d" % i) for i in range(first, first + count)))

    maps = [(19, name_table_map(42, b"t")), (19, name_table_map(43, b"u"))]
    body: list[tuple[int, bytes]] = [*maps, (30, rows(43, 0, 1))]
    for n in range(events):
        body.append((30, rows(42, n * 20, 20)))
        if n == events // 2:
            body.append((30, rows(43, 1, 1)))
    body += [(16, bytes(8)), *maps, (30, rows(43, 2, 1)), (30, rows(42, events * 20, 1)), (16, bytes(8))]
    raw = bytearray(b"\xfebin" + fde)
    for code, payload in body:
        raw += binlog_event(code, payload, len(raw), crc)
    path = tmp_path / "mysql-bin.000001"
    path.write_bytes(bytes(raw))
    return path


def name_row(i: int, name: bytes | None) -> bytes:
    """A row of table_binlog's table (a NULL name when None)."""
    return (b"\x02" + struct.pack("<i", i) if name is None else
            b"\x00" + struct.pack("<i", i) + bytes([len(name)]) + name)


def verbose_counts(files, db: str) -> collections.Counter:
    """Row changes of database ``db`` in the files, as mariadb-binlog --verbose prints them: (verb, table) ->
    rows (verb: insert, update or delete)."""
    counts: collections.Counter = collections.Counter()
    for f in files:
        text = subprocess.run(["mariadb-binlog", "--verbose", str(f)], capture_output=True, check=True).stdout
        for m in re.finditer(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `([^`]+)`\.`([^`]+)`", text, re.M):
            if m.group(2).decode() == db:
                counts[(m.group(1).decode().split()[0].lower(), m.group(3).decode())] += 1
    return counts


def query_body(database: bytes, text: bytes, status: bytes = b"") -> bytes:
    """A QUERY event's body: thread 1, no error, ``status`` variables, the default database and the statement."""
    return struct.pack("<IIBHH", 1, 0, len(database), 0, len(status)) + status + database + b"\0" + text


def statement_binlog(path: Path, steps: list[tuple[str, Any]]) -> Path:
    """A MySQL binlog at ``path`` of tables db.<name> (name_table_map's columns) and statements: each step is
    ("rows", (table, [ids])) -- a TABLE_MAP, a WRITE_ROWS of those ids (names ``row <id>``) and an XID -- or
    ("query", (database, text)): a statement (DDL is a transaction of its own)."""
    fde = format_description(MYSQL_FDE)
    crc = fde[-5] == 1
    raw = bytearray(b"\xfebin" + fde)
    ids: dict[bytes, int] = {}
    for kind, arg in steps:
        if kind == "rows":
            table, rows = arg
            table_id = ids.setdefault(table, 40 + len(ids))
            body = (table_id.to_bytes(6, "little") + b"\x01\0\x02\0\x02\x03"
                    + b"".join(name_row(i, b"row %d" % i) for i in rows))
            events = [(19, name_table_map(table_id, table)), (30, body), (16, bytes(8))]
        else:
            database, text = arg
            events = [(2, query_body(database, text))]
        for code, body in events:
            raw += binlog_event(code, body, len(raw), crc)
    path.write_bytes(bytes(raw))
    return path
