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

from .ddl_columns import ColumnParser, unique_of
from .ddl_operations import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    AlterTable,
    ChangeColumn,
    ColumnDefault,
    ConvertCharset,
    CreateTable,
    CreateTableLike,
    DatabaseCharset,
    DropColumn,
    DropDatabase,
    DropIndex,
    DropPrimaryKey,
    DropTables,
    Operation,
    Partition,
    Position,
    RenameColumn,
    RenameIndex,
    RenameTables,
    TableCharset,
    TableComment,
    TruncateTable,
)
from .ddl_tokens import tokens
from .table_schema import Index, TableSchema

_DDL = re.compile(r"^\s*(?:/\*.*?\*/\s*)*(CREATE|ALTER|RENAME|DROP|TRUNCATE)\b", re.I | re.S)


def parse_ddl(sql: str, default_db: str) -> list[Operation]:
    """The column-changing operations of one statement ([] for statements that change no columns).

    ``default_db`` qualifies unqualified table names (the QUERY event's database)."""
    if not _DDL.match(sql):
        return []
    return _Parser(tokens(sql), default_db, sql).statement()


class _Parser(ColumnParser):
    """A statement: CREATE, ALTER, RENAME, DROP, TRUNCATE (the columns' and indexes' definitions: ColumnParser)."""

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


def _column_specs(spec: AddColumn | ChangeColumn, primary: bool) -> list[AlterSpec]:
    """A column's ADD, MODIFY or CHANGE, and the primary key or UNIQUE index its definition declares."""
    column = spec.column
    return [spec, *([AddPrimaryKey([column.name])] if primary else []),
            *([AddIndex(unique_of(column))] if column.unique else [])]
