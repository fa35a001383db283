"""TABLE_MAP_EVENT: column types, metadata and the optional metadata of MySQL 8 / MariaDB 10.5+.

A TableMap resolves everything the row decoders need per column (real type, length metadata,
signedness, collation, ENUM/SET labels, names) once, so rows are decoded without lookups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .constants import ColumnType as T
from .cursor import Cursor

_NUMERIC = frozenset((T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.FLOAT, T.DOUBLE, T.NEWDECIMAL, T.DECIMAL))
_BLOBS = frozenset((T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB_COMPRESSED))
# Types whose values are strings of some charset (binary included): CHAR/VARCHAR/TEXT/BINARY/BLOB, MariaDB's JSON.
STRING_TYPES = frozenset((T.STRING, T.VAR_STRING, T.VARCHAR, T.VARCHAR_COMPRESSED)) | _BLOBS
_CHARACTER = STRING_TYPES | {T.VECTOR}
# Types whose table-map metadata is 1 and 2 bytes; others have none.
_META1 = frozenset(
    (T.FLOAT, T.DOUBLE, T.TIMESTAMP2, T.DATETIME2, T.TIME2, T.JSON, T.GEOMETRY, T.VECTOR, T.BLOB_COMPRESSED)
) | _BLOBS
_META2 = frozenset((T.VARCHAR, T.VAR_STRING, T.BIT, T.NEWDECIMAL, T.STRING, T.ENUM, T.SET, T.VARCHAR_COMPRESSED))

# MariaDB's hidden column of a long UNIQUE index (of a BLOB/TEXT column or USING HASH): the index's hash
HIDDEN_HASH_NAME = re.compile(r"DB_ROW_HASH_[1-9][0-9]*\Z")

GEOMETRY_TYPES = ("GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING",
                  "MULTIPOLYGON", "GEOMETRYCOLLECTION")


@dataclass(slots=True)
class Column:
    """One column as the row decoders see it."""

    index: int
    name: str
    type: int  # real type: ENUM/SET/STRING are unpacked from MYSQL_TYPE_STRING's metadata
    binlog_type: int  # type byte as written in the table map
    meta: int  # type metadata (see _column_meta)
    nullable: bool
    unsigned: bool | None = None  # None: no SIGNEDNESS metadata (decoded as signed)
    collation: int | None = None
    enum_values: list[str] | None = None
    set_values: list[str] | None = None
    geometry_type: int | None = None
    visible: bool = True
    vector_dimensions: int | None = None
    default: str | int | None = None  # a NOT NULL column's literal DEFAULT, from the schema history's entry

    @property
    def max_length(self) -> int:
        """Declared byte length of CHAR/BINARY/VARCHAR columns."""
        if self.binlog_type == T.STRING:
            return _string_max_length(self.meta)
        return self.meta


def _string_max_length(meta: int) -> int:
    if not meta:  # pre-GA 5.1 table maps carry no metadata; CHAR then had a 1-byte length
        return 0
    byte0, byte1 = meta >> 8, meta & 0xFF
    return (((byte0 >> 4) & 0x300) ^ 0x300) + byte1 if (byte0 & 0x30) != 0x30 else byte1


@dataclass(slots=True)
class TableMap:
    table_id: int
    map_flags: int
    database: str
    table: str
    columns: list[Column]
    primary_key: list[tuple[int, int]] | None = None  # (column index, prefix length; 0 = whole)
    has_names: bool = False
    is_mariadb: bool = False
    optional_metadata: dict[str, Any] = field(default_factory=dict)
    _decoders: dict[Any, Any] = field(default_factory=dict, repr=False)  # compiled row decoders
    _names: list[str] | None = field(default=None, repr=False)
    _dict: dict[str, Any] | None = field(default=None, repr=False)  # built once: maps repeat per transaction
    json_cache: bytes | None = field(default=None, repr=False)  # for renderers that serialize it once
    jsonl_plans: dict[bytes, Any] = field(default_factory=dict, repr=False)  # native dump's row plans

    @property
    def column_names(self) -> list[str]:
        if self._names is None:
            self._names = [c.name for c in self.columns]
        return self._names

    @property
    def hidden_columns(self) -> int:
        """How many of the last columns are MariaDB's hidden hashes of long UNIQUE indexes (a BIGINT the server
        computes and keeps after the table's own columns, ``DB_ROW_HASH_<n>``): in the row images, not one
        of the table's columns (``SELECT *`` leaves them out). 0 for MySQL, and for a map without names."""
        if not self.is_mariadb:
            return 0
        count = 0
        for c in reversed(self.columns):
            if c.type != T.LONGLONG or not HIDDEN_HASH_NAME.match(c.name):
                break
            count += 1
        return count

    def to_dict(self) -> dict[str, Any]:
        if self._dict is None:
            self._dict = self._build_dict()
        return self._dict

    def _build_dict(self) -> dict[str, Any]:
        return {
            "table_id": self.table_id,
            "database": self.database,
            "table": self.table,
            "map_flags": self.map_flags,
            "columns": [
                {
                    k: v
                    for k, v in (
                        ("name", c.name),
                        ("type", _type_label(c.type)),
                        ("type_code", c.binlog_type),
                        ("meta", c.meta),
                        ("nullable", c.nullable),
                        ("unsigned", c.unsigned),
                        ("collation", c.collation),
                        ("enum_values", c.enum_values),
                        ("set_values", c.set_values),
                        ("geometry_type", c.geometry_type),
                        ("visible", None if c.visible else False),
                        ("vector_dimensions", c.vector_dimensions),
                    )
                    if v is not None
                }
                for c in self.columns
            ],
            "primary_key": self.primary_key,
        }


def _type_label(code: int) -> str:
    try:
        return T(code).name.lower()
    except ValueError:
        return f"type{code}"


def _column_meta(cur: Cursor, ctype: int) -> int:
    if ctype in _META1:
        return cur.u8()
    if ctype in _META2:
        if ctype in (T.STRING, T.ENUM, T.SET, T.NEWDECIMAL):
            hi = cur.u8()  # big-endian pair: (real type | precision, length | scale)
            return (hi << 8) | cur.u8()
        return cur.u16()
    return 0


def parse_table_map(cur: Cursor, table_id_size: int, is_mariadb: bool) -> TableMap:
    table_id = cur.uint(table_id_size)
    map_flags = cur.u16()
    database = cur.take(cur.u8(), "database name").decode("utf-8", "surrogateescape")
    cur.u8()  # NUL
    table = cur.take(cur.u8(), "table name").decode("utf-8", "surrogateescape")
    cur.u8()
    count = cur.packed()
    cur.need(count, "column types")
    types = list(cur.buf[cur.pos : cur.pos + count])
    cur.pos += count
    if cur.remaining:
        meta_len = cur.packed()
        cur.need(meta_len, "column metadata")
        meta_cur = Cursor(cur.buf, cur.pos, cur.pos + meta_len, cur.base)
        metas = [_column_meta(meta_cur, t) for t in types]
        cur.pos += meta_len
        nullable = cur.bitmap(count)
    else:  # pre-GA 5.1: no metadata and no nullability
        metas = [0] * count
        nullable = (1 << count) - 1
    columns = []
    for i, (t, m) in enumerate(zip(types, metas, strict=True)):
        real = t
        if t == T.STRING and m:
            byte0 = m >> 8
            if (byte0 & 0x30) != 0x30:
                real = byte0 | 0x30
            elif byte0 in (T.ENUM, T.SET):
                real = byte0
        columns.append(Column(i, f"@{i + 1}", real, t, m, bool(nullable >> i & 1)))
    tm = TableMap(table_id, map_flags, database, table, columns, is_mariadb=is_mariadb)
    if cur.remaining:
        _parse_optional_metadata(cur, tm)
    return tm


def _bits_msb_first(data: bytes, count: int) -> list[bool]:
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(min(count, len(data) * 8))]


def _strings(cur: Cursor) -> list[str]:
    return [cur.packed_bytes().decode("utf-8", "surrogateescape") for _ in range(cur.packed())]


def _parse_optional_metadata(cur: Cursor, tm: TableMap) -> None:
    cols = tm.columns
    # MariaDB's YEAR is a TINYINT underneath and has a signedness bit; MySQL's has none.
    numeric = [c for c in cols if c.type in _NUMERIC or (tm.is_mariadb and c.type == T.YEAR)]
    # MariaDB counts GEOMETRY (a BLOB underneath, charset binary) among the character columns of the charset
    # fields; MySQL does not
    character = [c for c in cols if c.type in _CHARACTER or (tm.is_mariadb and c.type == T.GEOMETRY)]
    enum_set = [c for c in cols if c.type in (T.ENUM, T.SET)]
    enums = [c for c in cols if c.type == T.ENUM]
    sets = [c for c in cols if c.type == T.SET]
    geoms = [c for c in cols if c.type == T.GEOMETRY]
    vectors = [c for c in cols if c.type == T.VECTOR]
    raw: dict[str, Any] = tm.optional_metadata
    while cur.remaining:
        kind = cur.u8()
        length = cur.packed()
        cur.need(length, f"optional metadata field {kind}")
        sub = Cursor(cur.buf, cur.pos, cur.pos + length, cur.base)
        cur.pos += length
        if kind == 1:  # SIGNEDNESS
            for c, flag in zip(numeric, _bits_msb_first(sub.rest(), len(numeric)), strict=False):
                c.unsigned = flag
        elif kind in (2, 10):  # DEFAULT_CHARSET / ENUM_AND_SET_DEFAULT_CHARSET
            targets = character if kind == 2 else enum_set
            default = sub.packed()
            overrides = {}
            while sub.remaining:
                idx = sub.packed()
                overrides[idx] = sub.packed()
            for i, c in enumerate(targets):
                c.collation = overrides.get(i, default)
        elif kind in (3, 11):  # COLUMN_CHARSET / ENUM_AND_SET_COLUMN_CHARSET
            targets = character if kind == 3 else enum_set
            for c in targets:
                if not sub.remaining:
                    break
                c.collation = sub.packed()
        elif kind == 4:  # COLUMN_NAME
            for c in cols:
                if not sub.remaining:
                    break
                c.name = sub.packed_bytes("column name").decode("utf-8", "surrogateescape")
            tm.has_names = True
        elif kind == 5:  # SET_STR_VALUE
            for c in sets:
                if sub.remaining:
                    c.set_values = _strings(sub)
        elif kind == 6:  # ENUM_STR_VALUE
            for c in enums:
                if sub.remaining:
                    c.enum_values = _strings(sub)
        elif kind == 7:  # GEOMETRY_TYPE
            for c in geoms:
                if sub.remaining:
                    c.geometry_type = sub.packed()
        elif kind == 8:  # SIMPLE_PRIMARY_KEY
            pk = []
            while sub.remaining:
                pk.append((sub.packed(), 0))
            tm.primary_key = pk
        elif kind == 9:  # PRIMARY_KEY_WITH_PREFIX
            pk = []
            while sub.remaining:
                idx = sub.packed()
                pk.append((idx, sub.packed()))
            tm.primary_key = pk
        elif kind == 12:  # COLUMN_VISIBILITY
            for c, flag in zip(cols, _bits_msb_first(sub.rest(), len(cols)), strict=False):
                c.visible = flag
        elif kind == 13:  # VECTOR_DIMENSIONALITY
            for c in vectors:
                if sub.remaining:
                    c.vector_dimensions = sub.packed()
        else:
            raw[f"field{kind}"] = sub.rest()
    if tm.primary_key and any(i >= len(cols) for i, _ in tm.primary_key):
        raise cur.error("primary key column index out of range in table map")
