"""The native Debezium renderer (records/debezium/_native.c) against the Python reference path: the same Kafka
messages (topic, key, value, in order) and the same errors, the extension on and off (as BINLAKE_PURE_PYTHON=1
switches it off).

Whole messages from every corpus binlog in every value-handling mode and converter option, and from random
synthetic tables; each column type's edge values struct by struct (C's Value and Key structs == orjson's of the
Python converters' values), where C must render them itself; and malformed rows, which C leaves to Python's
errors."""

from __future__ import annotations

import importlib
import itertools
import os
import random
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingester.codec.constants import ColumnType as T
from ingester.codec.rows import compile_rows
from ingester.codec.table_map import Column, TableMap
from ingester.extensions import load as load_extension
from ingester.records.builder import Record
from ingester.records.debezium import native as native_module
from ingester.records.debezium.columns import Modes
from ingester.records.debezium.encoder import DebeziumJson, DebeziumOptions
from ingester.records.debezium.envelope import table_codec
from ingester.records.debezium.native import rows_plan
from tests.corpus import CORPUS
from tests.harness.binlogs import name_row, table_binlog
from tests.harness.records import (
    ALL_MODES,
    CORPUS_FILES,
    binlog_records,
    build_records,
    encoded,
    snapshot_record,
    synthetic_records,
    ticking_clock,
)

# Imported directly, so the comparisons run even under BINLAKE_PURE_PYTHON (and fail if it is not built).
NATIVE = importlib.import_module("ingester.records.debezium._native")
_SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]

class _Counting:
    """The extension, counting the rows events it renders."""

    def __init__(self) -> None:
        self.rendered = self.walked = self.composed = 0
        self.RowsPlan = NATIVE.RowsPlan

    def render(self, *args: Any) -> Any:
        rows = NATIVE.render(*args)
        self.rendered += rows is not None
        return rows

    def walk(self, *args: Any) -> Any:
        got = NATIVE.walk(*args)
        if type(got) is list:
            self.rendered += len(got)
            self.walked += len(got)
        return got

    def envelopes(self, *args: Any) -> Any:
        self.composed += len(args[0])
        return NATIVE.envelopes(*args)


def _encode(records: list[Any], options: DebeziumOptions, monkeypatch: pytest.MonkeyPatch,
            extension: Any) -> tuple[list[Any], str | None]:
    """The messages of the records through one encoder (one Kafka transaction), and its error if any."""
    with monkeypatch.context() as m:
        m.setattr(native_module, "native", extension)
        return encoded(DebeziumJson(options, lambda n: f"mysql-bin.{n:06d}", 900_000, clock=ticking_clock()),
                       records)


def _same(records: list[Any], options: DebeziumOptions, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str | None]:
    """Both paths' messages are equal; returns how many rows events C rendered, and the error."""
    counting = _Counting()
    ours = _encode(records, options, monkeypatch, counting)
    reference = _encode(records, options, monkeypatch, None)
    assert ours[1] == reference[1]
    assert len(ours[0]) == len(reference[0])
    for mine, theirs in zip(ours[0], reference[0], strict=True):
        assert mine == theirs
    # without transaction metadata C puts together the messages of every rows event it walked (_envelope.h)
    assert counting.composed == (0 if options.transactions else counting.walked) or reference[1] is not None
    return counting.rendered, reference[1]


@pytest.fixture(autouse=True)
def _extension(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans are built with the extension even under BINLAKE_PURE_PYTHON (the comparisons switch it per path)."""
    monkeypatch.setattr(native_module, "native", NATIVE)


def test_extension_is_built() -> None:
    """bootstrap builds it; the encoder uses it unless BINLAKE_PURE_PYTHON asks for the reference path."""
    assert (load_extension("ingester.records.debezium._native") is None) == bool(os.environ.get("BINLAKE_PURE_PYTHON"))


# ---------------------------------------------------------------- whole messages


_OPTIONS = [dict(schemas=True, tombstones=True, transactions=True), dict(schemas=False, tombstones=True),
            dict(schemas=True, tombstones=False), dict(schemas=False, tombstones=False, transactions=True)]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_binlogs_give_the_same_messages_in_every_mode(name, monkeypatch) -> None:
    _, out, _ = build_records(CORPUS / name)
    rendered = 0
    for modes, options in zip(ALL_MODES, itertools.cycle(_OPTIONS)):
        count, error = _same(out, DebeziumOptions("p", modes, **options), monkeypatch)  # type: ignore[arg-type]
        assert error is None
        rendered += count
    has_rows = any(isinstance(r, Record) and not r.topic.startswith("_") for r in out)
    assert rendered or not has_rows or name.startswith("rust-mysql-common/json")  # JSON columns are Python's


def test_snapshot_rows_stay_pythons_and_give_the_same_messages(monkeypatch) -> None:
    headers, value = snapshot_record([[[1, "a", "AP8="], [2, None, None]], [[3, "é", ""]]])  # bytes as base64
    record = Record("db.t", b"db.t", value, list(headers.items()), None)  # type: ignore[arg-type]
    for options in _OPTIONS:
        assert _same([record], DebeziumOptions("p", **options), monkeypatch) == (0, None)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None, suppress_health_check=_SLOW)
@given(st.data())
def test_synthetic_tables_give_the_same_messages_and_errors(tmp_path, monkeypatch, data) -> None:
    records = synthetic_records(tmp_path, data)
    if records is None:
        return
    modes = data.draw(st.sampled_from(ALL_MODES))
    options = data.draw(st.sampled_from(_OPTIONS))
    _same(records, DebeziumOptions("p", modes, **options), monkeypatch)  # type: ignore[arg-type]


# ---------------------------------------------------------------- a rows event written by hand


@pytest.mark.parametrize("flavour", ["mysql", "mariadb"])
def test_key_changes_tombstones_and_transactions_as_python_composes_them(tmp_path, monkeypatch, flavour) -> None:
    mariadb = flavour == "mariadb"
    path = tmp_path / "mysql-bin.000001"
    updates = (name_row(1, b"a") + name_row(1, b"b") + name_row(1, b"b") + name_row(2, b"b") + name_row(3, None)
               + name_row(3, "é\"\\\n".encode()))
    path.write_bytes(table_binlog(updates, 31 if not mariadb else 24, mariadb))
    records = binlog_records(path)
    assert records is not None
    for options in _OPTIONS:
        assert _same(records, DebeziumOptions("p", **options), monkeypatch) == (1, None)  # type: ignore[arg-type]
    assert _same(records, DebeziumOptions("p%d%s", transactions=True), monkeypatch) == (1, None)  # bytes % escapes
    messages, _ = _encode(records, DebeziumOptions("p", tombstones=True), monkeypatch, NATIVE)
    ops = [orjson.loads(m.value)["payload"]["op"] if m.value else None for m in messages if m.topic == "p.db.t"]
    assert ops == ["u", "d", None, "c", "u"]  # the key changed in the second row: a delete, its tombstone, a create


@pytest.mark.parametrize("cut", [1, 3, 6, 10])
def test_truncated_rows_give_pythons_error(tmp_path, monkeypatch, cut) -> None:
    """The rows data ends inside a value: C leaves the event to Python, which names it at its position."""
    path = tmp_path / "mysql-bin.000001"
    path.write_bytes(table_binlog((name_row(1, b"abcdef") + name_row(2, b"xyz"))[:-cut]))
    records = binlog_records(path)
    assert records is not None
    _, error = _same(records, DebeziumOptions("p"), monkeypatch)
    assert error is not None and error.startswith("BinlogError: record db.t at ") and " at byte " in error


def test_a_damaged_checksum_gives_pythons_error(tmp_path, monkeypatch) -> None:
    raw = bytearray(table_binlog(name_row(1, b"abc")))
    records = binlog_records(_write(tmp_path, bytes(raw)))
    assert records is not None
    record = next(r for r in records if isinstance(r, Record) and r.topic == "db.t")
    value = bytearray(record.value)
    value[-3] ^= 0xFF  # inside the rows event's CRC32
    damaged = Record(record.topic, record.key, bytes(value), record.headers, record.seq)
    _, error = _same([damaged], DebeziumOptions("p"), monkeypatch)
    assert error is not None and "CRC32 mismatch" in error


def _write(tmp_path: Path, raw: bytes) -> Path:
    path = tmp_path / "mysql-bin.000001"
    path.write_bytes(raw)
    return path


# ---------------------------------------------------------------- each column type's values, struct by struct


def _col(index: int, name: str, code: int, meta: int = 0, nullable: bool = True, **kw: Any) -> Column:
    return Column(index, name, code, kw.pop("binlog_type", code), meta, nullable, **kw)


def _table(column: Column, mariadb: bool = True) -> TableMap:
    """db.t: id INT NOT NULL primary key, then ``column`` (index 1)."""
    return TableMap(42, 1, "db", "t", [_col(0, "id", T.LONG, nullable=False), column], [(0, 0)], has_names=True,
                    is_mariadb=mariadb)


def _image(i: int, value: bytes | None) -> bytes:
    return bytes([0 if value is not None else 2]) + struct.pack("<i", i) + (value or b"")


def _structs(tm: TableMap, kind: str, data: bytes, modes: Modes) -> tuple[Any, Any]:
    """(C's rows, the reference's) of the rows data: per row (before, after, key of before, key of after)."""
    before = (0, 1) if kind != "write" else ()
    after = (0, 1) if kind != "delete" else ()
    codec = table_codec(tm, "p", modes)
    reference = []
    for change in compile_rows(tm, kind, before, after)(data, 0, len(data)):
        images = [codec.row(change[k]) if k in change else None for k in ("before", "after")]
        reference.append((*(None if x is None else orjson.dumps(x) for x in images),
                          *(None if x is None else orjson.dumps(codec.key(x)) for x in images)))
    plan = rows_plan(tm, kind, before, after, modes)
    return (None if plan is None else NATIVE.render(plan, data, 0, len(data))), reference


def _check(column: Column, values: list[bytes | None], modes_list: list[Modes] = ALL_MODES,
           mariadb: bool = True) -> None:
    """C renders every value in every mode as the reference does, in writes, updates and deletes."""
    tm = _table(column, mariadb)
    writes = b"".join(_image(i, v) for i, v in enumerate(values))
    updates = b"".join(_image(i, v) + _image(i + (i % 2), v) for i, v in enumerate(values))
    for modes in modes_list:
        for kind, data in (("write", writes), ("update", updates), ("delete", writes)):
            ours, reference = _structs(tm, kind, data, modes)
            assert ours is not None, (kind, modes)
            assert ours == reference, (kind, modes)


def _refused(column: Column, value: bytes) -> None:
    """C leaves a row with this value to Python."""
    data = _image(1, value)
    plan = rows_plan(_table(column), "write", (), (0, 1), Modes())
    assert NATIVE.render(plan, data, 0, len(data)) is None


def test_integers_at_their_limits() -> None:
    for code, width in ((T.TINY, 1), (T.SHORT, 2), (T.INT24, 3), (T.LONG, 4), (T.LONGLONG, 8)):
        for unsigned in (False, True):
            limits = (0, 1, (1 << (8 * width - 1)) - 1, 1 << (8 * width - 1), (1 << 8 * width) - 1)
            _check(_col(1, "n", code, unsigned=unsigned), [v.to_bytes(width, "little") for v in limits] + [None])


def _decimal(text: str, precision: int, scale: int) -> bytes:
    """MySQL's packed DECIMAL of ``text``: digit groups of 9 (4 bytes) around the point, sign in the top bit."""
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").partition(".")
    intg = precision - scale
    whole, fraction = whole.rjust(intg, "0"), fraction.ljust(scale, "0")
    out = bytearray()
    head = intg % 9
    if head:
        out += int(whole[:head]).to_bytes(dig2bytes[head], "big")
    out += b"".join(int(whole[k : k + 9]).to_bytes(4, "big") for k in range(head, intg, 9))
    out += b"".join(int(fraction[k : k + 9]).to_bytes(4, "big") for k in range(0, scale - scale % 9, 9))
    if scale % 9:
        out += int(fraction[scale - scale % 9 :]).to_bytes(dig2bytes[scale % 9], "big")
    out[0] |= 0x80
    return bytes(b ^ 0xFF for b in out) if negative else bytes(out)


@pytest.mark.parametrize(("precision", "scale"), [(1, 0), (5, 2), (10, 0), (18, 9), (19, 19), (30, 10), (65, 30),
                                                  (65, 0)])
def test_decimals_in_every_mode(precision, scale) -> None:
    rng = random.Random(precision * 100 + scale)
    intg = precision - scale

    def text(digits_whole: str, digits_fraction: str, negative: bool) -> str:
        return ("-" if negative else "") + (digits_whole or "0") + ("." + digits_fraction if scale else "")

    values = [text("0", "0" * scale, False), text("9" * intg, "9" * scale, False), text("9" * intg, "9" * scale, True),
              text("1", "0" * scale, True), text("0", ("0" * (scale - 1) + "1") if scale else "", True)]
    for _ in range(20):
        values.append(text(str(rng.randrange(10 ** intg)) if intg else "0",
                           str(rng.randrange(10 ** scale)).rjust(scale, "0") if scale else "", rng.random() < 0.5))
    column = _col(1, "d", T.NEWDECIMAL, (precision << 8) | scale)
    _check(column, [_decimal(v, precision, scale) for v in values] + [None])


def test_a_corrupt_decimal_digit_group_is_pythons() -> None:
    _refused(_col(1, "d", T.NEWDECIMAL, (10 << 8) | 0), b"\x80\xff\xff\xff\xff")  # a group beyond 999999999


def test_unsigned_bigint_from_2_to_the_63() -> None:
    values = [0, 1, (1 << 63) - 1, 1 << 63, (1 << 63) + 12345, (1 << 64) - 1]
    _check(_col(1, "u", T.LONGLONG, unsigned=True), [v.to_bytes(8, "little") for v in values])


def _date(y: int, m: int, d: int) -> bytes:
    return (y << 9 | m << 5 | d).to_bytes(3, "little")


def _fraction(micros: int, fsp: int) -> bytes:
    nfrac = (fsp + 1) // 2
    return (micros // (1, 10_000, 100, 1)[nfrac]).to_bytes(nfrac, "big") if nfrac else b""


def _datetime2(y: int, mo: int, d: int, h: int, mi: int, s: int, micros: int, fsp: int) -> bytes:
    return (((y * 13 + mo) << 22 | d << 17 | h << 12 | mi << 6 | s) + 0x8000000000).to_bytes(5, "big") + \
        _fraction(micros, fsp)


def _time2(negative: bool, h: int, m: int, s: int, micros: int, fsp: int) -> bytes:
    """MySQL's TIME2 (my_time_packed_to_binary) of a packed time: the fraction's bytes by fsp."""
    nr = ((h << 12 | m << 6 | s) << 24) + micros
    nr = -nr if negative else nr
    nfrac = (fsp + 1) // 2
    if nfrac == 3:
        return (nr + 0x800000000000).to_bytes(6, "big")
    frac = abs(nr) % (1 << 24) * (-1 if nr < 0 else 1)  # C's remainder
    head = ((nr >> 24) + 0x800000).to_bytes(3, "big")
    if not nfrac:
        return head
    return head + (frac // (10_000 if nfrac == 1 else 100) if frac >= 0 else
                   -(-frac // (10_000 if nfrac == 1 else 100))).to_bytes(nfrac, "big", signed=True)


def test_dates_zero_dates_and_years() -> None:
    dates = [_date(1970, 1, 1), _date(1, 1, 1), _date(9999, 12, 31), _date(2024, 2, 29), _date(1969, 12, 31),
             _date(0, 0, 0), _date(2024, 0, 5), _date(2024, 5, 0), _date(0, 3, 3), None]
    for nullable in (True, False):
        _check(_col(1, "d", T.DATE, nullable=nullable), dates)
    _check(_col(1, "y", T.YEAR), [b"\x00", b"\x01", b"\x7b", b"\xff", None])
    for bad in (_date(2023, 2, 29), _date(2024, 13, 1), _date(10000, 1, 1)):  # Python's calendar refuses them
        _refused(_col(1, "d", T.DATE), bad)


@pytest.mark.parametrize("fsp", range(7))
def test_datetimes_timestamps_and_times_of_every_precision(fsp) -> None:
    micros = [0, 1, 999_999, 123_456, 500_000]
    datetimes = [_datetime2(2018, 6, 20, 6, 37, 3, u, fsp) for u in micros]
    datetimes += [_datetime2(1, 1, 1, 0, 0, 0, 0, fsp), _datetime2(9999, 12, 31, 23, 59, 59, 999_999, fsp),
                  _datetime2(1969, 12, 31, 23, 59, 59, 1, fsp), _datetime2(0, 0, 0, 0, 0, 0, 0, fsp),
                  _datetime2(2020, 0, 0, 0, 0, 0, 0, fsp), _datetime2(2020, 2, 0, 10, 0, 0, 0, fsp), None]
    for nullable in (True, False):
        _check(_col(1, "dt", T.DATETIME2, fsp, nullable=nullable, binlog_type=T.DATETIME2), datetimes)
    timestamps = [(0).to_bytes(4, "big") + _fraction(u, fsp) for u in micros]
    timestamps += [(s).to_bytes(4, "big") + _fraction(u, fsp) for s in (1, 1_529_476_623, 2**31 - 1, 2**32 - 1)
                   for u in micros]
    _check(_col(1, "ts", T.TIMESTAMP2, fsp), [*timestamps, None])
    times = [_time2(neg, h, m, s, u, fsp) for neg in (False, True) for h, m, s in ((0, 0, 0), (0, 0, 1), (23, 59, 59),
             (24, 0, 0), (838, 59, 59), (12, 30, 0)) for u in micros]
    for nullable in (True, False):
        _check(_col(1, "t", T.TIME2, fsp, nullable=nullable), [*times, None])
    if fsp:
        _refused(_col(1, "ts", T.TIMESTAMP2, fsp), b"\x01\x02\x03\x04" + b"\xff" * ((fsp + 1) // 2))
    _refused(_col(1, "dt", T.DATETIME2, fsp), _datetime2(2023, 2, 30, 0, 0, 0, 0, fsp))
    _refused(_col(1, "dt", T.DATETIME2, fsp), _datetime2(2023, 1, 1, 24, 0, 0, 0, fsp))
    _refused(_col(1, "dt", T.DATETIME2, fsp), b"\x00" * (5 + (fsp + 1) // 2))  # negative


def test_floats_and_doubles_as_orjson_writes_them() -> None:
    rng = random.Random(7)
    specials = [0.0, -0.0, 1.0, 0.1, 1e16, 1e-5, 1.5e-5, 1e-7, 123456789.0, 1e22, 5e-324, 1.7976931348623157e308,
                float("nan"), float("inf"), float("-inf"), 3.4028234663852886e38, 1.1754943508222875e-38]
    doubles = [struct.pack("<d", v) for v in specials]
    doubles += [rng.getrandbits(64).to_bytes(8, "little") for _ in range(1500)]
    doubles += [struct.pack("<d", rng.uniform(-1, 1) * 10.0 ** rng.randrange(-30, 30)) for _ in range(500)]
    _check(_col(1, "f", T.DOUBLE, 8), doubles, [Modes()])
    floats = [struct.pack("<f", v) for v in specials if abs(v) < 3.4e38]  # NaN and the infinities: Python's
    floats += [struct.pack("<f", rng.uniform(-1, 1) * 10.0 ** rng.randrange(-40, 38)) for _ in range(500)]
    floats += [b for b in (rng.getrandbits(32).to_bytes(4, "little") for _ in range(1500))
               if struct.unpack("<f", b)[0] - struct.unpack("<f", b)[0] == 0]
    _check(_col(1, "f", T.FLOAT, 4), floats, [Modes()])
    for special in (float("nan"), float("inf")):
        _refused(_col(1, "f", T.FLOAT, 4), struct.pack("<f", special))


def test_text_binary_and_their_modes() -> None:
    texts = [b"", b"plain", "é中文😀".encode(), b'quote " backslash \\ controls \x00\x01\x1f\x7f\n\t', None]
    utf8 = [len(t).to_bytes(1, "little") + t if t is not None else None for t in texts]
    _check(_col(1, "s", T.VARCHAR, 80, collation=45), utf8)  # utf8mb4
    _check(_col(1, "s", T.BLOB, 2, collation=224, binlog_type=T.BLOB),  # utf8mb4_unicode_ci TEXT
           [len(t).to_bytes(2, "little") + t if t is not None else None for t in texts])
    _check(_col(1, "s", T.VARCHAR, 80, collation=8), [b"\x05ascii", b"\x00", None])  # latin1, ASCII only
    raw = [b"", b"\x00", b"\xff\xfe", bytes(range(256))[:200], None]
    _check(_col(1, "b", T.VARCHAR, 300, collation=63), [len(r).to_bytes(2, "little") + r if r is not None else None
                                                        for r in raw])
    binary8 = _col(1, "b", T.STRING, (0xFE << 8) | 8, collation=63, binlog_type=T.STRING)  # BINARY(8): zero-padded
    _check(binary8, [b"\x00", b"\x03abc", b"\x08" + bytes(range(8)), None])
    _check(_col(1, "b", T.BLOB, 4, collation=None), [b"\x03\0\0\0abc", b"\0\0\0\0"])  # no charset known: bytes
    _refused(_col(1, "s", T.VARCHAR, 80, collation=45), b"\x02\xc3\x28")  # not UTF-8: Python's replacement
    _refused(_col(1, "s", T.VARCHAR, 80, collation=8), b"\x01\xe9")  # latin1 beyond ASCII: Python's decoder


def test_bits_enums_and_sets() -> None:
    for bits in (1, 2, 7, 8, 9, 17, 63, 64):
        nbytes = (bits + 7) // 8
        values = [0, 1, (1 << bits) - 1, random.Random(bits).getrandbits(bits)]
        _check(_col(1, "b", T.BIT, (bits // 8) << 8 | bits % 8), [v.to_bytes(nbytes, "big") for v in values] + [None])
    labels = ["a", "é", 'q"', ""]
    _check(_col(1, "e", T.ENUM, 1, enum_values=labels, binlog_type=T.STRING), [b"\x00", b"\x01", b"\x03", b"\x04",
                                                                             b"\x05", b"\xff", None])
    _check(_col(1, "e", T.ENUM, 2, binlog_type=T.STRING), [b"\x00\x00", b"\x07\x01"])  # no labels: the number
    _check(_col(1, "s", T.SET, 1, set_values=labels, binlog_type=T.STRING), [b"\x00", b"\x05", b"\x0f", b"\xff", None])
    _check(_col(1, "s", T.SET, 8, binlog_type=T.STRING), [b"\xff" * 8, b"\x01" + bytes(7)])
    _check(_col(1, "s", T.SET, 1, set_values=[], binlog_type=T.STRING), [b"\x03"])


def test_geometry_vector_and_null_columns() -> None:
    point = struct.pack("<I", 4326) + b"\x01" + struct.pack("<Idd", 1, 1.5, -2.25)
    point_be = struct.pack("<I", 0) + b"\x00" + struct.pack(">Idd", 1, 1e300, float("nan"))
    line = struct.pack("<I", 0) + b"\x01" + struct.pack("<II", 2, 0)
    prefixed = [len(g).to_bytes(4, "little") + g for g in (point, point_be, line)]
    _check(_col(1, "g", T.GEOMETRY, 4, geometry_type=1), [*prefixed[:2], None])
    _check(_col(1, "g", T.GEOMETRY, 4, geometry_type=2), [*prefixed, b"\x02\0\0\0ab", None])
    _refused(_col(1, "g", T.GEOMETRY, 4, geometry_type=1), prefixed[2][:-4])  # a POINT too short for x and y
    vector = b"".join(struct.pack("<f", v) for v in (1.0, -0.5, 3.14, 1e-20))
    _check(_col(1, "v", T.VECTOR, 4), [len(vector).to_bytes(4, "little") + vector, b"\0\0\0\0", None])
    _refused(_col(1, "v", T.VECTOR, 4), b"\x03\0\0\0abc")  # not whole floats: the codec's error
    _check(_col(1, "n", T.NULL), [b"", None])


def test_tables_the_plan_leaves_to_python() -> None:
    modes = Modes()
    json = _table(_col(1, "j", T.JSON, 4))
    assert rows_plan(json, "write", (), (0, 1), modes) is None
    old = _table(_col(1, "t", T.DATETIME, 0))
    assert rows_plan(old, "write", (), (0, 1), modes) is None
    floating = TableMap(42, 1, "db", "t", [_col(0, "f", T.DOUBLE, 8, nullable=False)], [(0, 0)], has_names=True)
    assert rows_plan(floating, "write", (), (0,), modes) is None  # 0.0 == -0.0 as keys: Python compares
    twice = TableMap(42, 1, "db", "t", [_col(0, "a", T.LONG), _col(1, "a", T.LONG)], None, has_names=True)
    assert rows_plan(twice, "write", (), (0, 1), modes) is None  # Python's dicts keep one of them
    mysql_collation = _table(_col(1, "s", T.VARCHAR, 80, collation=303), mariadb=False)  # utf8mb4_ja_0900_as_cs
    assert rows_plan(mysql_collation, "write", (), (0, 1), modes) is None  # text to the codec, unknown to Debezium's


def test_invisible_columns_and_partial_images() -> None:
    tm = TableMap(42, 1, "db", "t", [_col(0, "id", T.LONG, nullable=False), _col(1, "h", T.LONG, visible=False),
                                      _col(2, "v", T.VARCHAR, 80, collation=45)], [(0, 0)], has_names=True)
    data = b"\x00" + struct.pack("<ii", 7, 8) + b"\x02hi"
    for kind, before, after in (("write", (), (0, 1, 2)), ("delete", (0, 1, 2), ())):
        plan = rows_plan(tm, kind, before, after, Modes())
        assert NATIVE.render(plan, data, 0, len(data)) == [
            (None, b'{"id":7,"v":"hi"}', None, b'{"id":7}') if kind == "write" else
            (b'{"id":7,"v":"hi"}', None, b'{"id":7}', None)]
    minimal = b"\x00" + struct.pack("<i", 7) + b"\x00\x02ho"  # before: the key only; after: v only
    plan = rows_plan(tm, "update", (0,), (2,), Modes())
    assert NATIVE.render(plan, minimal, 0, len(minimal)) == [
        (b'{"id":7,"v":null}', b'{"id":null,"v":"ho"}', b'{"id":7}', b'{"id":null}')]
