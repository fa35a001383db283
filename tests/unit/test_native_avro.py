"""The native Avro transcoder (records/debezium/_avro.h: a payload's JSON text -> Avro, by avro_program.py's
program of its Connect schema) against the Python reference path (orjson, payload_fixer, fastavro): the same
bytes, or None and then Python's bytes or error.

Whole messages of every corpus binlog in every value-handling mode and of random synthetic tables, where C must
have transcoded every change event; each Connect type's edge values; JSON the transcoder does not take exactly
(whitespace, fields out of order, nulls where the schema needs a value, ...) left to Python; random damage to
the JSON; and a mutated program, which the comparisons must notice."""

from __future__ import annotations

import base64
import importlib
import itertools
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingester.codec import BinlogError
from ingester.records.builder import Record
from ingester.records.debezium import layouts
from ingester.records.debezium import native as native_module
from ingester.records.debezium.avro_program import avro_program
from ingester.records.debezium.encoder import DebeziumAvro, DebeziumOptions
from ingester.records.debezium.layouts import AvroLayout
from tests.corpus import CORPUS
from tests.harness.avro import Registry
from tests.harness.binlogs import name_row, table_binlog
from tests.harness.records import (
    ALL_MODES,
    CORPUS_FILES,
    binlog_records,
    build_records,
    encoded,
    synthetic_records,
    ticking_clock,
)

NATIVE = importlib.import_module("ingester.records.debezium._native")
_SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
_HEADER = b"\0\0\0\0\x01"  # the transcoder tests' magic byte and schema id


class _Counting:
    """The extension, counting the payloads its transcoder took (``done``) and left to Python (``left``), the
    records whose messages its composer put together (``composed``) and those it left to Python (``declined``)."""

    def __init__(self) -> None:
        self.done = self.left = self.composed = self.declined = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(NATIVE, name)

    def avro(self, program: bytes, payload: bytes, header: bytes) -> bytes | None:
        got = NATIVE.avro(program, payload, header)
        self.done += got is not None
        self.left += got is None
        return got  # type: ignore[no-any-return]

    def envelopes(self, *args: Any) -> Any:
        got = NATIVE.envelopes(*args)
        self.composed += got is not None
        self.declined += got is None
        return got


@pytest.fixture(autouse=True)
def _extension(monkeypatch: pytest.MonkeyPatch) -> None:
    """C renders the rows' JSON in both paths (even under BINLAKE_PURE_PYTHON): only the transcoding differs."""
    monkeypatch.setattr(native_module, "native", NATIVE)


def _encode(records: list[Any], options: DebeziumOptions, monkeypatch: pytest.MonkeyPatch,
            native: _Counting | None) -> tuple[list[Any], str | None]:
    """The messages of the records through one debezium-avro encoder, and its error if any: with ``native``
    (C's walk, composer and transcoder), else the reference path (C's walk, Python's envelopes and Avro)."""
    with monkeypatch.context() as m:
        m.setattr(layouts, "_native", native)
        m.setattr(native_module, "native", native or NATIVE)
        return encoded(DebeziumAvro(options, Registry(), lambda n: f"mysql-bin.{n:06d}", 900_000,
                                    clock=ticking_clock()), records)


def _same(records: list[Any], options: DebeziumOptions, monkeypatch: pytest.MonkeyPatch,
          counting: _Counting | None = None) -> tuple[_Counting, str | None]:
    counting = counting or _Counting()
    ours = _encode(records, options, monkeypatch, counting)
    reference = _encode(records, options, monkeypatch, None)
    assert ours == reference
    return counting, reference[1]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_binlogs_give_the_same_messages_in_every_mode(name, monkeypatch) -> None:
    _, out, _ = build_records(CORPUS / name)
    has_rows = any(isinstance(r, Record) and not r.topic.startswith("_") for r in out)
    for modes, transactions in zip(ALL_MODES, itertools.cycle((False, True))):
        counting, error = _same(out, DebeziumOptions("p", modes, tombstones=True, transactions=transactions),
                                monkeypatch)
        if "json.binlog" in name:  # partial JSON updates (MINIMAL images): a null Avro cannot hold, Python's error
            assert error is not None and "is null but required" in error
            continue
        assert error is None
        # every change event's key and value was C's (the transaction topic's messages are Python structures):
        # composed by C without transaction metadata, else transcoded from Python's composition
        assert counting.left == counting.declined == 0
        assert (counting.done if transactions else counting.composed) > 0 or not has_rows


@settings(max_examples=150, deadline=None, suppress_health_check=_SLOW)
@given(st.data())
def test_synthetic_tables_give_the_same_messages_and_errors(tmp_path, monkeypatch, data) -> None:
    records = synthetic_records(tmp_path, data)
    options = DebeziumOptions("p", data.draw(st.sampled_from(ALL_MODES)), transactions=data.draw(st.booleans()))
    if records is None:
        return
    counting, error = _same(records, options, monkeypatch)
    assert counting.left == counting.declined == 0 or error is not None  # C took every payload, unless one failed


def test_events_the_transcoder_refuses_are_pythons_which_raises_its_error(tmp_path, monkeypatch) -> None:
    """A NULL in a NOT NULL key column (a damaged binlog): the composer leaves the record to Python, whose
    transcoding leaves the key to the reference path, which names the field."""
    path = tmp_path / "mysql-bin.000001"
    path.write_bytes(table_binlog(name_row(1, b"a") + b"\x01\x01b", code=30, nullable=b"\x00"))
    records = binlog_records(path)
    assert records is not None
    for transactions in (False, True):
        counting, error = _same(records, DebeziumOptions("p", transactions=transactions), monkeypatch)
        assert error is not None and "id is null but required" in error
        assert counting.left and counting.declined == (not transactions)


@pytest.mark.parametrize("transactions", [False, True])
def test_a_mutated_program_is_noticed(monkeypatch, transactions) -> None:
    """The comparisons can fail: the corpus's messages with a union's branches swapped in C differ."""
    _, out, _ = build_records(CORPUS / "zendesk-maxwell/binlog.000004")
    options = DebeziumOptions("p", transactions=transactions)
    reference = _encode(out, options, monkeypatch, None)
    assert _encode(out, options, monkeypatch, _Counting()) == reference
    with monkeypatch.context() as m:
        m.setattr(layouts, "avro_program", lambda schema: avro_program(schema).replace(b"U\0\1", b"U\1\0"))
        assert _encode(out, options, monkeypatch, _Counting()) != reference


# ---------------------------------------------------------------- each type's edge values


def _field(field: str, kind: str, optional: bool = True, **more: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, "field": field, **more}


_DECIMAL = {"name": "org.apache.kafka.connect.data.Decimal", "version": 1,
            "parameters": {"scale": "2", "connect.decimal.precision": "65"}}
_SCHEMA = {"type": "struct", "name": "p.db.t.Value", "optional": False, "fields": [
    _field("i8", "int8"), _field("i16", "int16"), _field("i32", "int32", False), _field("i64", "int64"),
    _field("f", "float"), _field("d", "double"), _field("b", "boolean"), _field("s", "string"),
    _field("y", "bytes"), _field("dec", "bytes", **_DECIMAL),
    _field("day", "int32", name="org.apache.kafka.connect.data.Date", version=1),
    _field("ts", "int64", name="org.apache.kafka.connect.data.Timestamp", version=1),
    _field("v", "array", items={"type": "float", "optional": False}, name="io.debezium.data.FloatVector"),
    _field("a-b", "string"), _field("1st", "string", False), _field("dflt", "string", default="x"),
    {"type": "struct", "name": "p.db.t.Inner", "optional": True, "field": "inner",
     "fields": [_field("x", "int32", False), _field("é", "string")]},
    {"type": "struct", "optional": True, "field": "anon", "fields": [_field("x", "int64", False)]},
]}
_SCHEMA_JSON = orjson.dumps(_SCHEMA)
_PROGRAM = avro_program(_SCHEMA)
_BASE = {f["field"]: None for f in _SCHEMA["fields"]} | {"i32": 0, "1st": ""}


def _python(payload: bytes) -> bytes | str:
    """The reference path's bytes of a payload's JSON text, or its error."""
    layout = AvroLayout(Registry())
    try:
        return layout.encode(".t", "value", _SCHEMA_JSON, orjson.loads(payload))
    except BinlogError as exc:
        return str(exc)
    except (ValueError, TypeError, OverflowError) as exc:  # JSON orjson refuses; a value fastavro refuses
        return type(exc).__name__


def _native(payload: bytes) -> bytes | None:
    assert _PROGRAM is not None
    got = NATIVE.avro(_PROGRAM, payload, _HEADER)
    return got  # type: ignore[no-any-return]


_EDGES: list[dict[str, Any]] = [
    {"i8": -128, "i16": 32767, "i32": -(2 ** 31), "i64": -(2 ** 63)}, {"i32": 2 ** 31 - 1, "i64": 2 ** 63 - 1},
    {"i64": 0, "f": 0.0, "d": -0.0}, {"f": -0.0, "d": 5e-324},
    {"f": 3.4028234663852886e38, "d": 1.7976931348623157e308},
    {"f": 1e-45, "d": -2.2250738585072014e-308}, {"f": 3.14, "d": 0.1}, {"f": 1e-5, "d": 1.5e-5}, {"f": 16777217.0},
    {"d": 1e22, "f": 1e22}, {"d": 123456789012345680000.0}, {"b": True}, {"b": False},
    {"s": "", "1st": "a\"b\\c/\b\f\n\r\t\x00\x1f\x7f", "a-b": "é€😀\U0010ffff\u2028\ufeff"},
    {"s": "x" * 200}, {"s": "€" * 5000}, {"y": ""}, {"y": "AA=="}, {"y": "AAE="}, {"y": "AP8A/w=="},
    {"y": "+/+/"}, {"dec": "AYag"}, {"dec": "/w=="}, {"dec": "ASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4mrze8="},
    {"day": -719162, "ts": 253402300799999}, {"v": []}, {"v": [1.5]}, {"v": [0.1, -0.0, 3.4e38] * 50},
    {"dflt": "y"}, {"dflt": None}, {"inner": {"x": 1, "é": "z"}}, {"inner": {"x": -1, "é": None}},
    {"anon": {"x": 9}}, {"s": "\ud7ff\ue000"},
]


@pytest.mark.parametrize("values", _EDGES)
def test_edge_values_are_transcoded_as_python_writes_them(values) -> None:
    payload = orjson.dumps(_BASE | values)
    want = _python(payload)
    assert isinstance(want, bytes)
    assert _native(payload) == _HEADER + want[5:]


@pytest.mark.parametrize("text", [
    b"[1,2]", b"", b"{}", b"null",
    b'{"i8":null}', b'{ "i8":null}',  # a field missing; whitespace
    # each of these replaces a value in the base payload
    b'"i32":null', b'"i32":2147483648', b'"i32":-2147483649', b'"i8":1.0', b'"i8":1e2', b'"i8":true',
    b'"i8":"1"', b'"i64":9223372036854775808', b'"i64":-9223372036854775809', b'"i64":123456789012345678901',
    b'"i8":01', b'"i8":-', b'"f":3.5e38', b'"f":1e400', b'"d":1e400', b'"d":-1e999', b'"d":NaN', b'"d":"1"',
    b'"d":1.', b'"d":.5', b'"d":1e', b'"b":1', b'"b":tru', b'"s":"\\ud800"', b'"s":"\\udc00x"',
    b'"s":"\\ud800\\u0041"', b'"s":"\\x"', b'"s":"\\u12"', b'"s":"a\nb"', b'"s":"\xff"', b'"s":"\xed\xa0\x80"',
    b'"s":"\xc0\x80"', b'"s":"\xf4\x90\x80\x80"', b'"s":"abc', b'"s":5', b'"y":"A"', b'"y":"AA="', b'"y":"A==="',
    b'"y":"AA=A"', b'"y":"A\\/=="', b'"y":"AA==AA=="', b'"y":"AA AA"', b'"y":"AB-_"', b'"y":5', b'"v":[1,]',
    b'"v":[null]', b'"v":{}', b'"v":[1 ]', '"inner":{"é":null,"x":1}'.encode(), b'"inner":{"x":1}',
    '"inner":{"x":1,"é":null,"z":2}'.encode(), b'"anon":[]', b'"1st":null',
])
def test_json_it_does_not_take_exactly_is_left_to_python(text) -> None:
    if text.startswith(b'"'):
        name, value = text.split(b":", 1)
        base = orjson.dumps(_BASE)
        start = base.index(name + b":")
        end = start + len(name) + 1 + len(orjson.dumps(_BASE[orjson.loads(name)]))
        text = base[:start] + name + b":" + value + base[end:]
    assert _native(text) is None


def test_a_layout_leaves_what_c_refuses_to_python_which_raises_its_error(monkeypatch) -> None:
    counting = _Counting()
    monkeypatch.setattr(layouts, "_native", counting)
    layout = AvroLayout(Registry())
    good = orjson.dumps(_BASE | {"s": "é"})
    assert layout.encode_json(".t", "value", _SCHEMA_JSON, good) == layout.encode(".t", "value", _SCHEMA_JSON,
                                                                                    orjson.loads(good))
    spaced = orjson.dumps(_BASE, option=orjson.OPT_INDENT_2)
    plain = orjson.dumps(_BASE)
    assert layout.encode_json(".t", "value", _SCHEMA_JSON, spaced) == layout.encode_json(".t", "value", _SCHEMA_JSON,
                                                                                           plain)
    with pytest.raises(BinlogError, match=r"^change event of \.t \(value\): 1st is null but required"):
        layout.encode_json(".t", "value", _SCHEMA_JSON, orjson.dumps(_BASE | {"1st": None}))
    assert (counting.done, counting.left) == (2, 2)


_VALUES = {
    "i8": st.integers(-128, 127), "i16": st.integers(-(2 ** 15), 2 ** 15 - 1),
    "i32": st.integers(-(2 ** 31), 2 ** 31 - 1),
    "i64": st.integers(-(2 ** 63), 2 ** 63 - 1), "f": st.floats(width=32, allow_nan=False, allow_infinity=False),
    "d": st.floats(allow_nan=False, allow_infinity=False), "b": st.booleans(), "s": st.text(), "a-b": st.text(),
    "1st": st.text(), "y": st.binary(), "v": st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False)),
}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional=_VALUES), st.integers(0, 10 ** 6), st.binary(max_size=3))
def test_random_payloads_and_damage_give_pythons_bytes_or_none(values, where, damage) -> None:
    values = {k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in values.items()}
    payload = orjson.dumps(_BASE | values)
    want = _python(payload)
    assert _native(payload) == _HEADER + want[5:]  # type: ignore[index]
    at = where % (len(payload) + 1)
    damaged = payload[:at] + damage + payload[at + len(damage) % 2:]
    got, want = _native(damaged), _python(damaged)
    assert got is None or (isinstance(want, bytes) and got == _HEADER + want[5:])


def test_programs() -> None:
    assert avro_program({"type": "map", "keys": {"type": "string"}, "values": {"type": "int32"}}) is None
    assert avro_program({"type": "int8", "optional": True}) == b"U\0\1\1\0\0\0i"
    assert avro_program({"type": "string", "optional": True, "default": "x"}) == b"U\1\0\1\0\0\0s"
    assert NATIVE.avro(b"R\1\0", b"{}", b"") is None  # a program cut short
    assert NATIVE.avro(b"q", b"1", b"") is None  # an unknown op
    assert NATIVE.avro(b"A\5\0\0\0l", b"[1]", b"") is None  # an items program longer than what is left
    deep = b"l"
    for _ in range(70):
        deep = b"A" + len(deep).to_bytes(4, "little") + deep
    assert NATIVE.avro(deep, b"[" * 70 + b"]" * 70, b"") is None and NATIVE.avro(deep[5 * 10:], b"[]", b"") == b"\0"
    assert NATIVE.avro(b"l", b"-1", b"H") == b"H\x01" and NATIVE.avro(b"d", b"1", b"") == b"\0" * 6 + b"\xf0?"
