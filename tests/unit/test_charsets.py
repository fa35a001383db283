"""Collation ids, charset codecs and value decoding, checked against a real MariaDB."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator

import pymysql
import pytest

from ingester.codec.charsets import (
    COLLATION_CHARSET,
    PYTHON_CODEC,
    charset_for,
    decode_text,
    decoder_for,
)

# MariaDB 10.11: SELECT HEX(CONVERT(CONVERT(x'80..ff' USING latin1) USING utf8mb4)).
SERVER_LATIN1_80_FF = bytes.fromhex(
    "E282AC C281 E2809A C692 E2809E E280A6 E280A0 E280A1 CB86 E280B0 C5A0 E280B9 C592 C28D C5BD C28F"
    "C290 E28098 E28099 E2809C E2809D E280A2 E28093 E28094 CB9C E284A2 C5A1 E280BA C593 C29D C5BE C5B8"
    "C2A0 C2A1 C2A2 C2A3 C2A4 C2A5 C2A6 C2A7 C2A8 C2A9 C2AA C2AB C2AC C2AD C2AE C2AF"
    "C2B0 C2B1 C2B2 C2B3 C2B4 C2B5 C2B6 C2B7 C2B8 C2B9 C2BA C2BB C2BC C2BD C2BE C2BF"
    "C380 C381 C382 C383 C384 C385 C386 C387 C388 C389 C38A C38B C38C C38D C38E C38F"
    "C390 C391 C392 C393 C394 C395 C396 C397 C398 C399 C39A C39B C39C C39D C39E C39F"
    "C3A0 C3A1 C3A2 C3A3 C3A4 C3A5 C3A6 C3A7 C3A8 C3A9 C3AA C3AB C3AC C3AD C3AE C3AF"
    "C3B0 C3B1 C3B2 C3B3 C3B4 C3B5 C3B6 C3B7 C3B8 C3B9 C3BA C3BB C3BC C3BD C3BE C3BF"
).decode("utf-8")

INVALID_INPUTS = (
    b"\xff",
    b"\x80\x81\xfe\xff",
    b"\xed\xa0\x80",  # UTF-8 encoded surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\xd8\x3d",  # lone UTF-16 surrogate
    b"\x00\x11\x00\x00",  # UTF-32 beyond U+10FFFF
    b"abc\x8f",  # truncated multibyte sequence
)


def test_known_ids() -> None:
    assert charset_for(8, mariadb=False) == "latin1"
    assert charset_for(33, mariadb=True) == "utf8mb3"
    assert charset_for(45, mariadb=False) == "utf8mb4"
    assert charset_for(63, mariadb=True) == "binary"
    assert charset_for(255, mariadb=False) == "utf8mb4"
    assert charset_for(2304, mariadb=True) == "utf8mb4"  # utf8mb4_uca1400_ai_ci
    assert COLLATION_CHARSET[255] == "utf8mb4"
    assert COLLATION_CHARSET[248] == "gb18030"


def test_flavour_only_ids() -> None:
    assert charset_for(76, mariadb=False) == "utf8mb3"  # utf8mb3_tolower_ci
    assert charset_for(76, mariadb=True) is None
    assert charset_for(248, mariadb=True) is None
    assert charset_for(323, mariadb=False) == "utf8mb4"
    assert charset_for(323, mariadb=True) is None
    assert charset_for(309, mariadb=True) == "utf8mb4"  # alias of utf8mb4_nopad_bin
    assert charset_for(576, mariadb=True) == "utf8mb3"
    assert charset_for(576, mariadb=False) is None
    assert charset_for(3072, mariadb=True) == "utf32"
    assert charset_for(3072, mariadb=False) is None


def test_flavours_never_disagree() -> None:
    for collation_id, charset in COLLATION_CHARSET.items():
        for mariadb in (False, True):
            assert charset_for(collation_id, mariadb) in (None, charset)


def test_every_charset_has_a_codec() -> None:
    for charset in set(COLLATION_CHARSET.values()):
        codec = PYTHON_CODEC[charset]
        assert codec is None or codecs.lookup(codec)
    assert PYTHON_CODEC["binary"] is None


def test_latin1_is_cp1252_with_c1_holes() -> None:
    expected = "".join(chr(byte) for byte in range(0x80)) + SERVER_LATIN1_80_FF
    assert decode_text(bytes(range(256)), 8) == expected
    assert bytes(range(256)).decode(PYTHON_CODEC["latin1"]) == expected
    assert expected.encode(PYTHON_CODEC["latin1"]) == bytes(range(256))


def test_utf8mb4_four_byte_chars() -> None:
    text = "a\U0001f600\U0001d11e\u00e9"
    for collation_id, mariadb in ((45, False), (255, False), (2304, True), (1070, True)):
        assert decode_text(text.encode(), collation_id, mariadb) == text


def test_utf16_utf32_ucs2() -> None:
    text = "x\u00e9\U0001f600"
    assert decode_text(text.encode("utf-16-be"), 54) == text  # utf16_general_ci
    assert decode_text(text.encode("utf-16-le"), 56) == text  # utf16le_general_ci
    assert decode_text(text.encode("utf-32-be"), 60) == text  # utf32_general_ci
    assert decode_text("x\u00e9".encode("utf-16-be"), 35) == "x\u00e9"  # ucs2_general_ci


def test_binary_passthrough() -> None:
    data = b"\x00\xff\x80abc"
    assert decode_text(data, 63) is data
    assert decoder_for(63, mariadb=True)(data) is data


def test_unknown_collation_is_utf8_else_latin1() -> None:
    for collation_id in (None, 100, 5000):
        assert decode_text("\u20ac".encode(), collation_id) == "\u20ac"
        assert decode_text(b"\x80\x81caf\xe9", collation_id) == "\u20ac\x81caf\u00e9"


def test_invalid_input_never_raises() -> None:
    decoders = {decoder_for(i, mariadb) for i in COLLATION_CHARSET for mariadb in (False, True)}
    for decode in decoders | {decoder_for(None)}:
        for data in INVALID_INPUTS:
            assert isinstance(decode(data), str | bytes)


def test_undefined_bytes_become_replacement_char() -> None:
    assert decode_text(b"a\x80", 11) == "a\ufffd"  # ascii
    assert decode_text(b"\xa4", 25) == "\ufffd"  # greek
    assert decode_text(b"\xed\xa0\x80", 45) == "\ufffd" * 3


@pytest.fixture(scope="module")
def server(mariadb) -> Iterator[pymysql.Connection]:
    """The harness's private MariaDB: the collation facts come from the real server."""
    connection = mariadb.connect(charset="utf8mb4")
    yield connection
    connection.close()


def _default_collations(cursor: pymysql.cursors.Cursor) -> dict[str, int]:
    cursor.execute(
        "SELECT CHARACTER_SET_NAME, ID FROM information_schema.COLLATIONS WHERE IS_DEFAULT = 'Yes'"
    )
    return dict(cursor.fetchall())


@pytest.mark.integration
def test_collation_ids_match_server(server: pymysql.Connection) -> None:
    with server.cursor() as cursor:
        cursor.execute(
            "SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL"
        )
        rows = set(cursor.fetchall())
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = 'information_schema'"
            " AND TABLE_NAME = 'COLLATION_CHARACTER_SET_APPLICABILITY' AND COLUMN_NAME = 'ID'"
        )
        if cursor.fetchone()[0]:  # 10.10+: UCA 14.0.0 ids are listed only here
            cursor.execute(
                "SELECT ID, CHARACTER_SET_NAME"
                " FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID IS NOT NULL"
            )
            rows |= set(cursor.fetchall())
    assert len(rows) > 300
    mismatches = {(i, name, charset_for(i, mariadb=True)) for i, name in rows if charset_for(i, True) != name}
    assert not mismatches


@pytest.mark.integration
def test_latin1_matches_server(server: pymysql.Connection) -> None:
    with server.cursor() as cursor:
        cursor.execute("SELECT CONVERT(CONVERT(%s USING latin1) USING utf8mb4)", (bytes(range(0x80, 0x100)),))
        assert cursor.fetchone()[0] == SERVER_LATIN1_80_FF == decode_text(bytes(range(0x80, 0x100)), 8)


@pytest.mark.integration
def test_single_byte_charsets_match_server(server: pymysql.Connection) -> None:
    """Every byte of every 8-bit charset; the server's '?' for a byte it can't convert is U+FFFD."""
    with server.cursor() as cursor:
        defaults = _default_collations(cursor)
        cursor.execute("SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS WHERE MAXLEN = 1")
        charsets = [name for (name,) in cursor.fetchall() if name != "binary"]
        assert len(charsets) > 20
        column = "CONVERT(CONVERT(%s USING {}) USING utf8mb4)"
        for charset in charsets:
            cursor.execute(
                f"SELECT {', '.join([column.format(charset)] * 256)}", [bytes((b,)) for b in range(256)]
            )
            expected = [
                "\ufffd" if text == "?" != chr(b) else text for b, text in enumerate(cursor.fetchone())
            ]
            ours = [decode_text(bytes((b,)), defaults[charset], mariadb=True) for b in range(256)]
            assert ours == expected, charset


def _user_defined(seq: bytes) -> bool:
    """EUC-JP user-defined rows, which the server maps to the Private Use Area."""
    row = seq[1] if seq[0] == 0x8F else seq[0]
    return len(seq) > 1 and 0xF5 <= row <= 0xFE


# Sequences that the server converts but Python's codec decodes differently (or not at all).
KNOWN_DIFFERENCES: dict[str, Callable[[bytes], bool]] = {
    "sjis": lambda seq: seq == b"\x81\x5f",
    "cp932": lambda seq: False,
    "gbk": lambda seq: False,
    "gb2312": lambda seq: False,
    "euckr": lambda seq: False,
    "big5": lambda seq: (
        seq.hex() in {"a15a", "a1c3", "a1c5", "a1fe", "a240", "a2cc", "a2ce"}
        or b"\xf9\xd6" <= seq <= b"\xf9\xdc"
    ),
    "ujis": lambda seq: seq == b"\xa1\xc0" or _user_defined(seq),
    "eucjpms": lambda seq: (
        seq.hex() in {"8fa2b7", "8fa2c3", "a1c1", "a1c2", "a1dd", "a1f1", "a1f2", "a2cc"}
        or _user_defined(seq)
        or seq[0] == 0xAD
        or b"\x8f\xf3\xf3" <= seq <= b"\x8f\xf4\xfe"
    ),
}


@pytest.mark.integration
def test_multibyte_charsets_match_server(server: pymysql.Connection) -> None:
    """All 1-byte, 2-byte and EUC 3-byte sequences the server converts to one character."""
    sequences = [bytes((b,)) for b in range(0x80, 0x100)]
    sequences += [bytes((lead, trail)) for lead in range(0x81, 0xFF) for trail in range(0x40, 0xFF)]
    sequences += [bytes((0x8F, row, cell)) for row in range(0xA1, 0xFF) for cell in range(0xA1, 0xFF)]
    with server.cursor() as cursor:
        defaults = _default_collations(cursor)
        cursor.execute("CREATE DATABASE IF NOT EXISTS charsets_test")
        cursor.execute("CREATE TABLE charsets_test.seq (b VARBINARY(3) PRIMARY KEY)")
        cursor.executemany("INSERT INTO charsets_test.seq VALUES (%s)", [(seq,) for seq in sequences])
        for charset, known in KNOWN_DIFFERENCES.items():
            cursor.execute(
                f"SELECT b, CONVERT(CONVERT(b USING {charset}) USING utf8mb4) FROM charsets_test.seq"
            )
            converted = {seq: text for seq, text in cursor.fetchall() if len(text) == 1 and text != "?"}
            differing = {
                seq for seq, text in converted.items() if decode_text(seq, defaults[charset], True) != text
            }
            assert differing == {seq for seq in converted if known(seq)}, charset
        cursor.execute("DROP DATABASE charsets_test")
