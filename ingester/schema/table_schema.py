"""A table's columns and indexes as the schema history keeps them (what decides how a rows event decodes), and
the character-set rules of string columns. The DDL parser (ddl.py) builds them; the history (history.py) keeps
them per table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..codec.charsets import charset_of


@dataclass
class ColumnDef:
    name: str
    type: str  # the declared type's first word, lower case: int, varchar, enum, ...
    unsigned: bool = False
    enum_values: list[str] | None = None
    set_values: list[str] | None = None
    charset: str | None = None  # string columns: utf8mb4, latin1, ..., binary; None: not a string, or unknown
    # What the server fills existing rows with when the column is added (the land job's mirrors need it; the
    # history's entries keep the DEFAULT for the Debezium formats' schemas); not part of equality.
    args: str = field(default="", compare=False)  # the type's arguments: "10,2", "3"
    default: list[tuple[str, str]] | None = field(default=None, compare=False)  # DEFAULT's tokens
    not_null: bool = False  # NOT NULL, or part of the primary key (which of the table's UNIQUE indexes is its key)
    generated: bool = field(default=False, compare=False)  # AS (expr) / GENERATED ALWAYS AS
    # A text type declared without a character set: it takes the table's default (the parser's, until resolved).
    default_charset: bool = field(default=False, compare=False)
    unique: bool = field(default=False, compare=False)  # declared UNIQUE: the statement adds an index of it
    # What Debezium's schema change events describe too (records/debezium/schema_change.py); not of equality.
    auto_increment: bool = field(default=False, compare=False)
    comment: str | None = field(default=None, compare=False)
    # The collation of a text, ENUM or SET column (what a FULL TABLE_MAP names by id): a collation's name
    # (utf8mb4_bin), or a charset's (utf8mb4: that charset's default collation); None: not known, or not a string.
    # Declared by COLLATE, else inherited with the charset. Not of equality (entries of older binlakes lack it).
    collation: str | None = field(default=None, compare=False)
    binary_collation: bool = field(default=False, compare=False)  # CHAR(3) BINARY: the charset's _bin collation
    compressed: bool = field(default=False, compare=False)  # MariaDB's COMPRESSED columns

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name, "type": self.type, "unsigned": self.unsigned, "enum_values": self.enum_values,
            "set_values": self.set_values, "charset": self.charset, "not_null": self.not_null}
        if self.default is not None:
            out["default"] = self.default
        # described when declared (entries of columns without them stay as older binlakes wrote them)
        for key, value in (("args", self.args), ("auto_increment", self.auto_increment), ("comment", self.comment),
                           ("collation", self.collation), ("compressed", self.compressed),
                           ("generated", self.generated)):
            if value:
                out[key] = value
        return out


@dataclass
class Index:
    """A table's index other than its primary key, as the server keeps it: enough to follow which UNIQUE index
    the server uses in place of a missing primary key, and the names later DDL refers to."""

    name: str  # "" until the statement's indexes are named (one declared without a name takes its first column's)
    columns: list[tuple[str, int]]  # (column, prefix length; 0: the whole column); ("", 0): an expression
    unique: bool = False
    hash: bool = False  # MariaDB's long UNIQUE (USING HASH, or a BLOB/TEXT column without a prefix length)
    fulltext: bool = False
    generated: bool = field(default=False, compare=False)  # a FOREIGN KEY's own: dropped once another index serves

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "columns": [list(c) for c in self.columns], "unique": self.unique,
                "hash": self.hash, "fulltext": self.fulltext}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Index:
        return cls(d["name"], [(c, int(p)) for c, p in d["columns"]], d["unique"], d["hash"], d["fulltext"])


# Type words whose values are strings: binary ones, and text ones that have a character set.
BINARY_TYPES = frozenset(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"))
TEXT_TYPES = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"))
_AS_BINARY = dict(zip(("char", "varchar", "tinytext", "text", "mediumtext", "longtext"),
                      ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), strict=True))


def string_charset(type_word: str, charset: str | None) -> str | None:
    """The charset a column of this type has, given the one declared or reported (None for text without
    one yet): ``binary`` for the binary types, utf8mb4 for JSON (MariaDB's is LONGTEXT utf8mb4_bin, MySQL's
    is not a string in the binlog), None for types that are not strings (ENUM/SET decode as labels)."""
    if type_word in BINARY_TYPES:
        return "binary"
    if type_word in TEXT_TYPES:
        return None if charset is None else charset_of(charset)
    return "utf8mb4" if type_word == "json" else None


def with_charset(column: ColumnDef, charset: str | None, collation: str | None = None) -> None:
    """Give a text column a charset (the server turns text of charset ``binary`` into the binary type), and a text,
    ENUM or SET column its collation: ``collation`` (a collation's name, or a charset's for its default; None: the
    charset's default), ``<charset>_bin`` for a column declared BINARY."""
    if charset == "binary" and column.type in _AS_BINARY:
        column.type = _AS_BINARY[column.type]
    column.charset = string_charset(column.type, charset)
    column.default_charset = False
    if column.type in BINARY_TYPES:
        column.collation = "binary"
    elif column.type in TEXT_TYPES or column.type in ("enum", "set"):
        named = charset_of(charset) if charset is not None else None
        if column.binary_collation and named is not None and named != "binary":
            column.collation = f"{named}_bin"
        elif collation is not None and (named is None or charset_of(collation) == named):
            column.collation = collation.lower()
        else:
            column.collation = named
    elif column.type == "json":
        column.collation = "utf8mb4_bin"


@dataclass
class TableSchema:
    columns: list[ColumnDef]
    primary_key: list[str] = field(default_factory=list)
    charset: str | None = None  # the table's default character set (None: not known)
    indexes: list[Index] = field(default_factory=list)  # in the server's order (``table_alter.settle``)
    comment: str | None = field(default=None, compare=False)  # COMMENT (Debezium's schema change events say it)
    # the table's default collation (a collation's name, or a charset's for its default; None: the charset's)
    collation: str | None = field(default=None, compare=False)
    # prefix lengths of primary-key columns indexed by a prefix (lower-cased name -> length): the TABLE_MAP's key
    key_prefixes: dict[str, int] = field(default_factory=dict, compare=False)

    def index(self, name: str) -> int:
        """Position of a column (names are case-insensitive); -1 when absent."""
        low = name.lower()
        return next((i for i, c in enumerate(self.columns) if c.name.lower() == low), -1)

    def copy(self) -> TableSchema:
        return TableSchema([ColumnDef(c.name, c.type, c.unsigned, c.enum_values, c.set_values, c.charset, c.args,
                                      c.default, c.not_null, c.generated, auto_increment=c.auto_increment,
                                      comment=c.comment, collation=c.collation, compressed=c.compressed)
                            for c in self.columns], list(self.primary_key),
                           self.charset, [Index(i.name, list(i.columns), i.unique, i.hash, i.fulltext, i.generated)
                                          for i in self.indexes], self.comment, self.collation,
                           dict(self.key_prefixes))

    def key(self, nullable: frozenset[str] = frozenset(), mariadb: bool = True) -> list[str]:
        """The columns that identify a row: the primary key, or without one the UNIQUE index the server uses
        in its place (InnoDB clusters the table by it, FULL row metadata reports it as the primary key): one
        whose columns are all NOT NULL and indexed whole (no prefix, not MariaDB's long hash) -- MariaDB's
        first index if it is such, MySQL's first such index. ``nullable``: lower-cased names of columns the
        TABLE_MAP says are nullable (the server's word beats the history's). [] when there is none."""
        if self.primary_key:
            return list(self.primary_key)
        not_null = {c.name.lower() for c in self.columns if c.not_null} - nullable
        for ix in self.indexes[:1] if mariadb else self.indexes:
            if ix.unique and not ix.hash and all(c and not p and c.lower() in not_null for c, p in ix.columns):
                return [c for c, _ in ix.columns]
        return []

    def resolve(self, table_charset: str | None, table_collation: str | None = None) -> None:
        """Give text columns declared without a charset the table's default (``table_charset``, and its collation),
        and ENUM/SET columns declared without one the table's collation."""
        for c in self.columns:
            if c.default_charset:
                with_charset(c, table_charset, table_collation)
