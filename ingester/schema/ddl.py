"""A parser of the MySQL/MariaDB DDL that changes a table's columns (sans-I/O: text in, operations out).

Servers with ``binlog_row_metadata`` MINIMAL (or NO_LOG) write TABLE_MAPs without column names, ENUM/SET
labels, character sets or primary keys, so the daemon follows each table's columns through the DDL of
the binlog. Only what decides how a rows event decodes is tracked: column order and names, signedness,
ENUM/SET labels, the character set of string columns (``binary`` for BINARY/VARBINARY/BLOB; the table's
and the database's defaults, which a text column without its own takes), the primary key, and the indexes
with their columns' nullability (the table's key, when it has no primary key: a UNIQUE index of NOT NULL
columns). Statements that change neither columns nor indexes (GRANT, ...) are not DDL here; a
column-changing statement this parser does not understand raises ``UnparsedDDL`` rather than guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..codec.charsets import charset_of

_TOKEN = re.compile(r"""
    (?P<ws>\s+|--[ \t][^\n]*|--\n|\#[^\n]*)
  | (?P<vcomment>/\*[M]?!\d*)                     # executable comment: its text is part of the statement
  | (?P<comment>/\*.*?\*/)
  | (?P<vend>\*/)
  | (?P<qid>`(?:[^`]|``)*`)
  | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<word>[A-Za-z0-9_$\u0080-\U0010ffff]+)
  | (?P<op>.)
""", re.X | re.S)
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_DDL = re.compile(r"^\s*(?:/\*.*?\*/\s*)*(CREATE|ALTER|RENAME|DROP|TRUNCATE)\b", re.I | re.S)


class UnparsedDDL(Exception):
    """A statement that changes tables in a way this parser cannot follow; ``tables`` are the ones it names,
    ``kind`` what the statement is as far as it was read (``create``, ``alter``, ...; "" unknown) and ``replace``
    whether it is a CREATE OR REPLACE."""

    def __init__(self, message: str, tables: list[tuple[str, str]], kind: str = "", replace: bool = False) -> None:
        super().__init__(message)
        self.tables = tables
        self.kind = kind
        self.replace = replace


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


_SYNONYMS = {
    ("character",): "char", ("char", "varying"): "varchar", ("character", "varying"): "varchar",
    ("varcharacter",): "varchar", ("long",): "mediumtext", ("long", "varchar"): "mediumtext",
    ("long", "varbinary"): "mediumblob", ("char", "byte"): "binary", ("double", "precision"): "double",
}


def _type_of(words: list[str]) -> tuple[str, str | None]:
    """The type word of a type's spelling (``character varying`` -> varchar) and the charset it implies
    (NATIONAL / NCHAR: utf8mb3)."""
    national = words[0] in ("national", "nchar", "nvarchar")
    if national:
        words = ["varchar" if {"nvarchar", "varchar", "varying"} & set(words) else "char"]
    return _SYNONYMS.get(tuple(words), words[0]), "utf8mb3" if national else None


@dataclass
class TableSchema:
    columns: list[ColumnDef]
    primary_key: list[str] = field(default_factory=list)
    charset: str | None = None  # the table's default character set (None: not known)
    indexes: list[Index] = field(default_factory=list)  # in the server's order (``history.settle``)
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


Name = tuple[str, str]  # (database, table)
Position = tuple[str, str] | None  # None: at the end; ("first", ""), ("after", column)


@dataclass
class AddColumn:
    column: ColumnDef
    position: Position = None
    if_not_exists: bool = False


@dataclass
class DropColumn:
    name: str
    if_exists: bool = False


@dataclass
class ChangeColumn:  # CHANGE and MODIFY (old name == new name)
    old: str
    column: ColumnDef
    position: Position = None
    if_exists: bool = False


@dataclass
class RenameColumn:
    old: str
    new: str


@dataclass
class ColumnDefault:  # ALTER [COLUMN] c SET DEFAULT x | DROP DEFAULT
    name: str
    default: list[tuple[str, str]] | None  # None: dropped


@dataclass
class TableCharset:  # [DEFAULT] CHARACTER SET / COLLATE: the default of columns added later
    charset: str | None  # None: the database's default
    collation: str | None = None  # COLLATE's name (None: the charset's default)


@dataclass
class TableComment:  # COMMENT [=] 'text'
    comment: str


@dataclass
class ConvertCharset:  # CONVERT TO CHARACTER SET: every text column, and the table's default
    charset: str | None  # None: the database's default
    collation: str | None = None  # COLLATE's name (None: the charset's default)


@dataclass
class AddPrimaryKey:
    columns: list[str]
    prefixes: dict[str, int] = field(default_factory=dict)  # lower-cased column -> prefix length, where indexed by one


@dataclass
class DropPrimaryKey:
    pass


@dataclass
class AddIndex:  # [UNIQUE|FULLTEXT|SPATIAL] INDEX, a column's UNIQUE, a FOREIGN KEY's own index
    index: Index
    if_not_exists: bool = False


@dataclass
class DropIndex:  # DROP INDEX|KEY|CONSTRAINT name
    name: str
    constraint: bool = False  # DROP CONSTRAINT: the name may be a CHECK's or a FOREIGN KEY's, whose index stays


@dataclass
class RenameIndex:
    old: str
    new: str


AlterSpec = (AddColumn | DropColumn | ChangeColumn | RenameColumn | ColumnDefault | AddPrimaryKey | DropPrimaryKey
             | TableCharset | ConvertCharset | AddIndex | DropIndex | RenameIndex | TableComment)


@dataclass
class CreateTable:
    name: Name
    schema: TableSchema  # its charset: the table option's (None: the database's default); columns unresolved
    if_not_exists: bool = False
    replace: bool = False  # CREATE OR REPLACE (MariaDB): the table of that name, if any, dropped first


@dataclass
class CreateTableLike:
    name: Name
    source: Name
    if_not_exists: bool = False
    replace: bool = False


# Partition maintenance's actions (ALTER TABLE ... <ACTION> PARTITION ...), as table statement entries name them.
# "repartition" is PARTITION BY, "remove" REMOVE PARTITIONING; "convert_to_table" MariaDB's CONVERT PARTITION p TO
# TABLE t2 (the partition's rows become table t2), "convert_from_table" CONVERT TABLE t2 TO PARTITION p (t2's rows
# become partition p; t2 is gone). ANALYZE, CHECK, OPTIMIZE and REPAIR PARTITION change nothing: no Partition.
PARTITION_ACTIONS = ("truncate", "drop", "exchange", "reorganize", "coalesce", "add", "remove", "rebuild",
                     "repartition", "discard", "import", "convert_to_table", "convert_from_table")


@dataclass
class Partition:
    action: str  # one of PARTITION_ACTIONS
    names: list[str] = field(default_factory=list)  # the partitions named ([]: ALL, or none named)
    with_table: Name | None = None  # EXCHANGE's and CONVERT's other table
    count: int | None = None  # COALESCE PARTITION n, ADD PARTITION PARTITIONS n


@dataclass
class AlterTable:
    name: Name
    specs: list[AlterSpec]
    rename_to: Name | None = None
    partition: Partition | None = None  # partition maintenance (no other clause comes with it)


@dataclass
class RenameTables:
    pairs: list[tuple[Name, Name]]


@dataclass
class DropTables:
    names: list[Name]


@dataclass
class DropDatabase:
    database: str


@dataclass
class DatabaseCharset:  # CREATE DATABASE, ALTER DATABASE: the default of tables created later
    database: str
    charset: str | None  # None: the server's default (CREATE without a charset); ALTER without one is no op
    create: bool = False
    if_not_exists: bool = False
    collation: str | None = None  # COLLATE's name (None: the charset's default)


@dataclass
class TruncateTable:  # rows go, columns stay
    name: Name


Operation = (CreateTable | CreateTableLike | AlterTable | RenameTables | DropTables | DropDatabase | DatabaseCharset
             | TruncateTable)


def tokens(sql: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: word, qid (text unquoted), str (text unescaped), op. Comments are dropped,
    executable comments (``/*!50100 ... */``) kept as the statement they belong to."""
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        text = m.group()
        if kind in ("ws", "comment", "vcomment", "vend"):
            continue
        if kind == "qid":
            out.append(("qid", text[1:-1].replace("``", "`")))
        elif kind == "str":
            out.append(("str", _unquote(text)))
        else:
            out.append((kind, text))  # type: ignore[arg-type]
    return out


def default_text(toks: list[tuple[str, str]] | None) -> str | None:
    """A DEFAULT's text as written, a string literal unquoted (``'x'`` -> ``x``); None without one, or NULL."""
    if not toks or (len(toks) == 1 and toks[0] == ("word", "NULL")) or [t.upper() for _, t in toks] == ["NULL"]:
        return None
    if len(toks) == 1 and toks[0][0] == "str":
        return toks[0][1]
    return "".join(text for _, text in toks)


def _unquote(text: str) -> str:
    q, body, out, i = text[0], text[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        elif ch == q and i + 1 < len(body) and body[i + 1] == q:
            out.append(q)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_ddl(sql: str, default_db: str) -> list[Operation]:
    """The column-changing operations of one statement ([] for statements that change no columns).

    ``default_db`` qualifies unqualified table names (the QUERY event's database)."""
    if not _DDL.match(sql):
        return []
    return _Parser(tokens(sql), default_db, sql).statement()


class _Parser:
    def __init__(self, toks: list[tuple[str, str]], default_db: str, sql: str) -> None:
        self.toks = toks
        self.i = 0
        self.db = default_db
        self.sql = sql
        self.names: list[Name] = []  # tables named so far, for error reports
        self.comment: str | None = None  # the table options' COMMENT, read by charset_options
        self.collation: str | None = None  # the table options' COLLATE, read by charset_options
        self.kind = ""  # what the statement is, once known (UnparsedDDL.kind)
        self.replace = False  # CREATE OR REPLACE

    # -- token helpers

    def peek(self, k: int = 0) -> str:
        """The upper-cased word (or op) at i + k; "" for quoted identifiers, strings and the end."""
        j = self.i + k
        if j >= len(self.toks):
            return ""
        kind, text = self.toks[j]
        return text.upper() if kind in ("word", "op") else ""

    def at_end(self) -> bool:
        return self.i >= len(self.toks) or self.peek() == ";"

    def accept(self, *words: str) -> bool:
        """Consume the given words if they come next."""
        if all(self.peek(k) == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            self.fail(f"expected {' '.join(words)}")

    def fail(self, what: str) -> None:
        near = " ".join(t for _, t in self.toks[self.i : self.i + 4]) or "the end"
        raise UnparsedDDL(f"{what} near {near!r}", self.names, self.kind, self.replace)

    def ident(self) -> str:
        if self.i >= len(self.toks):
            self.fail("expected a name")
        kind, text = self.toks[self.i]
        if kind not in ("word", "qid") and not (kind == "str" and text):
            self.fail("expected a name")
        self.i += 1
        return text

    def table_name(self) -> Name:
        first = self.ident()
        if self.peek() == ".":
            self.i += 1
            name = (first, self.ident())
        else:
            name = (self.db, first)
        self.names.append(name)
        return name

    def skip_parens(self) -> None:
        """Skip a parenthesised group starting at the current "("."""
        depth = 0
        while self.i < len(self.toks):
            p = self.peek()
            self.i += 1
            if p == "(":
                depth += 1
            elif p == ")":
                depth -= 1
                if depth == 0:
                    return
        self.fail("unbalanced parentheses")

    def skip_item(self) -> None:
        """Skip to the "," or ")" that ends the current item (not consumed), over nested parentheses."""
        while not self.at_end() and self.peek() not in (",", ")"):
            if self.peek() == "(":
                self.skip_parens()
            else:
                self.i += 1

    # -- statements

    def statement(self) -> list[Operation]:
        if self.accept("CREATE"):
            replace = self.accept("OR", "REPLACE")
            if self.accept("DATABASE") or self.accept("SCHEMA"):
                if_not_exists = self.accept("IF", "NOT", "EXISTS")
                name = self.ident()
                given, charset = self.charset_options(in_item=False)
                return [DatabaseCharset(name, charset if given else None, True, if_not_exists,
                                        self.collation if given else None)]
            if self.accept("TEMPORARY"):
                return []  # session-local: not replicated as rows
            self.accept("ONLINE") or self.accept("OFFLINE")
            kind = next((w for w in ("UNIQUE", "FULLTEXT", "SPATIAL") if self.accept(w)), "")
            if self.accept("INDEX"):
                return [self.create_index(kind, replace)]
            if not self.accept("TABLE"):
                return []  # VIEW, PROCEDURE, ...: no table changes
            self.kind, self.replace = "create", replace
            return [self.create_table()]
        if self.accept("ALTER"):
            if self.accept("DATABASE") or self.accept("SCHEMA"):
                named = self.i < len(self.toks) and (self.toks[self.i][0] == "qid" or self.peek() not in (
                    "DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "READ", "ENCRYPTION", "UPGRADE"))
                name = self.ident() if named else self.db
                given, charset = self.charset_options(in_item=False)
                return [DatabaseCharset(name, charset, collation=self.collation)] if given and charset is not None \
                    else []
            while self.accept("ONLINE") or self.accept("IGNORE"):
                pass
            if not self.accept("TABLE"):
                return []
            self.kind = "alter"
            return [self.alter_table()]
        if self.accept("RENAME"):
            if not self.accept("TABLE") and not self.accept("TABLES"):
                return []  # RENAME USER
            self.kind = "rename"
            self.accept("IF", "EXISTS")
            pairs = []
            while True:
                old = self.table_name()
                self.wait()
                self.expect("TO")
                pairs.append((old, self.table_name()))
                if not self.accept(","):
                    break
            self.end()
            return [RenameTables(pairs)]
        if self.accept("DROP"):
            if self.accept("DATABASE") or self.accept("SCHEMA"):
                self.accept("IF", "EXISTS")
                return [DropDatabase(self.ident())]
            if self.accept("TEMPORARY"):
                return []
            self.accept("ONLINE") or self.accept("OFFLINE")
            if self.accept("INDEX"):  # [IF EXISTS] name ON table [ALGORITHM|LOCK|WAIT ...]
                self.accept("IF", "EXISTS")
                name = self.ident()
                self.expect("ON")
                return [AlterTable(self.table_name(), [self.drop_index(name, False)])]
            if not self.accept("TABLE") and not self.accept("TABLES"):
                return []
            self.kind = "drop"
            self.accept("IF", "EXISTS")
            names = [self.table_name()]
            while self.accept(","):
                names.append(self.table_name())
            self.wait()
            self.accept("RESTRICT") or self.accept("CASCADE")
            self.end()
            return [DropTables(names)]
        if self.accept("TRUNCATE"):  # rows go, columns stay
            self.kind = "truncate"
            self.accept("TABLE")
            truncated = self.table_name()
            self.wait()
            self.end()
            return [TruncateTable(truncated)]
        return []

    def wait(self) -> None:
        if self.accept("WAIT"):
            self.i += 1
        else:
            self.accept("NOWAIT")

    def end(self) -> None:
        if not self.at_end():
            self.fail("unexpected text")

    def create_table(self) -> Operation:
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = self.table_name()
        if self.accept("LIKE") or self.accept("(", "LIKE"):
            source = self.table_name()
            self.accept(")")
            self.end()
            return CreateTableLike(name, source, if_not_exists, self.replace)
        if not self.accept("("):
            self.fail("CREATE TABLE without column definitions")
        schema = TableSchema([])
        while True:
            self.create_definition(schema)
            if self.accept(")"):
                break
            self.expect(",")
        # Table options and partitioning change no columns but the default charset; a SELECT would add
        # columns we cannot see.
        given, charset = self.charset_options(in_item=False)
        schema.charset = charset if given else None
        schema.collation = self.collation if given else None
        schema.comment = self.comment
        return CreateTable(name, schema, if_not_exists, self.replace)

    def create_index(self, kind: str, replace: bool) -> Operation:
        """``CREATE [OR REPLACE] [UNIQUE|FULLTEXT|SPATIAL] INDEX [IF NOT EXISTS] name [USING t] ON table
        (key parts) [options]``: an ALTER TABLE that adds the index (OR REPLACE: in place of the one of that
        name)."""
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = self.ident()
        using_hash = self.index_options(until_parts=True)
        self.expect("ON")
        table = self.table_name()
        index = Index(name, self.key_parts(), kind == "UNIQUE", fulltext=kind == "FULLTEXT")
        index.hash = (self.index_options(until_parts=False) or using_hash) and index.unique
        specs: list[AlterSpec] = [DropIndex(name)] if replace else []
        return AlterTable(table, [*specs, AddIndex(index, if_not_exists)])

    def drop_index(self, name: str, constraint: bool) -> AlterSpec:
        return DropPrimaryKey() if name.upper() == "PRIMARY" else DropIndex(name, constraint)

    def charset_options(self, in_item: bool) -> tuple[bool, str | None]:
        """Skip table or database options (to the end, or with ``in_item`` to the "," that ends an ALTER
        TABLE clause) and read their charset: ``[DEFAULT] CHARACTER SET|CHARSET [=] x``, ``COLLATE [=] y``.
        Whether one was given, and which (None: DEFAULT, the database's or the server's). A COMMENT is kept
        in ``self.comment``, COLLATE's name in ``self.collation``."""
        self.comment = None
        self.collation = None
        charset: str | None = None
        collated: str | None = None
        given = collate_given = False
        while not self.at_end() and not (in_item and self.peek() == ","):
            word = self.peek()
            if word in ("SELECT", "AS", "WITH", "TABLE", "VALUES") and not in_item:
                self.fail("CREATE TABLE ... SELECT")
            if word == "(":
                self.skip_parens()
                continue
            self.i += 1
            if word == "CHARSET" or (word == "CHARACTER" and self.accept("SET")):
                given, charset = True, self.charset_name()
            elif word == "COLLATE":
                self.collation = self.collation_name()
                collate_given, collated = True, charset_of(self.collation) if self.collation else None
            elif word == "COMMENT":
                self.accept("=")
                if self.i < len(self.toks) and self.toks[self.i][0] == "str":
                    self.comment = self.toks[self.i][1]
                    self.i += 1
        return given or collate_given, charset if given else collated

    def charset_name(self) -> str | None:
        """After CHARACTER SET or COLLATE: the charset (of a collation) named next; None for DEFAULT."""
        named = self.collation_name()
        return None if named is None else charset_of(named)

    def collation_name(self) -> str | None:
        """After CHARACTER SET or COLLATE: the name given, lower case (``utf8`` is ``utf8mb3``); None for DEFAULT."""
        self.accept("=")
        if self.peek() == "DEFAULT":
            self.i += 1
            return None
        name = self.ident().lower()
        return "utf8mb3" + name[4:] if name == "utf8" or name.startswith("utf8_") else name

    _CONSTRAINTS = frozenset(("CONSTRAINT", "PRIMARY", "UNIQUE", "KEY", "INDEX", "FULLTEXT", "SPATIAL", "FOREIGN",
                              "CHECK"))

    def is_constraint(self) -> bool:
        kind = self.toks[self.i][0] if self.i < len(self.toks) else ""
        return kind == "word" and (self.peek() in self._CONSTRAINTS or (self.peek() == "PERIOD"
                                                                          and self.peek(1) == "FOR"))

    def create_definition(self, schema: TableSchema) -> None:
        if self.is_constraint():
            spec = self.constraint()
            if isinstance(spec, AddPrimaryKey):
                schema.primary_key = spec.columns
                schema.key_prefixes = dict(spec.prefixes)
            elif spec is not None:
                schema.indexes.append(spec.index)
            return
        column, primary = self.column_definition()
        schema.columns.append(column)
        if primary:
            schema.primary_key = [column.name]
        if column.unique:
            schema.indexes.append(_unique_of(column))

    def constraint(self) -> AddPrimaryKey | AddIndex | None:
        """An index or constraint definition: the primary key, an index (UNIQUE or not, a FOREIGN KEY's own),
        or None (CHECK, PERIOD FOR)."""
        symbol = ""
        if self.accept("CONSTRAINT"):
            self.accept("IF", "NOT", "EXISTS")
            quoted = self.i < len(self.toks) and self.toks[self.i][0] != "word"
            if quoted or self.peek() not in self._CONSTRAINTS or self.peek() == "CONSTRAINT":
                symbol = self.ident()
        if self.accept("PRIMARY", "KEY"):
            self.index_options(until_parts=True)
            parts = self.key_parts()
            self.index_options(until_parts=False)
            return AddPrimaryKey([c for c, _ in parts], {c.lower(): p for c, p in parts if p})
        if self.accept("FOREIGN", "KEY"):  # its index, unless one the table has serves it
            self.accept("IF", "NOT", "EXISTS")
            name = "" if self.peek() == "(" else self.ident()
            parts = self.key_parts()
            self.skip_item()  # REFERENCES ..., ON DELETE ...
            return AddIndex(Index(symbol or name, parts, generated=True))
        unique = self.accept("UNIQUE")
        fulltext = self.accept("FULLTEXT")
        if not (unique or fulltext or self.accept("SPATIAL") or self.peek() in ("INDEX", "KEY")):
            self.skip_item()  # CHECK (...), PERIOD FOR ...
            return None
        self.accept("INDEX") or self.accept("KEY")
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = symbol
        if self.peek() not in ("(", "USING"):
            name = self.ident()
        using_hash = self.index_options(until_parts=True)
        parts = self.key_parts()
        using_hash = self.index_options(until_parts=False) or using_hash
        return AddIndex(Index(name, parts, unique, using_hash and unique, fulltext), if_not_exists)

    def key_parts(self) -> list[tuple[str, int]]:
        """``(column [(prefix length)] [ASC|DESC], ...)``; a part in parentheses is an expression (MySQL's
        functional key parts), ("", 0)."""
        self.expect("(")
        parts = []
        while True:
            if self.peek() == "(":
                self.skip_parens()
                parts.append(("", 0))
            else:
                column, prefix = self.ident(), 0
                if self.accept("("):
                    length = self.ident()
                    if not length.isdigit():
                        self.fail(f"a prefix length of {column} that is not a number")
                    prefix = int(length)
                    self.expect(")")
                parts.append((column, prefix))
            self.skip_item()  # ASC/DESC
            if self.accept(")"):
                return parts
            self.expect(",")

    def index_options(self, until_parts: bool) -> bool:
        """Skip an index's type and options (``until_parts``: those before its key parts); whether they
        say USING HASH."""
        using_hash = False
        while not self.at_end() and self.peek() not in (",", ")") and not (until_parts and self.peek() in ("(", "ON")):
            if self.peek() == "(":
                self.skip_parens()
                continue
            if self.accept("USING") or self.accept("TYPE"):
                using_hash = using_hash or self.accept("HASH")
                continue
            self.i += 1
        return using_hash

    def column_definition(self) -> tuple[ColumnDef, bool]:
        """``name type [attributes]``; whether it declares the primary key."""
        name = self.ident()
        if self.i >= len(self.toks) or self.toks[self.i][0] != "word":
            self.fail(f"column {name} without a type")
        type_word = self.toks[self.i][1].lower()
        self.i += 1
        column = ColumnDef(name, type_word)
        charset: str | None = None  # declared
        collated: str | None = None  # COLLATE's name
        if type_word == "serial":  # BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
            column.type, column.unsigned, column.not_null, column.unique = "bigint", True, True, True
            column.auto_increment = True
        else:  # DOUBLE PRECISION, CHARACTER VARYING, NATIONAL CHAR [VARYING], NCHAR VARCHAR, LONG VARCHAR, CHAR BYTE
            words = [type_word]
            while (words[-1] in ("double", "character", "national", "long", "char", "nchar") and self.peek() in (
                    "PRECISION", "VARYING", "CHAR", "CHARACTER", "VARCHAR", "VARBINARY", "BYTE")
                   and self.peek(1) != "SET"):  # CHAR CHARACTER SET x: CHAR of one character
                words.append(self.peek().lower())
                self.i += 1
            column.type, charset = _type_of(words)
        if self.peek() == "(":
            if type_word in ("enum", "set"):
                self.i += 1
                labels = []
                while True:
                    if self.i >= len(self.toks) or self.toks[self.i][0] != "str":
                        self.fail(f"{type_word.upper()} column {name} with a label that is not a string")
                    labels.append(self.toks[self.i][1])
                    self.i += 1
                    if self.accept(")"):
                        break
                    self.expect(",")
                if type_word == "enum":
                    column.enum_values = labels
                else:
                    column.set_values = labels
            else:
                start = self.i
                self.skip_parens()
                column.args = "".join(t for _, t in self.toks[start + 1 : self.i - 1])
        primary = False
        while not self.at_end() and self.peek() not in (",", ")"):
            word = self.peek()
            if word == "(":
                self.skip_parens()
                continue
            self.i += 1
            if word == "CHARSET" or (word == "CHARACTER" and self.accept("SET")):
                charset = self.charset_name()
            elif word == "COLLATE":
                collated = self.collation_name()  # CHARACTER SET, when given too, names the same charset
                charset = charset or (charset_of(collated) if collated else None)
            elif word in ("ASCII", "UNICODE", "BYTE"):  # CHAR(1) ASCII: latin1; UNICODE: ucs2; BYTE: binary
                charset = {"ASCII": "latin1", "UNICODE": "ucs2", "BYTE": "binary"}[word]
            elif word == "BINARY":  # CHAR(3) BINARY: the charset's binary collation
                column.binary_collation = True
            elif word == "COMPRESSED":
                column.compressed = True
            elif word in ("UNSIGNED", "ZEROFILL"):
                column.unsigned = True
            elif word == "SIGNED":
                column.unsigned = False
            elif word == "PRIMARY" and self.peek() == "KEY":
                self.i += 1
                primary = column.not_null = True
            elif word == "NOT" and self.peek() == "NULL":
                self.i += 1
                column.not_null = True
            elif word in ("AS", "GENERATED"):
                column.generated = True
            elif word == "DEFAULT" and not self.at_end():
                column.default = self.default_value()
            elif word == "UNIQUE":
                self.accept("KEY")
                column.unique = True
            elif word == "SERIAL" and self.accept("DEFAULT", "VALUE"):  # NOT NULL AUTO_INCREMENT UNIQUE
                column.not_null = column.unique = column.auto_increment = True
            elif word == "AUTO_INCREMENT":
                column.auto_increment = True
            elif word == "COMMENT" and self.i < len(self.toks) and self.toks[self.i][0] == "str":
                column.comment = self.toks[self.i][1]
                self.i += 1
            elif word == "NULL":
                column.not_null = False
            elif word == "KEY":  # KEY alone in a column definition is PRIMARY KEY
                primary = True
            elif word in ("FIRST", "AFTER"):
                self.i -= 1  # positions belong to ALTER TABLE, which reads them
                break
            elif word in ("COMMENT", "ON", "REFERENCES") and not self.at_end():
                # The next token is a value or a name, never an attribute.
                if self.peek() == "(":
                    self.skip_parens()
                else:
                    self.i += 1
        if (column.type in TEXT_TYPES or column.type in ("enum", "set")) and charset is None:
            column.default_charset = True  # the table's, and its collation
        else:
            with_charset(column, charset, collated)
        return column, primary

    def default_value(self) -> list[tuple[str, str]]:
        """The tokens of a DEFAULT value: a literal (signed number, string with an introducer, b'..'),
        a function call (CURRENT_TIMESTAMP(6)) or a parenthesised expression."""
        start = self.i
        while self.peek() in ("-", "+"):
            self.i += 1
        if self.peek() == "(":
            self.skip_parens()
            return self.toks[start : self.i]
        if self.peek() == ".":  # .5
            self.i += 1
        kind, text = self.toks[self.i]
        self.i += 1
        if self.peek() == "(":  # NOW(), CURRENT_TIMESTAMP(6)
            self.skip_parens()
        elif kind == "word" and self.i < len(self.toks) and self.toks[self.i][0] == "str":
            self.i += 1  # _utf8mb4'x', b'101', x'ff', DATE '2024-01-01'
        elif kind == "word" and text[:1].isdigit():  # 1.5, 1.5e-3: the tokenizer splits numbers at . and -
            prev = text
            while self.i < len(self.toks):
                k, t = self.toks[self.i]
                dot = k == "op" and t == "." and prev != "."
                sign = k == "op" and t in ("-", "+") and prev[-1:] in "eE"
                if not (dot or sign or (k == "word" and prev in (".", "-", "+"))):
                    break
                prev = t
                self.i += 1
        return self.toks[start : self.i]

    # -- ALTER TABLE

    def alter_table(self) -> Operation:
        self.accept("IF", "EXISTS")
        name = self.table_name()
        self.wait()
        op = AlterTable(name, [])
        if self.at_end():
            return op
        while True:
            self.alter_spec(op)
            if not self.accept(","):
                break
        self.end()
        return op

    def position(self) -> Position:
        if self.accept("FIRST"):
            return ("first", "")
        if self.accept("AFTER"):
            return ("after", self.ident())
        return None

    _HARMLESS = frozenset((
        "ALGORITHM", "LOCK", "FORCE", "ENGINE", "ORDER", "DISCARD", "IMPORT", "ENABLE", "DISABLE",
        "DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "AUTO_INCREMENT", "ROW_FORMAT", "KEY_BLOCK_SIZE",
        "PARTITION", "REMOVE", "COALESCE", "REORGANIZE", "EXCHANGE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD",
        "REPAIR", "TRUNCATE", "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "AVG_ROW_LENGTH",
        "MAX_ROWS", "MIN_ROWS", "PACK_KEYS", "CHECKSUM", "DELAY_KEY_WRITE", "INSERT_METHOD", "DATA", "INDEX",
        "CONNECTION", "PASSWORD", "TABLESPACE", "STORAGE", "UNION", "ENCRYPTION", "ENCRYPTED", "ENCRYPTION_KEY_ID",
        "PAGE_CHECKSUM", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "TRANSACTIONAL", "SEQUENCE", "CONVERT",
        "SECONDARY_ENGINE", "VALIDATION", "WITH", "WITHOUT", "UPGRADE", "ATTRIBUTE", "AUTOEXTEND_SIZE",
    ))

    _PARTITION_WORDS = frozenset(("TRUNCATE", "DROP", "ADD", "EXCHANGE", "REORGANIZE", "COALESCE", "REBUILD",
                                  "DISCARD", "IMPORT", "ANALYZE", "CHECK", "OPTIMIZE", "REPAIR"))

    def partition_clause(self, op: AlterTable) -> bool:
        """Partition maintenance (the statement's last clause: read to the end), into ``op.partition`` (None for
        those that change nothing: ANALYZE, CHECK, OPTIMIZE, REPAIR, UPGRADE PARTITIONING); False when the clause
        is none."""
        word = self.peek()
        if word in self._PARTITION_WORDS and self.peek(1) == "PARTITION":
            self.i += 2
            action = word.lower()
            if action == "exchange":
                names = [self.ident()]
                self.expect("WITH", "TABLE")
                op.partition = Partition(action, names, self.table_name())
            elif action == "coalesce":
                op.partition = Partition(action, count=self.number())
            elif action == "add":
                self.accept("IF", "NOT", "EXISTS")
                if self.accept("PARTITIONS"):
                    op.partition = Partition(action, count=self.number())
                else:
                    op.partition = Partition(action, self.partition_definitions())
            elif action == "reorganize":
                names = [] if self.at_end() else self.partition_names()
                op.partition = Partition(action, names)
            else:
                if action == "drop":
                    self.accept("IF", "EXISTS")
                names = self.partition_names()
                if action not in ("analyze", "check", "optimize", "repair"):
                    op.partition = Partition(action, names)
        elif self.accept("REMOVE", "PARTITIONING"):
            op.partition = Partition("remove")
        elif self.accept("UPGRADE", "PARTITIONING"):
            pass
        elif self.peek() == "PARTITION" and self.peek(1) == "BY":
            op.partition = Partition("repartition")
        elif self.accept("CONVERT", "PARTITION"):  # MariaDB 10.7: the partition becomes a table
            names = [self.ident()]
            self.expect("TO", "TABLE")
            op.partition = Partition("convert_to_table", names, self.table_name())
        elif self.accept("CONVERT", "TABLE"):  # MariaDB 10.7: a table becomes a partition
            other = self.table_name()
            self.expect("TO", "PARTITION")
            op.partition = Partition("convert_from_table", [self.ident()], other)
        else:
            return False
        while not self.at_end():  # the rest: partition definitions, WITH[OUT] VALIDATION, options
            self.i += 1
        return True

    def number(self) -> int:
        text = self.ident()
        if not text.isdigit():
            self.fail("expected a number")
        return int(text)

    def partition_names(self) -> list[str]:
        """``ALL`` ([]) or ``name, name, ...``; stops before INTO, TABLESPACE and the end."""
        if self.accept("ALL"):
            return []
        names = [self.ident()]
        while self.accept(","):
            names.append(self.ident())
        return names

    def partition_definitions(self) -> list[str]:
        """``(PARTITION name ..., PARTITION name ...)``: the names."""
        self.expect("(")
        names = []
        while True:
            self.expect("PARTITION")
            names.append(self.ident())
            self.skip_item()
            if self.accept(")"):
                return names
            self.expect(",")

    def alter_spec(self, op: AlterTable) -> None:
        if self.partition_clause(op):
            return
        if self.accept("ADD"):
            if self.peek() == "SYSTEM":
                self.fail("ADD SYSTEM VERSIONING (adds hidden columns)")
            if self.peek() == "PERIOD" or (self.is_constraint() and not self.accept("COLUMN")):
                spec = self.constraint()
                if spec is not None:
                    op.specs.append(spec)
                return
            self.accept("COLUMN")
            if_not_exists = self.accept("IF", "NOT", "EXISTS")
            if self.accept("("):
                while True:
                    column, primary = self.column_definition()
                    op.specs += _column_specs(AddColumn(column, None, if_not_exists), primary)
                    if self.accept(")"):
                        return
                    self.expect(",")
            column, primary = self.column_definition()
            op.specs += _column_specs(AddColumn(column, self.position(), if_not_exists), primary)
            return
        if self.accept("DROP"):
            if self.accept("PRIMARY", "KEY"):
                op.specs.append(DropPrimaryKey())
                return
            if self.peek() == "SYSTEM":
                self.fail("DROP SYSTEM VERSIONING (drops hidden columns)")
            word = self.peek() if self.i < len(self.toks) and self.toks[self.i][0] == "word" else ""
            if word in ("INDEX", "KEY", "CONSTRAINT"):  # a FOREIGN KEY's or CHECK's name, for CONSTRAINT
                self.i += 1
                self.accept("IF", "EXISTS")
                op.specs.append(self.drop_index(self.ident(), word == "CONSTRAINT"))
                return
            if word in ("FOREIGN", "CHECK", "PARTITION", "PERIOD"):  # a FOREIGN KEY's index stays
                self.skip_item()
                return
            self.accept("COLUMN")
            if_exists = self.accept("IF", "EXISTS")
            op.specs.append(DropColumn(self.ident(), if_exists))
            self.accept("RESTRICT") or self.accept("CASCADE")
            return
        if self.accept("MODIFY"):
            self.accept("COLUMN")
            if_exists = self.accept("IF", "EXISTS")
            column, primary = self.column_definition()
            op.specs += _column_specs(ChangeColumn(column.name, column, self.position(), if_exists), primary)
            return
        if self.accept("CHANGE"):
            self.accept("COLUMN")
            if_exists = self.accept("IF", "EXISTS")
            old = self.ident()
            column, primary = self.column_definition()
            op.specs += _column_specs(ChangeColumn(old, column, self.position(), if_exists), primary)
            return
        if self.accept("RENAME"):
            if self.accept("COLUMN"):
                self.accept("IF", "EXISTS")
                old = self.ident()
                self.expect("TO")
                op.specs.append(RenameColumn(old, self.ident()))
                return
            if self.accept("INDEX") or self.accept("KEY"):
                old = self.ident()
                self.expect("TO")
                op.specs.append(RenameIndex(old, self.ident()))
                return
            self.accept("TO") or self.accept("AS")
            op.rename_to = self.table_name()
            return
        if self.accept("ALTER"):
            if self.peek() in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):  # visibility, enforcement: no column changes
                self.skip_item()
                return
            self.accept("COLUMN")
            name = self.ident()
            if self.accept("SET", "DEFAULT"):
                op.specs.append(ColumnDefault(name, self.default_value()))
            elif self.accept("DROP", "DEFAULT"):
                op.specs.append(ColumnDefault(name, None))
            else:  # SET VISIBLE / INVISIBLE
                self.skip_item()
            return
        if self.accept("CONVERT", "TO"):  # CHARACTER SET x [COLLATE y]: every text column and the default
            given, charset = self.charset_options(in_item=True)
            if not given:
                self.fail("CONVERT TO without a character set")
            op.specs.append(ConvertCharset(charset, self.collation))
            return
        if self.peek() in self._HARMLESS and self.toks[self.i][0] == "word":
            given, charset = self.charset_options(in_item=True)  # ENGINE=x DEFAULT CHARSET=y: options in a row
            if given:
                op.specs.append(TableCharset(charset, self.collation))
            if self.comment is not None:
                op.specs.append(TableComment(self.comment))
            return
        self.fail("ALTER TABLE clause this parser does not know")


def _unique_of(column: ColumnDef) -> Index:
    """The index a column's own UNIQUE declares (named by the server after the column)."""
    return Index("", [(column.name, 0)], unique=True)


def _column_specs(spec: AddColumn | ChangeColumn, primary: bool) -> list[AlterSpec]:
    """A column's ADD, MODIFY or CHANGE, and the primary key or UNIQUE index its definition declares."""
    column = spec.column
    return [spec, *([AddPrimaryKey([column.name])] if primary else []),
            *([AddIndex(_unique_of(column))] if column.unique else [])]
