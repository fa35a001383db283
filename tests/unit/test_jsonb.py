"""MySQL binary JSON (ingester.codec.jsonb): values, opaque types, DECIMAL, text rendering, hostile input (partial-
update diffs: test_json_diff.py). Byte vectors are built by hand from the format (tests/harness/jsonb_encoder.py)."""

from __future__ import annotations

import copy
import json
import math
import pickle
import struct
import time
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingester.codec.errors import BinlogError
from ingester.codec.jsonb import JSON_NULL, decode_json_binary, decode_mysql_decimal, to_json_text
from tests.corpus import CORPUS as CORPUS_ROOT
from tests.harness.jsonb_encoder import (
    encode,
    encode_decimal,
    event_bodies,
    json_values,
    only_binlog_errors,
    opaque,
    packed_datetime,
    packed_time,
)

CORPUS = CORPUS_ROOT / "rust-mysql-common"

# ---------------------------------------------------------------------------------------------
# Scalars


def test_empty_value_is_json_null() -> None:
    # parse_binary() treats a zero-length JSON column (e.g. INSERT IGNORE of NULL) as the null literal.
    assert decode_json_binary(b"") is JSON_NULL
    assert decode_json_binary(memoryview(b"")) is JSON_NULL


def test_null_document_is_json_null_and_nested_nulls_are_none() -> None:
    """The spec's literal type 0x04 with value 0x00 is null: as the whole document it is JSON_NULL (SQL
    NULL is None, for the column's readers), inside an array or object a plain None."""
    assert decode_json_binary(bytes.fromhex("04 00")) is JSON_NULL
    assert decode_json_binary(encode(None)) is JSON_NULL
    # [null]: count 1, size 7, value entry: literal inlined (type 04, value 0000)
    assert decode_json_binary(bytes.fromhex("02 0100 0700 04 0000")) == [None]
    # {"a": null}: count 1, size 12, key entry (offset 11, length 1), inlined literal null, key "a"
    assert decode_json_binary(bytes.fromhex("00 0100 0c00 0b00 0100 04 0000 61")) == {"a": None}
    assert decode_json_binary(encode({"a": [None, {"b": None}]})) == {"a": [None, {"b": None}]}
    assert to_json_text(JSON_NULL) == "null"
    assert copy.deepcopy(JSON_NULL) is JSON_NULL and pickle.loads(pickle.dumps(JSON_NULL)) is JSON_NULL
    assert JSON_NULL.to_json() == {"$json": None}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("0400", JSON_NULL),  # literal null
        ("0401", True),
        ("0402", False),
        ("05ffff", -1),  # int16
        ("0500 80", -32768),
        ("06ffff", 65535),  # uint16
        ("07 00000080", -(2**31)),  # int32
        ("08 ffffffff", 2**32 - 1),  # uint32
        ("09 0000000000000080", -(2**63)),  # int64
        ("0a ffffffffffffffff", 2**64 - 1),  # uint64
        ("0b 000000000000f83f", 1.5),  # double
        ("0c 00", ""),  # string of length 0
        ("0c 03 616263", "abc"),
        ("0c 02 c3a9", "é"),
    ],
)
def test_top_level_scalars(data: str, expected: object) -> None:
    value = decode_json_binary(bytes.fromhex(data))
    assert value == expected and type(value) is type(expected)


def test_long_string_uses_multibyte_length() -> None:
    text = "x" * 200 + "€" * 100  # 500 bytes: length 500 = 0xf4 0x03 (7 bits per byte, low first)
    data = b"\x0c\xf4\x03" + text.encode()
    assert decode_json_binary(data) == text
    assert decode_json_binary(encode("y" * 20000)) == "y" * 20000  # three length bytes


def test_memoryview_input() -> None:
    buf = memoryview(b"\xff\xff" + encode({"k": [1, "v"]}))[2:]
    assert decode_json_binary(buf) == {"k": [1, "v"]}


# ---------------------------------------------------------------------------------------------
# Containers


def test_small_object_with_inlined_values() -> None:
    data = bytes.fromhex(
        "00"  # small object
        "0200"  # 2 members
        "1900"  # 25 bytes
        "1200 0100"  # key "a": offset 18, length 1
        "1300 0200"  # key "bb": offset 19, length 2
        "05 feff"  # int16 -2, inlined
        "04 0100"  # literal true, inlined
        "61 6262"  # keys
        "0000 0000"  # slack the container size covers (the server may leave unused space)
    )
    value = decode_json_binary(data)
    assert value == {"a": -2, "bb": True}
    assert list(value) == ["a", "bb"]


def test_small_array_with_offset_values() -> None:
    data = bytes.fromhex(
        "02"  # small array
        "0400"  # 4 elements
        "2100"  # 33 bytes
        "07 1000"  # int32 at 16 (not inlined in the small format)
        "0c 1400"  # string at 20
        "0b 1800"  # double at 24
        "06 3412"  # uint16 0x1234, inlined
        "ffffffff"  # int32 -1
        "03 787978"  # "xyx"
        "000000000000e03f"  # 0.5
        "00"  # padding within the size
    )
    assert decode_json_binary(data) == [-1, "xyx", 0.5, 0x1234]


def test_large_object_inlines_32_bit_integers() -> None:
    data = bytes.fromhex(
        "01"  # large object
        "02000000"  # 2 members
        "20000000"  # 32 bytes
        "1e000000 0100"  # key "x": offset 30, length 1 (offsets are 4 bytes, lengths still 2)
        "1f000000 0100"  # key "y": offset 31
        "07 00000080"  # int32 -2^31, inlined (large format only)
        "08 ffffffff"  # uint32 2^32-1, inlined
        "78 79"  # keys
    )
    assert decode_json_binary(data) == {"x": -(2**31), "y": 2**32 - 1}


def test_large_array_with_inlined_int16_and_nested_values() -> None:
    data = bytes.fromhex(
        "03"  # large array
        "03000000"  # 3 elements
        "26000000"  # 38 bytes
        "05 f9ffffff"  # int16 -7 inlined in a 4-byte slot (the server sign-extends it)
        "02 17000000"  # small array at offset 23
        "0a 1e000000"  # uint64 at offset 30
        "0100 0700 04 0100"  # [true]: 1 element, 7 bytes, literal true inlined
        "ffffffffffffffff"
    )
    assert decode_json_binary(data) == [-7, [True], 2**64 - 1]


def test_empty_containers() -> None:
    assert decode_json_binary(bytes.fromhex("00 0000 0400")) == {}
    assert decode_json_binary(bytes.fromhex("02 0000 0400")) == []
    assert decode_json_binary(bytes.fromhex("01 00000000 08000000")) == {}
    assert decode_json_binary(bytes.fromhex("03 00000000 08000000")) == []


def test_unicode_keys_and_strings() -> None:
    doc = {"é": "ü", "日本": "語", "a": "😀", "": "empty key"}
    data = encode(doc)
    value = decode_json_binary(data)
    assert value == doc
    # Keys come back in MySQL's order: shorter UTF-8 first, then bytewise.
    assert list(value) == ["", "a", "é", "日本"]


def test_nested_documents_small_and_large() -> None:
    doc = {"list": [1, 2.5, None, {"deep": [[], {}]}], "n": -70000, "s": "t", "u": 2**63}
    assert decode_json_binary(encode(doc)) == doc
    assert decode_json_binary(encode(doc, large=True)) == doc
    big = {"k": ["x" * 1000] * 70}  # over 64 KiB: the encoder must switch to the large format
    data = encode(big)
    assert data[0] == 0x01
    assert decode_json_binary(data) == big


def test_nesting_limit_is_mysqls() -> None:
    deepest = []
    for _ in range(99):
        deepest = [deepest]
    assert decode_json_binary(encode(deepest)) == deepest  # 100 levels are allowed
    with pytest.raises(BinlogError, match="deeper than 100"):
        decode_json_binary(encode([deepest]))


# ---------------------------------------------------------------------------------------------
# Opaque values


def test_opaque_decimal_is_a_decimal_number() -> None:
    # Opaque payload: precision byte, scale byte, then the packed DECIMAL.
    value = decode_json_binary(opaque(246, bytes([6, 3]) + encode_decimal("123.456", 6, 3)))
    assert value == Decimal("123.456") and isinstance(value, Decimal)
    assert to_json_text(value) == "123.456"
    nine = decode_json_binary(opaque(246, bytes([11, 2]) + encode_decimal("9", 11, 2)))
    assert to_json_text({"e": nine}) == '{"e": 9.00}'
    tiny = decode_json_binary(opaque(246, bytes([10, 9]) + encode_decimal("0.000000001", 10, 9)))
    assert to_json_text(tiny) == "0.000000001"  # never exponent notation


def test_opaque_decimal_size_must_match_precision() -> None:
    with pytest.raises(BinlogError):
        decode_json_binary(opaque(246, bytes([6, 3]) + encode_decimal("1.5", 6, 3) + b"\x00"))
    with pytest.raises(BinlogError):
        decode_json_binary(opaque(246, bytes([6])))
    with pytest.raises(BinlogError):
        decode_json_binary(opaque(246, bytes([70, 3]) + bytes(40)))


@pytest.mark.parametrize(
    ("field_type", "payload", "expected"),
    [
        (10, packed_datetime(2012, 3, 18), "2012-03-18"),  # DATE
        (10, packed_datetime(0, 0, 0), "0000-00-00"),
        (12, packed_datetime(2012, 3, 18, 11, 30, 45), "2012-03-18 11:30:45.000000"),  # DATETIME
        (12, packed_datetime(9999, 12, 31, 23, 59, 59, 999999), "9999-12-31 23:59:59.999999"),
        (7, packed_datetime(1970, 1, 1, 0, 0, 1, 500), "1970-01-01 00:00:01.000500"),  # TIMESTAMP
        (11, packed_time(87, 31, 46, 654321), "87:31:46.654321"),  # TIME
        (11, packed_time(0, 0, 0), "00:00:00.000000"),
        (11, packed_time(838, 59, 59), "838:59:59.000000"),
        (11, packed_time(507, 48, 27, negative=True), "-507:48:27.000000"),  # -21 days 03:48:27
        (11, packed_time(0, 0, 1, 500000, negative=True), "-00:00:01.500000"),
        (11, packed_time(0, 0, 0, 1, negative=True), "-00:00:00.000001"),
    ],
)
def test_opaque_temporals_print_like_mysql(field_type: int, payload: bytes, expected: str) -> None:
    assert decode_json_binary(opaque(field_type, payload)) == expected


@pytest.mark.parametrize(
    ("field_type", "payload"),
    [
        (12, packed_datetime(2012, 3, 18, 24)),  # hour 24
        (12, packed_datetime(10000, 1, 1)),  # year 10000
        (12, packed_datetime(2012, 3, 18, 1, 60)),  # minute 60
        (12, struct.pack("<q", -(1 << 40))),  # negative datetime
        (12, struct.pack("<q", 1_000_000)),  # fraction above 999999
        (11, packed_time(839, 0, 0)),
        (11, packed_time(1, 2, 60)),
        (10, packed_datetime(2012, 3, 18)[:7]),  # 7 bytes instead of 8
        (11, b""),
    ],
)
def test_opaque_temporals_out_of_range(field_type: int, payload: bytes) -> None:
    with pytest.raises(BinlogError):
        decode_json_binary(opaque(field_type, payload))


def test_other_opaque_types_print_as_base64() -> None:
    assert decode_json_binary(opaque(15, b"U")) == "base64:type15:VQ=="
    assert decode_json_binary(opaque(252, b"")) == "base64:type252:"
    # DATETIME2/TIMESTAMP2 are not among the types MySQL's JSON printer treats as temporal.
    assert decode_json_binary(opaque(18, b"\x01\x02\x03")) == "base64:type18:AQID"
    # base64_encode() inserts a newline after every 76 characters; the JSON printer escapes it.
    long = decode_json_binary(opaque(16, bytes(range(60))))
    encoded = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4"
    assert long == f"base64:type16:{encoded[:76]}\n{encoded[76:]}OTo7"
    assert to_json_text(long) == f'"base64:type16:{encoded[:76]}\\n{encoded[76:]}OTo7"'
    exactly_76 = decode_json_binary(opaque(16, bytes(57)))
    assert "\n" not in exactly_76


def test_opaque_var_string_is_a_plain_string() -> None:
    assert decode_json_binary(opaque(253, "hé".encode())) == "hé"
    with pytest.raises(BinlogError):
        decode_json_binary(opaque(253, b"\xff"))


# ---------------------------------------------------------------------------------------------
# Real values written by MySQL 9.0.1 (json-opaque.binlog, table foo.test (a json)).


def test_real_opaque_values_from_mysql_9() -> None:
    texts = []
    for body in event_bodies(CORPUS / "json-opaque.binlog", 30):  # WRITE_ROWS v2
        # table id (6) + flags (2) + extra-data length (2, value 2: none) + column count (1)
        # + columns bitmap (1) + null bitmap (1), then the JSON column: 4-byte length + bytes.
        length = struct.unpack_from("<I", body, 13)[0]
        assert 17 + length == len(body)
        texts.append(to_json_text(decode_json_binary(body[17:])))
    assert texts == [
        '{"a": "base64:type15:VQ=="}',
        '{"b": "2012-03-18"}',
        '{"c": "2012-03-18 11:30:45.000000"}',
        '{"c": "87:31:46.654321"}',
        '{"d": 123.456}',  # opaque DECIMAL prints as a number
        '{"e": 9.00}',
        '{"e": [0, 1, true, false]}',
        '{"e": null}',
    ]


# ---------------------------------------------------------------------------------------------
# DECIMAL


@pytest.mark.parametrize(
    ("hexdata", "precision", "scale", "expected"),
    [
        ("807b01c8", 6, 3, "123.456"),  # 3 integer digits in 2 bytes, 3 fraction digits in 2 bytes
        ("7f84fe37", 6, 3, "-123.456"),  # the same bytes inverted
        ("8032", 4, 2, "0.50"),
        ("7fcd", 4, 2, "-0.50"),
        ("84d2", 4, 0, "1234"),
        ("7b2d", 4, 0, "-1234"),
        ("80", 1, 0, "0"),
        ("800000", 5, 2, "0.00"),
        ("80", 1, 1, "0.0"),
        ("89", 1, 1, "0.9"),
        ("7f", 1, 0, "0"),  # a negative zero without fraction digits prints as 0 (as in MySQL)
        ("7fffff", 5, 2, "-0.00"),  # ...but keeps its sign with fraction digits
        ("80000000 00000005 00", 20, 2, "5.00"),  # a zero leading 9-digit group
    ],
)
def test_decimal_vectors(hexdata: str, precision: int, scale: int, expected: str) -> None:
    data = bytes.fromhex(hexdata)
    assert decode_mysql_decimal(data, 0, precision, scale) == (expected, len(data))


@pytest.mark.parametrize(
    ("text", "precision", "scale"),
    [
        ("-12345678901234567890.123456789", 29, 9),
        ("12345678901234567890123456789012345.123456789012345678901234567890", 65, 30),
        ("-99999999999999999999999999999999999.999999999999999999999999999999", 65, 30),
        ("0.000000000000000000000000000001", 65, 30),
        ("1", 65, 0),
        ("99999999999999999999999999999999999999999999999999999999999999999", 65, 0),
        ("-0.123456789012345678901234567890", 30, 30),
    ],
)
def test_decimal_extremes(text: str, precision: int, scale: int) -> None:
    data = b"\xaa" + encode_decimal(text, precision, scale) + b"\xbb"
    digits, end = decode_mysql_decimal(data, 1, precision, scale)
    assert digits == text
    assert end == len(data) - 1


def test_decimal_sizes() -> None:
    # DECIMAL(65,30): 35 integer digits = 8 leftover (4 bytes) + 3 words, 30 fraction = 3 words + 3 (2 bytes).
    assert decode_mysql_decimal(encode_decimal("1", 65, 30), 0, 65, 30)[1] == 4 + 12 + 12 + 2


@pytest.mark.parametrize(
    ("data", "precision", "scale"),
    [
        (b"\x80", 4, 2),  # truncated
        (b"", 1, 0),
        (b"\x80\x00", 0, 0),  # precision 0
        (b"\x80\x00", 66, 0),
        (b"\x80\x00", 40, 31),  # scale above 30
        (b"\x80\x00", 2, 3),  # scale above precision
        (bytes.fromhex("8a"), 1, 0),  # 10 in a 1-digit group
        (bytes.fromhex("803b9aca00"), 10, 0),  # 1000000000 in a 9-digit word
        (bytes.fromhex("e4"), 2, 2),  # fraction group of 2 digits holding 100
    ],
)
def test_decimal_malformed(data: bytes, precision: int, scale: int) -> None:
    with pytest.raises(BinlogError):
        decode_mysql_decimal(data, 0, precision, scale)


def test_decimal_offset_outside_data() -> None:
    with pytest.raises(BinlogError):
        decode_mysql_decimal(b"\x80\x00\x00", 5, 1, 0)
    with pytest.raises(BinlogError):
        decode_mysql_decimal(b"\x80\x00\x00", -1, 1, 0)


@given(
    st.integers(min_value=1, max_value=65).flatmap(
        lambda p: st.tuples(st.just(p), st.integers(min_value=0, max_value=min(p, 30)))
    ),
    st.data(),
)
def test_decimal_round_trip(shape: tuple[int, int], data: st.DataObject) -> None:
    precision, scale = shape
    unscaled = data.draw(st.integers(min_value=-(10**precision) + 1, max_value=10**precision - 1))
    expected = Decimal(f"{unscaled}e-{scale}")  # exact, unlike arithmetic in the default context
    text = format(expected, "f")
    digits, end = decode_mysql_decimal(encode_decimal(text, precision, scale), 0, precision, scale)
    assert Decimal(digits) == expected
    assert len(digits.partition(".")[2]) == scale
    assert end == len(encode_decimal(text, precision, scale))


# ---------------------------------------------------------------------------------------------
# Text rendering


def test_to_json_text_layout() -> None:
    assert to_json_text({"a": 1, "b": [True, None]}) == '{"a": 1, "b": [true, null]}'
    assert to_json_text([]) == "[]"
    assert to_json_text({}) == "{}"
    assert to_json_text([[], {"x": {}}]) == '[[], {"x": {}}]'
    assert to_json_text(-(2**63)) == "-9223372036854775808"
    assert to_json_text(2**64 - 1) == "18446744073709551615"
    assert to_json_text(False) == "false"
    assert to_json_text(Decimal("-0.50")) == "-0.50"
    with pytest.raises(TypeError):
        to_json_text(object())


def test_to_json_text_escapes_like_mysql() -> None:
    text = 'q" b\\ \b\f\n\r\t \x00\x01\x1f \x7f / é 日 😀'
    assert to_json_text(text) == '"q\\" b\\\\ \\b\\f\\n\\r\\t \\u0000\\u0001\\u001f \x7f / é 日 😀"'
    assert to_json_text({"k\n": 1}) == '{"k\\n": 1}'


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (-2.5, "-2.5"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (100.0, "100.0"),
        (0.0001, "0.0001"),
        (0.000123, "0.000123"),
        (1e-15, "0.000000000000001"),  # the smallest decimal-point position printed without exponent
        (1.5e-15, "0.0000000000000015"),
        (1e-16, "1e-16"),
        (1.2345e-20, "1.2345e-20"),
        (123456789012345.0, "123456789012345.0"),  # 15 integer digits: still fixed notation
        (1e15, "1e15"),
        (1234567890123456.8, "1234567890123456.8"),  # digits after the point keep fixed notation
        (1.2345678901234567e19, "1.2345678901234567e19"),
        (1e300, "1e300"),
        (-1e300, "-1e300"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
        (5e-324, "5e-324"),
        (3.141592653589793, "3.141592653589793"),
    ],
)
def test_doubles_print_like_my_gcvt(number: float, text: str) -> None:
    assert to_json_text(number) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_text_round_trips(number: float) -> None:
    text = to_json_text(number)
    assert float(text) == number
    assert math.copysign(1.0, float(text)) == math.copysign(1.0, number)
    assert "." in text or "e" in text  # always distinguishable from an integer


# ---------------------------------------------------------------------------------------------
# Malformed input


def test_every_truncation_is_rejected() -> None:
    data = encode({"k": [1, "two", 3.0, {"x": 2**40}], "s": "s"})
    for end in range(1, len(data)):
        with pytest.raises(BinlogError):
            decode_json_binary(data[:end])


@pytest.mark.parametrize(
    "hexdata",
    [
        "0d",  # unknown type byte
        "10",
        "ff",
        "0403",  # literal 3 does not exist
        "05 01",  # int16 needs 2 bytes
        "0b 000000000000f07f",  # +infinity is not JSON
        "0b 000000000000f8ff",  # NaN
        "0c 05 6162",  # string longer than the data
        "0c ff",  # variable length cut short
        "0c ffffffff7f",  # 5-byte length above 32 bits
        "0c 8080808080 00",  # 6-byte length
        "0c 01 ff",  # not UTF-8
        "0f",  # opaque without its type
        "0f 0f",  # opaque without its length
        "0f 0f 03 00",  # opaque longer than the data
        "00 0100 2000 0b00 0100 0500 00 61",  # object size larger than the data
        "00 ffff 0400",  # 65535 members in a 4-byte object: header exceeds size
        "03 ffffffff 08000000",  # huge declared count, large array
        "02 0100 0700 0c 0700",  # value offset at the container end: the string has no bytes
        "02 0100 0800 0c 0900 00",  # value offset past the container
        "02 0100 0800 0c 0200 00",  # value offset inside the header
        "00 0100 0c00 0000 0100 0500 00 61",  # key offset inside the header
        "00 0100 0c00 0b00 0200 0500 00 61",  # key runs past the container
        "00 0100 0c00 0b00 0100 0500 00 ff",  # key is not UTF-8
        "02 0100 0800 0d 0700 00",  # unknown type in a value entry
        "02 0100 0700 04 0700",  # inlined literal 7
    ],
)
def test_malformed_vectors(hexdata: str) -> None:
    with pytest.raises(BinlogError):
        decode_json_binary(bytes.fromhex(hexdata))


def test_shared_values_cannot_multiply_work() -> None:
    # Each level is an array of 8 entries all pointing at the same child: 8**40 values if followed.
    child = bytes.fromhex("02 0000 0400")  # []
    for _ in range(40):
        header = 4 + 8 * 3
        body = struct.pack("<HH", 8, header + len(child) - 1)
        body += (b"\x02" + struct.pack("<H", header)) * 8
        child = b"\x02" + body + child[1:]
    start = time.perf_counter()
    with pytest.raises(BinlogError, match="overlap"):
        decode_json_binary(child)
    assert time.perf_counter() - start < 1.0


# ---------------------------------------------------------------------------------------------
# Properties


@given(json_values, st.booleans())
def test_encoder_round_trip(value: object, large: bool) -> None:
    decoded = decode_json_binary(encode(value, large))
    assert decoded == (JSON_NULL if value is None else value)
    assert json.loads(to_json_text(decoded)) == value


@given(json_values)
def test_object_keys_come_back_in_mysql_order(value: object) -> None:
    def check(node: object) -> None:
        if isinstance(node, dict):
            keys = [k.encode() for k in node]
            assert keys == sorted(keys, key=lambda k: (len(k), k))
            for child in node.values():
                check(child)
        elif isinstance(node, list):
            for child in node:
                check(child)

    check(decode_json_binary(encode(value)))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_binlog_error(data: bytes) -> None:
    only_binlog_errors(decode_json_binary, data)


@settings(max_examples=300)
@given(json_values, st.data())
def test_mutated_documents_decode_or_raise_binlog_error(value: object, data: st.DataObject) -> None:
    raw = bytearray(encode(value))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[position] = data.draw(st.integers(min_value=0, max_value=255))
    only_binlog_errors(decode_json_binary, bytes(raw))


