"""A table's columns as a FULL TABLE_MAP describes them (codec ``Column``s: type, binlog type, metadata, nullability,
signedness, collation, labels, geometry type), from what information_schema says of them (the snapshot's reader:
daemon/table_reader.py) or from the schema history's column entries (table statement entries: records/statement.py).
One set of rules for both, so a snapshot descriptor and a statement's ``columns`` describe a table alike, and like
the server's TABLE_MAP (tests/integration/test_type_zoo.py, test_table_statements.py). Pure: no SQL.
"""

from __future__ import annotations

from typing import Any

from ..codec.charsets import MAX_CHAR_BYTES
from ..codec.constants import ColumnType as T
from ..codec.table_map import GEOMETRY_TYPES, Column
from .collations import Collations
from .column_defaults import Uncomputable, literal
from .ddl_tokens import default_text
from .table_schema import BINARY_TYPES, TEXT_TYPES, ColumnDef, TableSchema

INTS = {"tinyint": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24, "int": T.LONG, "bigint": T.LONGLONG}
BLOBS = {"tinyblob": 1, "tinytext": 1, "blob": 2, "text": 2, "mediumblob": 3, "mediumtext": 3, "longblob": 4,
         "longtext": 4}
_TIMES = {"time": T.TIME2, "datetime": T.DATETIME2, "timestamp": T.TIMESTAMP2}
# the snapshot descriptor's column fields (records/snapshot.py's _COLUMN_FIELDS)
COLUMN_FIELDS = ("name", "type", "binlog_type", "meta", "nullable", "unsigned", "collation", "enum_values",
                 "set_values", "geometry_type")


def describe(i: int, name: str, data_type: str, *, unsigned: bool = False, compressed: bool = False,
             labels: list[str] | None = None, binary: bool = False, collation: int | None = None,
             precision: int = 0, scale: int = 0, fsp: int = 0, octets: int = 0, nullable: bool = True,
             mariadb: bool = False) -> Column | None:
    """Column ``i`` as its TABLE_MAP describes it, from information_schema's facts: DATA_TYPE (lower case), whether
    COLUMN_TYPE says unsigned or compressed, ENUM/SET labels, whether it is a binary string (no collation),
    its collation id, NUMERIC_PRECISION/SCALE, DATETIME_PRECISION, CHARACTER_OCTET_LENGTH, IS_NULLABLE. None for a
    type this module does not know (MariaDB's UUID, INET4, INET6). MariaDB's TABLE_MAP gives YEAR a SIGNEDNESS bit
    (its Field_year is a Field_tiny), unsigned, and GEOMETRY a charset (binary), that information_schema does not
    show."""

    def col(t: int, meta: int = 0, binlog_type: int | None = None, **kw: Any) -> Column:
        return Column(i, name, t, t if binlog_type is None else binlog_type, meta, nullable, **kw)

    if data_type in INTS:
        return col(INTS[data_type], unsigned=unsigned)
    if data_type == "float":
        return col(T.FLOAT, 4, unsigned=unsigned)
    if data_type in ("double", "real"):
        return col(T.DOUBLE, 8, unsigned=unsigned)
    if data_type == "decimal":
        return col(T.NEWDECIMAL, precision << 8 | scale, unsigned=unsigned)
    if data_type == "year":
        return col(T.YEAR, unsigned=True) if mariadb else col(T.YEAR)
    if data_type == "date":
        return col(T.DATE)
    if data_type in _TIMES:
        return col(_TIMES[data_type], fsp)
    if data_type == "bit":
        return col(T.BIT, (precision // 8) << 8 | precision % 8)
    if data_type == "enum":
        n = len(labels or ())
        return col(T.ENUM, T.ENUM << 8 | (1 if n < 256 else 2), T.STRING, collation=collation, enum_values=labels)
    if data_type == "set":
        size = (len(labels or ()) + 7) // 8
        return col(T.SET, T.SET << 8 | (8 if size > 4 else size), T.STRING, collation=collation, set_values=labels)
    text_collation = 63 if binary else collation
    if data_type in ("char", "binary"):
        meta = T.STRING << 8 | octets if octets < 256 else (T.STRING ^ ((octets & 0x300) >> 4)) << 8 | (octets & 0xFF)
        return col(T.STRING, meta, collation=text_collation)
    if data_type in ("varchar", "varbinary"):
        t = T.VARCHAR_COMPRESSED if compressed else T.VARCHAR
        return col(t, octets + (1 if compressed else 0), collation=text_collation)
    if data_type in BLOBS:
        return col(T.BLOB_COMPRESSED if compressed else T.BLOB, BLOBS[data_type], collation=text_collation)
    if data_type == "json":  # MySQL's binary JSON (MariaDB's JSON is LONGTEXT, above)
        return col(T.JSON, 4)
    if data_type.upper() in GEOMETRY_TYPES:  # MariaDB's TABLE_MAP gives it a charset: binary
        return col(T.GEOMETRY, 4, geometry_type=GEOMETRY_TYPES.index(data_type.upper()),
                   collation=63 if mariadb else None)
    if data_type == "vector":
        return col(T.VECTOR, 4)
    return None


# The type words of DDL for information_schema's DATA_TYPE (the parser keeps a type's first word: ddl.py).
_WORDS = {"integer": "int", "int4": "int", "int1": "tinyint", "int2": "smallint", "int3": "mediumint",
          "middleint": "mediumint", "int8": "bigint", "bool": "tinyint", "boolean": "tinyint", "dec": "decimal",
          "numeric": "decimal", "fixed": "decimal", "float4": "float", "float8": "double", "real": "double",
          "serial": "bigint", "geomcollection": "geometrycollection"}
Described = tuple[list[dict[str, Any]], list[list[int]] | None]  # a table's columns and key (history_columns)
_SIZED = ((1 << 8, "tiny"), (1 << 16, ""), (1 << 24, "medium"))  # TEXT(n), BLOB(n): the smallest type that holds n


def _args(c: ColumnDef) -> list[int]:
    try:
        return [int(a) for a in c.args.split(",")] if c.args else []
    except ValueError:
        return []


def history_column(i: int, c: ColumnDef, mariadb: bool, collations: Collations,
                   defaults: dict[str, int] | None = None) -> Column | None:
    """Column ``i`` as a FULL TABLE_MAP describes it, from the schema history's entry of it (``defaults``: the
    statement's default collations by charset); None for a type ``describe`` does not know."""
    word = _WORDS.get(c.type, c.type)
    args = _args(c)
    if word == "float" and len(args) == 1 and args[0] > 24:  # FLOAT(p): DOUBLE for p > 24
        word = "double"
    if word == "json" and mariadb:  # LONGTEXT utf8mb4_bin
        word = "longtext"
    if word in ("text", "blob") and args:
        size = args[0] * (MAX_CHAR_BYTES.get(c.charset or "", 1) if word == "text" else 1)
        word = next((prefix for limit, prefix in _SIZED if size < limit), "long") + word
    binary = word in BINARY_TYPES
    precision = scale = fsp = octets = 0
    if word == "decimal":
        precision, scale = (args + [10, 0][len(args):])[:2] if args else (10, 0)
    elif word == "bit":
        precision = args[0] if args else 1
    elif word in _TIMES:
        fsp = args[0] if args else 0
    elif word in ("char", "binary", "varchar", "varbinary"):
        octets = (args[0] if args else 1) * (1 if binary else MAX_CHAR_BYTES.get(c.charset or "", 1))
    collation = None
    if not binary and (word in TEXT_TYPES or word in BLOBS or word in ("enum", "set")):
        collation = collations.id_of(c.collation or c.charset, mariadb, defaults)
    return describe(i, c.name, word, unsigned=c.unsigned, compressed=c.compressed,
                    labels=c.enum_values if word == "enum" else c.set_values, binary=binary, collation=collation,
                    precision=precision, scale=scale, fsp=fsp, octets=octets, nullable=not c.not_null, mariadb=mariadb)


def history_columns(schema: TableSchema, mariadb: bool, collations: Collations,
                    defaults: dict[str, int] | None = None) -> Described | None:
    """A table's columns in a snapshot descriptor's form (``COLUMN_FIELDS``, and ``default``: a literal DEFAULT as
    text or a number, or ``default_expression``: the text of one only the server evaluates, CURRENT_TIMESTAMP...),
    and its key as the TABLE_MAP names it (``[[column index, prefix length]]``; None without one), from the schema
    history; None when a column's type is not one a descriptor knows. MariaDB's hidden hash columns of long UNIQUE
    indexes are not described (as information_schema does not)."""
    out = []
    for i, c in enumerate(schema.columns):
        column = history_column(i, c, mariadb, collations, defaults)
        if column is None:
            return None
        d: dict[str, Any] = {f: getattr(column, f) for f in COLUMN_FIELDS}
        if c.default and not c.generated:
            try:
                value = literal(c.default)
                if not isinstance(value, bytes):
                    d["default"] = value
            except Uncomputable:
                expression = default_text(c.default)
                if expression is not None:
                    d["default_expression"] = expression
        out.append(d)
    index = {c.name.lower(): i for i, c in enumerate(schema.columns)}
    key = [[index[k.lower()], schema.key_prefixes.get(k.lower(), 0) if schema.primary_key else 0]
           for k in schema.key(frozenset(), mariadb) if k.lower() in index]
    return out, key or None
