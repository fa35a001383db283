"""Collation id -> character set -> decoder for the text columns of binlog rows.

TABLE_MAP optional metadata names a column's character set by collation id (MySQL 5.7-9.x
and MariaDB 10.x-11.x numbering). Decoders return the ``str`` the server itself gives when
converting the value to utf8mb4, with U+FFFD where the server prints ``?`` (a byte it
cannot convert) and for invalid or surrogate sequences; they never raise.

No id means different charsets on MySQL and MariaDB: ids 1-247 agree (MySQL adds 76),
MySQL's 248-250 (gb18030) and 255-323 (utf8mb4) are unused by MariaDB except the
utf8mb4_0900 ids it aliases to utf8mb4 since 11.4.5, and MariaDB's 576-738, 1025-1270 and
2048-3327 are unused by MySQL. ``charset_for`` still resolves per flavour, so an id the
flavour never assigns is unknown rather than borrowed from the other.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable, Mapping
from typing import Any, cast

BINARY_COLLATION = 63

_Ids = tuple[int | range, ...]

# Collation ids grouped by charset. Sources: information_schema.COLLATION_CHARACTER_SET_APPLICABILITY
# of MariaDB 10.11.19 (ids 1-1270 and its UCA 14.0.0 ids); MySQL Connector/J's CharsetMapping
# (2024 release: ids 1-323, the newest MySQL list found); MariaDB's strings/ctype-uca0900.c
# (11.4.5+ aliases of MySQL 0900 ids) and strings/ctype-uca1400.h, whose UCA 14.0.0 id layout
# 2048 + (charset << 8) + (tailoring << 3) + flags gives whole 256-id blocks per charset.
# MariaDB's ids 1025-1270 are NO PAD variants numbered base id + 1024.

# MySQL's utf8mb4_0900 ids that MariaDB 11.4.5+ assigns too, as aliases of UCA 14 collations.
_UTF8MB4_0900 = (range(255, 272), range(273, 276), range(277, 295), range(296, 299), 300, 305, 309)

# Assigned alike by both flavours.
_SHARED: dict[str, _Ids] = {
    "big5": (1, 84),
    "latin2": (2, 9, 21, 27, 77),
    "dec8": (3, 69),
    "cp850": (4, 80),
    "latin1": (5, 8, 15, 31, 47, 48, 49, 94),
    "hp8": (6, 72),
    "koi8r": (7, 74),
    "swe7": (10, 82),
    "ascii": (11, 65),
    "ujis": (12, 91),
    "sjis": (13, 88),
    "cp1251": (14, 23, 50, 51, 52),
    "hebrew": (16, 71),
    "filename": (17,),  # identifiers in file names only; not listed by information_schema
    "tis620": (18, 89),
    "euckr": (19, 85),
    "latin7": (20, 41, 42, 79),
    "koi8u": (22, 75),
    "gb2312": (24, 86),
    "greek": (25, 70),
    "cp1250": (26, 34, 44, 66, 99),
    "gbk": (28, 87),
    "cp1257": (29, 58, 59),
    "latin5": (30, 78),
    "armscii8": (32, 64),
    "utf8mb3": (33, 83, range(192, 216), 223),
    "ucs2": (35, 90, range(128, 152), 159),
    "cp866": (36, 68),
    "keybcs2": (37, 73),
    "macce": (38, 43),
    "macroman": (39, 53),
    "cp852": (40, 81),
    "utf8mb4": (45, 46, range(224, 248), *_UTF8MB4_0900),
    "utf16": (54, 55, range(101, 125)),
    "utf16le": (56, 62),
    "cp1256": (57, 67),
    "utf32": (60, 61, range(160, 184)),
    "binary": (BINARY_COLLATION,),
    "geostd8": (92, 93),
    "cp932": (95, 96),
    "eucjpms": (97, 98),
}

_MYSQL_ONLY: dict[str, _Ids] = {
    "utf8mb3": (76,),
    "gb18030": (range(248, 251),),
    "utf8mb4": (303, 304, range(306, 309), range(310, 324)),
}

_MARIADB_ONLY: dict[str, _Ids] = {
    "big5": (1025, 1108),
    "latin2": (1033, 1101),
    "dec8": (1027, 1093),
    "cp850": (1028, 1104),
    "latin1": (1032, 1071),
    "hp8": (1030, 1096),
    "koi8r": (1031, 1098),
    "swe7": (1034, 1106),
    "ascii": (1035, 1089),
    "ujis": (1036, 1115),
    "sjis": (1037, 1112),
    "cp1251": (1074, 1075),
    "hebrew": (1040, 1095),
    "tis620": (1042, 1113),
    "euckr": (1043, 1109),
    "latin7": (1065, 1103),
    "koi8u": (1046, 1099),
    "gb2312": (1048, 1110),
    "greek": (1049, 1094),
    "cp1250": (1050, 1090),
    "gbk": (1052, 1111),
    "cp1257": (1082, 1083),
    "latin5": (1054, 1102),
    "armscii8": (1056, 1088),
    "utf8mb3": (range(576, 579), 1057, 1107, 1216, 1238, range(2048, 2304)),
    "ucs2": (range(640, 643), 1059, 1114, 1152, 1174, range(2560, 2816)),
    "cp866": (1060, 1092),
    "keybcs2": (1061, 1097),
    "macce": (1062, 1067),
    "macroman": (1063, 1077),
    "cp852": (1064, 1105),
    "utf8mb4": (range(608, 611), 1069, 1070, 1248, 1270, range(2304, 2560)),
    "utf16": (range(672, 675), 1078, 1079, 1125, 1147, range(2816, 3072)),
    "utf16le": (1080, 1086),
    "cp1256": (1081, 1091),
    "utf32": (range(736, 739), 1084, 1085, 1184, 1206, range(3072, 3328)),
    "geostd8": (1116, 1117),
    "cp932": (1119, 1120),
    "eucjpms": (1121, 1122),
}


def _expand(*groups: Mapping[str, _Ids]) -> dict[int, str]:
    """Flatten charset -> ids groups into id -> charset."""
    table: dict[int, str] = {}
    for group in groups:
        for charset, ids in group.items():
            for item in ids:
                for collation_id in item if isinstance(item, range) else (item,):
                    table[collation_id] = charset
    return table


_MYSQL = _expand(_SHARED, _MYSQL_ONLY)
_MARIADB = _expand(_SHARED, _MARIADB_ONLY)

COLLATION_CHARSET: dict[int, str] = {**_MYSQL, **_MARIADB}


def charset_for(collation_id: int, mariadb: bool) -> str | None:
    """Charset name of a collation id on MySQL or MariaDB, or None if unassigned."""
    return (_MARIADB if mariadb else _MYSQL).get(collation_id)


# Single-byte charsets: Python base codec plus the bytes where the server differs, found by
# converting each byte to utf8mb4 on MariaDB 10.11 (MySQL's share/charsets tables agree).
# "XX=CCCC" sets byte 0xXX to U+CCCC and bare "CCCC" continues with the next byte;
# FFFE is the charmap "undefined" mark (the server converts the byte to '?').
_SINGLE_BYTE: dict[str, tuple[str, str]] = {
    "ascii": ("ascii", ""),
    "latin1": ("cp1252", "81=0081 8D=008D 8F=008F 0090 9D=009D"),
    "latin2": ("iso8859_2", ""),
    "latin5": ("iso8859_9", ""),
    "latin7": ("iso8859_13", ""),
    "greek": ("iso8859_7", "A1=02BD 02BC A4=FFFE FFFE AA=FFFE"),
    "hebrew": ("iso8859_8", "AF=203E"),
    "cp1250": ("cp1250", ""),
    "cp1251": ("cp1251", ""),
    "cp1256": ("cp1256", "8A=FFFE 8F=FFFE 98=FFFE 9A=FFFE 9F=FFFE AA=FFFE C0=FFFE FF=FFFE"),
    "cp1257": ("cp1257", ""),
    "cp850": ("cp850", ""),
    "cp852": ("cp852", ""),
    "cp866": ("cp866", "FC=207F 00B2"),
    "koi8r": ("koi8_r", ""),
    "koi8u": ("koi8_u", "95=2022"),
    "macce": ("mac_latin2", ""),
    "macroman": ("mac_roman", ""),
    "hp8": ("hp_roman8", ""),
    "tis620": ("tis_620", ""),
    "dec8": (
        "latin-1",
        "A4=FFFE A6=FFFE A8=00A4 AC=FFFE FFFE FFFE FFFE B4=FFFE B8=FFFE BE=FFFE D0=FFFE D7=0152 DD=0178 FFFE"
        " F0=FFFE F7=0153 FD=00FF FFFE FFFE",
    ),
    "swe7": ("ascii", "40=00C9 5B=00C4 00D6 00C5 00DC 60=00E9 7B=00E4 00F6 00E5 00FC FFFE"),
    "keybcs2": (
        "cp437",
        "80=010C 83=010F 85=010E 0164 010D 011B 011A 0139 00CD 013E 013A 8F=00C1 91=017E 017D"
        " 95=00D3 016F 00DA 00FD 9B=0160 013D 00DD 0158 0165 A4=0148 0147 016E 00D4 0161 0159 0155 0154",
    ),
    "armscii8": (
        "latin-1",
        "A1=2741 00A7 0589 0029 0028 00BB 00AB 2014 002E 055D 002C 002D 055F 2026 055C"
        " 055B 055E 0531 0561 0532 0562 0533 0563 0534 0564 0535 0565 0536 0566 0537 0567"
        " 0538 0568 0539 0569 053A 056A 053B 056B 053C 056C 053D 056D 053E 056E 053F 056F"
        " 0540 0570 0541 0571 0542 0572 0543 0573 0544 0574 0545 0575 0546 0576 0547 0577"
        " 0548 0578 0549 0579 054A 057A 054B 057B 054C 057C 054D 057D 054E 057E 054F 057F"
        " 0550 0580 0551 0581 0552 0582 0553 0583 0554 0584 0555 0585 0556 0586 2019 0027",
    ),
    "geostd8": (
        "cp1252",
        "83=FFFE 88=FFFE 8A=FFFE 8C=FFFE 8E=FFFE 98=FFFE FFFE FFFE 9C=FFFE 9E=FFFE FFFE"
        " C0=10D0 10D1 10D2 10D3 10D4 10D5 10D6 10F1 10D7 10D8 10D9 10DA 10DB 10DC 10F2 10DD"
        " 10DE 10DF 10E0 10E1 10E2 10F3 10E3 10E4 10E5 10E6 10E7 10E8 10E9 10EA 10EB 10EC"
        " 10ED 10EE 10F4 10EF 10F0 10F5 FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE"
        " FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE FFFE 2116 FFFE FFFE",
    ),
}

_UNDEFINED = "\ufffe"


def _build_table(base: str, overrides: str) -> str:
    """256-entry charmap decoding table: ``base`` per byte, then ``overrides``."""
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes((byte,)).decode(base))
        except UnicodeDecodeError:
            chars.append(_UNDEFINED)
    position = 0
    for token in overrides.split():
        if "=" in token:
            start, token = token.split("=")
            position = int(start, 16)
        chars[position] = chr(int(token, 16))
        position += 1
    return "".join(chars)


@functools.cache
def _table(charset: str) -> str:
    """Built on first use: importing the codec stays cheap (it starts every `binlake` command)."""
    return _build_table(*_SINGLE_BYTE[charset])


# Codecs for the single-byte tables that differ from Python's, e.g. "mysql_latin1".
_CUSTOM_CODECS = {f"mysql_{charset}": charset for charset, (_, overrides) in _SINGLE_BYTE.items() if overrides}


def _charmap_codec(name: str, table: str) -> codecs.CodecInfo:
    """Stateless codec over a charmap decoding table."""
    encoding_map = codecs.charmap_build(table)

    def encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
        return codecs.charmap_encode(text, errors, encoding_map)

    def decode(input: Any, errors: str = "strict") -> tuple[str, int]:
        return codecs.charmap_decode(input, errors, table)

    return codecs.CodecInfo(encode, decode, name=name)


def _search_codec(name: str) -> codecs.CodecInfo | None:
    """Codec search function serving the ``mysql_*`` codecs."""
    charset = _CUSTOM_CODECS.get(name)
    return None if charset is None else _charmap_codec(name, _table(charset))


codecs.register(_search_codec)

# Charset name -> Python codec name; None means binary (keep the bytes). Multibyte codecs
# measured against MariaDB 10.11 over all 1-3 byte sequences: gbk, gb2312, euckr (cp949),
# cp932 match; sjis differs at 0x815F (server U+005C); ujis and eucjpms map user-defined rows
# 0xF5-0xFE to the Private Use Area where Python has none, and eucjpms' NEC/IBM extensions
# are missing from euc_jp; big5 lacks the ETEN 0xF9D6-0xF9DC. gb18030 is MySQL only.
PYTHON_CODEC: dict[str, str | None] = {
    "binary": None,
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "filename": "utf-8",  # ASCII with @XXXX escapes, which are left as they are
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "sjis": "shift_jis",  # closest to the server; cp932 adds NEC/IBM codes sjis rejects
    "cp932": "cp932",
    "ujis": "euc_jp",
    "eucjpms": "euc_jp",  # Python has no eucJP-ms codec
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "euckr": "cp949",  # the server's euckr includes the UHC (cp949) extension
    **{
        charset: f"mysql_{charset}" if overrides else base
        for charset, (base, overrides) in _SINGLE_BYTE.items()
    },
}

Decoder = Callable[[bytes], str | bytes]


def _passthrough(data: bytes) -> bytes:
    """Binary values stay bytes."""
    return data


def _charmap_decoder(table: str) -> Callable[[bytes], str]:
    """Decoder over a charmap table; undefined bytes become U+FFFD."""
    charmap_decode = codecs.charmap_decode

    def decode(data: bytes) -> str:
        return charmap_decode(data, "replace", table)[0]

    return decode


def _unicode_decoder(codec: str) -> Callable[[bytes], str]:
    """Decoder via ``bytes.decode``, which CPython short-cuts for UTF-8/16/32 names."""

    def decode(data: bytes) -> str:
        return data.decode(codec, "replace")

    return decode


def _codec_decoder(codec: str) -> Callable[[bytes], str]:
    """Decoder via the codec's own stateless decode function."""
    codec_decode = codecs.getdecoder(codec)

    def decode(data: bytes) -> str:
        return codec_decode(data, "replace")[0]

    return decode


@functools.cache
def _decoder(charset: str) -> Decoder:
    """Fastest decoder for one charset (made on first use)."""
    codec = PYTHON_CODEC[charset]
    if codec is None:
        return _passthrough
    if charset in _SINGLE_BYTE:
        return _charmap_decoder(_table(charset))
    if codec.startswith("utf-"):
        return _unicode_decoder(codec)
    return _codec_decoder(codec)


def _decode_unknown(data: bytes) -> str:
    """UTF-8 when valid, else the server's latin1."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return cast(str, _decoder("latin1")(data))  # MySQL's latin1 (a charmap): always text


def decoder_for(collation_id: int | None, mariadb: bool = False) -> Decoder:
    """Function turning a column's bytes into str (bytes for binary); never raises."""
    if collation_id is None:
        return _decode_unknown
    charset = charset_for(collation_id, mariadb)
    return _decode_unknown if charset is None else _decoder(charset)


def keeps_bytes(collation_id: int | None, mariadb: bool = False) -> bool:
    """Whether a string column's values stay bytes: binary ones, and those whose charset nobody told us
    (no charset metadata in the binlog, no schema history, an id the flavour never assigns). Decoding
    those as text would guess; their bytes are kept whole instead (docs/JSONL.md)."""
    return collation_id is None or collation_id == BINARY_COLLATION or charset_for(collation_id, mariadb) is None


_ALIASES = {"utf8": "utf8mb3"}
# Bytes per character at most (the server's mbmaxlen; 1 for charsets not listed).
MAX_CHAR_BYTES = {"utf8mb3": 3, "utf8mb4": 4, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "big5": 2, "sjis": 2,
                  "ujis": 3, "euckr": 2, "gb2312": 2, "gbk": 2, "cp932": 2, "eucjpms": 3, "gb18030": 4}


def charset_of(name: str) -> str:
    """The charset of a charset or collation name as the server spells it (``utf8mb4_general_ci`` ->
    ``utf8mb4``, ``utf8`` -> ``utf8mb3``, ``binary`` -> ``binary``); charset names have no underscore."""
    charset = name.lower().split("_", 1)[0]
    return _ALIASES.get(charset, charset)


def collation_id_of(charset: str, mariadb: bool = False) -> int | None:
    """A collation id of a charset on the flavour (its lowest), for columns known by charset name only;
    None for a charset this module does not know."""
    return _IDS_BY_CHARSET[mariadb].get(charset_of(charset))


_IDS_BY_CHARSET: dict[bool, dict[str, int]] = {
    flavour: {charset: min(i for i, c in table.items() if c == charset) for charset in set(table.values())}
    for flavour, table in ((False, _MYSQL), (True, _MARIADB))
}


def is_utf8(collation_id: int | None, mariadb: bool = False) -> bool:
    """Whether ``decoder_for`` this collation is UTF-8 with errors replaced (a native reader can fuse it)."""
    charset = None if collation_id is None else charset_for(collation_id, mariadb)
    return charset is not None and PYTHON_CODEC.get(charset) == "utf-8"


def decode_text(data: bytes, collation_id: int | None, mariadb: bool = False) -> str | bytes:
    """Decode one value; see ``decoder_for``."""
    return decoder_for(collation_id, mariadb)(data)
