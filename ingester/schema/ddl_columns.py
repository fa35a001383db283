"""The DDL parser's column and index definitions: a column's type and attributes (its charset, collation,
default, key), an index or constraint, table and database options' charset and comment."""

from __future__ import annotations

from ..codec.charsets import charset_of
from .ddl_operations import AddIndex, AddPrimaryKey
from .ddl_tokens import TokenCursor
from .table_schema import TEXT_TYPES, ColumnDef, Index, TableSchema, with_charset

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


def unique_of(column: ColumnDef) -> Index:
    """The index a column's own UNIQUE declares (named by the server after the column)."""
    return Index("", [(column.name, 0)], unique=True)


class ColumnParser(TokenCursor):
    def __init__(self, toks: list[tuple[str, str]], default_db: str, sql: str) -> None:
        super().__init__(toks, default_db, sql)
        self.comment: str | None = None  # the table options' COMMENT, read by charset_options
        self.collation: str | None = None  # the table options' COLLATE, read by charset_options

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
            schema.indexes.append(unique_of(column))

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
