"""Schema history: each captured table's columns and indexes as valid at the current binlog position (sans-I/O).

Without FULL row metadata a TABLE_MAP has no column names, ENUM/SET labels or key (the primary key, or the
UNIQUE index of NOT NULL columns the server uses in its place). The daemon captures the selected tables'
columns and indexes once (information_schema, at the start position or the snapshot's
consistent point), then applies every DDL of the binlog in order (``ddl.py``). Each change is an entry of
the compacted ``<prefix>._schema_history`` topic (key: the table, value: its columns after the change),
published in the Kafka transaction of the DDL's checkpoint: the latest entry per table is the schema at
the last checkpoint, which is what a restart reads back. Records carry the schema next to each TABLE_MAP
(docs/FORMAT.md, "Schema entries"), so consumers never need the history topic.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ..codec import BinlogError
from ..codec.charsets import COLLATION_CHARSET, MAX_CHAR_BYTES, charset_of, collation_id_of
from ..codec.constants import ColumnType as T
from ..codec.table_map import GEOMETRY_TYPES, STRING_TYPES, TableMap
from .collations import Collations
from .column_defaults import column_default, default_tokens
from .ddl import parse_ddl
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
    Name,
    Operation,
    RenameColumn,
    RenameIndex,
    RenameTables,
    TableCharset,
    TableComment,
    TruncateTable,
)
from .ddl_tokens import UnparsedDDL, tokens
from .table_schema import BINARY_TYPES, TEXT_TYPES, ColumnDef, Index, TableSchema, string_charset, with_charset

log = logging.getLogger("binlake.schema")
HISTORY_TOPIC = "_schema_history"
VALID_FROM_KEY = b"[]"  # the history topic's entry of where the captured state applies from (no table has this key)
ON_UNPARSED = ("stop", "skip-table")
_INT_WORDS = frozenset(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bool", "boolean", "int1",
                        "int2", "int3", "int4", "int8", "middleint"))
_INT_TYPES = frozenset((T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG))
DATABASE = ""  # (database, DATABASE) names a database's own history entry: its default charset


class SchemaError(BinlogError):
    """The history cannot say which columns a table has here (unparsed DDL, unknown table, stale schema)."""

    def __init__(self, reason: str, position: int | None = None, source: str = "schema history") -> None:
        super().__init__(reason, position, source)


def history_key(name: Name) -> bytes:
    return orjson.dumps(list(name))


_SEQ = struct.Struct(">IQI")  # records/format.py's Sequence, encoded


def _seq_bytes(text: Any) -> bytes:
    """An entry's ``seq`` ("file:position:sub") encoded as its Sequence; b"" for none."""
    try:
        file, position, sub = (int(x) for x in str(text).split(":"))
        return _SEQ.pack(file, position, sub)
    except (ValueError, struct.error):
        return b""


class SchemaHistory:
    """The tables' columns at the position of the last event fed; ``apply`` follows DDL."""

    def __init__(self, accept: Callable[[str, str], bool], on_unparsed: str = "stop") -> None:
        self.accept = accept
        # stop, skip-table, or warn: the tables an unparsed DDL names become unknown (their entries say "skipped")
        # with a warning, their rows still published (a server whose TABLE_MAPs name the columns:
        # docs/COMMANDS.md, "Schema history")
        self.on_unparsed = on_unparsed
        self.tables: dict[Name, TableSchema] = {}
        self.skipped: dict[Name, str] = {}  # table -> the DDL that made its columns unknown
        self.databases: dict[str, str | None] = {}  # database -> its default charset (for CREATE TABLE)
        # database -> its default collation (a collation's name, or a charset's for its default; None: not known)
        self.database_collations: dict[str, str | None] = {}
        self.server_charset: str | None = None  # the server's default (of the last statement applied)
        self.server_collation: int | None = None  # ... its collation id
        self.collations = Collations()  # the server's (names, ids, defaults): the daemon reads them (``capture``)
        # where the captured state applies from (an encoded Sequence; b"": everywhere): the statements before it are in
        # it already (a stream that starts before the capture: ``applies``)
        self.valid_from: bytes = b""
        self._attachments: dict[Name, bytes] = {}
        self._defaults: dict[Name, bool] = {}  # whether the table's attachment has column defaults

    # -- persistence

    def valid_from_entry(self, seq: str) -> bytes:
        """The history topic's value of ``VALID_FROM_KEY``: the captured state applies from ``seq`` (an older binlake
        reads it as an entry of the database "" without a charset)."""
        return orjson.dumps({"database": "", "seq": seq, "ddl": "captured", "valid_from": seq})

    def entry(self, name: Name, seq: str, ddl: str) -> bytes:
        """The history topic's value for a table after a change (``seq``: where it applies from)."""
        if name[1] == DATABASE:
            database: dict[str, Any] = {"database": name[0], "seq": seq, "ddl": ddl}
            if name[0] in self.databases:
                database["charset"] = self.databases[name[0]]
                if self.database_collations.get(name[0]):
                    database["collation"] = self.database_collations[name[0]]
            else:
                database["dropped"] = True
            return orjson.dumps(database)
        value: dict[str, Any] = {"database": name[0], "table": name[1], "seq": seq, "ddl": ddl}
        if name in self.tables:
            schema = self.tables[name]
            value["columns"] = [c.to_json() for c in schema.columns]
            value["primary_key"] = schema.primary_key
            value["charset"] = schema.charset
            value["indexes"] = [i.to_json() for i in schema.indexes]
            if schema.comment:
                value["comment"] = schema.comment
            if schema.collation:
                value["collation"] = schema.collation
            if schema.key_prefixes:
                value["key_prefixes"] = schema.key_prefixes
        elif name in self.skipped:
            value["skipped"] = self.skipped[name]
        else:
            value["dropped"] = True
        return orjson.dumps(value)

    def load(self, entries: Iterable[bytes]) -> None:
        """Rebuild the state from the latest history entry of each table."""
        unknown, unindexed = [], []
        for raw in entries:
            value = orjson.loads(raw)
            if "valid_from" in value:
                self.valid_from = _seq_bytes(value["valid_from"])
                continue
            if "table" not in value:
                self.databases.pop(value["database"], None)
                self.database_collations.pop(value["database"], None)
                if "charset" in value:
                    self.databases[value["database"]] = value["charset"]
                    self.database_collations[value["database"]] = value.get("collation")
                continue
            name = (value["database"], value["table"])
            self.tables.pop(name, None)
            self.skipped.pop(name, None)
            if "columns" in value:
                columns = [ColumnDef(c["name"], c["type"], c["unsigned"], c["enum_values"], c["set_values"],
                                     c.get("charset"), c.get("args", ""),
                                     [(k, t) for k, t in c["default"]] if c.get("default") else None,
                                     c.get("not_null", False), c.get("generated", False),
                                     auto_increment=c.get("auto_increment", False), comment=c.get("comment"),
                                     collation=c.get("collation"), compressed=c.get("compressed", False))
                           for c in value["columns"]]
                self.tables[name] = TableSchema(columns, value["primary_key"], value.get("charset"),
                                                [Index.from_json(i) for i in value.get("indexes", ())],
                                                value.get("comment"), value.get("collation"),
                                                dict(value.get("key_prefixes") or {}))
                if any(c.type in TEXT_TYPES and c.charset is None for c in columns):
                    unknown.append(name)
                if "indexes" not in value:
                    unindexed.append(name)
            elif "skipped" in value:
                self.skipped[name] = value["skipped"]
        if unindexed:
            log.warning("schema history: %d tables have entries of an older binlake, without their indexes (%s): a "
                        "table of them without a primary key has no key (a UNIQUE index of NOT NULL columns) in "
                        "records until its next CREATE TABLE; land.keys can name one", len(unindexed),
                        ", ".join(f"{d}.{t}" for d, t in unindexed[:5]))
        if unknown:
            log.warning("schema history: %d tables have text columns without a known character set (%s; entries of an "
                        "older binlake): their values are published as bytes until the table's next CREATE",
                        len(unknown), ", ".join(f"{d}.{t}" for d, t in unknown[:5]))
        self._attachments.clear()
        self._defaults.clear()

    # -- following the binlog

    def applies(self, seq: bytes) -> bool:
        """Whether a statement at ``seq`` (an encoded Sequence) is to be applied: not one before the state's own
        point, whose effect the captured columns hold already."""
        return seq >= self.valid_from

    def apply(self, database: str, sql: str, where: str, server_collation: int | None = None) -> list[Name]:
        """Apply one statement; the tables whose entry changed (and ``(db, DATABASE)`` for a database whose
        default charset did). ``where`` (file:position) names the statement in errors; ``server_collation``
        is the statement's collation_server (its QUERY event's status), the default of a CREATE DATABASE
        without one. Unparsed DDL stops (SchemaError) or, with ``skip-table``, makes the tables it names
        unknown: their rows are no longer published until a CREATE TABLE defines them again."""
        if server_collation is not None:
            # MySQL's and MariaDB's ids name the same charset wherever both assign them
            self.server_charset = COLLATION_CHARSET.get(server_collation, self.server_charset)
            self.server_collation = server_collation
        try:
            ops = parse_ddl(sql, database)
            before = {**self.tables}, {**self.skipped}, {**self.databases}, {**self.database_collations}
            try:
                changed = [name for op in ops for name in self._apply(op)]
            except UnparsedDDL:
                self.tables, self.skipped, self.databases, self.database_collations = before
                raise
        except UnparsedDDL as exc:
            tables = [t for t in dict.fromkeys(exc.tables) if self.accept(*t)]
            if not tables and exc.tables:
                return []  # only tables nobody captures
            names = ", ".join(f"{db}.{t}" for db, t in tables) or "unknown tables"
            text = " ".join(sql.split())[:300]
            if self.on_unparsed == "warn":
                log.warning("%s: DDL on %s that the schema history cannot follow (%s): their columns are unknown "
                            "until a CREATE TABLE defines them again (rows are still published; table statement "
                            "entries come without columns): %s", where, names, exc, text)
            elif self.on_unparsed == "stop" or not tables:
                raise SchemaError(f"{where}: DDL on {names} that the schema history cannot follow ({exc}): {text}"
                                  " (set schema.on_unparsed_ddl: skip-table to stop publishing those tables"
                                  " instead)") from None
            else:
                log.warning("%s: DDL on %s that the schema history cannot follow (%s): their rows are no longer "
                            "published: %s", where, names, exc, text)
            for name in tables:
                self.tables.pop(name, None)
                self.skipped[name] = f"{where}: {text}"
            changed = tables
        for name in changed:
            self._attachments.pop(name, None)
            self._defaults.pop(name, None)
        return list(dict.fromkeys(changed))

    def _database_charset(self, database: str) -> str | None:
        return self.databases.get(database, self.server_charset)

    def _database_collation(self, database: str) -> str | None:
        """A database's default collation (a name, or its charset's name for that charset's default)."""
        if database in self.databases:
            return self.database_collations.get(database) or self.databases[database]
        return self._server_collation()

    def _server_collation(self) -> str | None:
        named = self.collations.name_of(self.server_collation) if self.server_collation is not None else None
        return named or self.server_charset

    def _apply(self, op: Operation) -> list[Name]:
        tables = self.tables
        if isinstance(op, TruncateTable):
            return []  # rows go, columns stay
        if isinstance(op, DatabaseCharset):
            if op.create and op.if_not_exists and op.database in self.databases:
                return []
            self.databases[op.database] = op.charset or self.server_charset
            self.database_collations[op.database] = (op.collation or op.charset) if op.charset \
                else self._server_collation()
            return [(op.database, DATABASE)]
        if isinstance(op, CreateTable):
            if op.if_not_exists and op.name in tables:
                return []
            if op.schema.charset is None:
                op.schema.charset = self._database_charset(op.name[0])
                op.schema.collation = self._database_collation(op.name[0])
            else:
                op.schema.collation = op.schema.collation or op.schema.charset
            op.schema.resolve(op.schema.charset, op.schema.collation)
            settle(op.schema, sort=True)
            tables[op.name] = op.schema
            self.skipped.pop(op.name, None)
            return [op.name]
        if isinstance(op, CreateTableLike):
            if op.if_not_exists and op.name in tables:
                return []
            if op.source not in tables:
                return self._unknown(op.source, op.name)
            tables[op.name] = tables[op.source].copy()
            settle(tables[op.name], sort=True)  # a table created anew: its indexes in the server's order
            self.skipped.pop(op.name, None)
            return [op.name]
        if isinstance(op, AlterTable):
            if op.name not in tables:
                return self._unknown(op.name, op.rename_to or op.name)
            schema = tables[op.name].copy()
            # A new default applies to every column the statement adds, wherever it stands in it.
            added = False
            database = (self._database_charset(op.name[0]), self._database_collation(op.name[0]))
            for spec in sorted(op.specs, key=lambda s: not isinstance(s, (TableCharset, ConvertCharset))):
                added = _alter(schema, spec, op.name, database) or added
            settle(schema, sort=added)
            tables[op.name] = schema
            partition = op.partition
            if partition is not None and partition.with_table is not None and partition.action.startswith("convert"):
                other = partition.with_table
                if partition.action == "convert_from_table":  # the table is a partition now: gone
                    return [op.name] + ([other] if tables.pop(other, None) or self.skipped.pop(other, None) else [])
                tables[other] = schema.copy()  # a partition's rows as a table of their own: the same columns
                self.skipped.pop(other, None)
                return [op.name, other]
            if op.rename_to and op.rename_to != op.name:
                return [op.name, *self._rename(op.name, op.rename_to)]
            return [op.name]
        if isinstance(op, RenameTables):
            changed = []
            for old, new in op.pairs:
                if old not in tables and old not in self.skipped:
                    continue  # a view, or a table never captured: its rows, if any, stop at attachment()
                changed += self._rename(old, new)
            return changed
        if isinstance(op, DropTables):
            return [n for n in op.names if tables.pop(n, None) is not None or self.skipped.pop(n, None) is not None]
        assert isinstance(op, DropDatabase)
        gone = [n for n in [*tables, *self.skipped] if n[0] == op.database]
        for n in gone:
            tables.pop(n, None)
            self.skipped.pop(n, None)
        if self.databases.pop(op.database, "") != "":
            gone.append((op.database, DATABASE))
        return gone

    def _rename(self, old: Name, new: Name) -> list[Name]:
        if old in self.tables:
            self.tables[new] = self.tables.pop(old)
            self.skipped.pop(new, None)
        else:
            self.skipped[new] = self.skipped.pop(old)
        return [old, new]

    def _unknown(self, source: Name, target: Name) -> list[Name]:
        """A statement about a table the history never captured: harmless unless a captured name results."""
        if self.accept(*target) or self.accept(*source):
            raise UnparsedDDL(f"the schema of {source[0]}.{source[1]} is unknown", [target, source])
        return []

    # -- what records carry

    def has_defaults(self, name: Name) -> bool:
        """Whether the table's schema entry gives column defaults (``column_default``): a record of a TABLE_MAP
        with names of its own carries the entry too then, for the Debezium formats' schemas."""
        found = self._defaults.get(name)
        if found is None:
            schema = self.tables.get(name)
            found = self._defaults[name] = schema is not None and any(
                column_default(c) is not None for c in schema.columns)
        return found

    def attachment(self, tm: TableMap, where: str) -> bytes | None:
        """The schema entry of a record for this TABLE_MAP (None: the table is skipped). Checks that the
        history's columns fit the map, so a stale schema stops the daemon instead of mislabelling values."""
        name = (tm.database, tm.table)
        if name in self.skipped:
            return None
        schema = self.tables.get(name)
        if schema is None:
            raise SchemaError(f"{where}: rows of {name[0]}.{name[1]}, whose columns the schema history does not know"
                              " (it was not captured at the start position, nor created by DDL since)")
        # MariaDB keeps a hidden hash column after the table's own for each long UNIQUE index (of a BLOB/TEXT
        # column, USING HASH, or longer than a key may be): the map has them, information_schema and DDL do not
        hidden = len(tm.columns) - len(schema.columns)
        if not 0 <= hidden <= (sum(ix.unique for ix in schema.indexes) if tm.is_mariadb else 0) or any(
                col.type != T.LONGLONG for col in tm.columns[len(schema.columns):]) or any(
                _mismatch(c, col.type) for c, col in zip(schema.columns, tm.columns, strict=False)):
            ours = ", ".join(f"{c.name} {c.type}" for c in schema.columns)
            raise SchemaError(f"{where}: the TABLE_MAP of {name[0]}.{name[1]} has {len(tm.columns)} columns that do "
                              f"not fit the schema history's ({ours}): the captured schema is not the one valid "
                              "here (start where it was captured, take a snapshot, or use binlog_row_metadata=FULL)")
        cached = self._attachments.get(name)
        if cached is None:
            index = {c.name.lower(): i for i, c in enumerate(schema.columns)}
            nullable = frozenset(c.name.lower() for c, col in zip(schema.columns, tm.columns, strict=False)
                                 if col.nullable)
            cached = self._attachments[name] = orjson.dumps({
                "columns": [_entry_column(c) for c in schema.columns] +
                           [{"name": f"DB_ROW_HASH_{i}", "unsigned": True, "enum_values": None, "set_values": None,
                             "charset": None, "geometry_type": None} for i in range(1, hidden + 1)],
                "primary_key": [index[k.lower()] for k in schema.primary_key if k.lower() in index],
                "key": [index[k.lower()] for k in schema.key(nullable, tm.is_mariadb)],
            })
        return cached


def _entry_column(c: ColumnDef) -> dict[str, Any]:
    column = {"name": c.name, "unsigned": c.unsigned, "enum_values": c.enum_values, "set_values": c.set_values,
              "charset": c.charset, "geometry_type": _geometry_type(c.type)}
    default = column_default(c)
    if default is not None:
        column["default"] = default
    return column


_TEXT_BYTES = {"tinytext": 255, "text": 65535, "mediumtext": (1 << 24) - 1, "longtext": (1 << 32) - 1}


def _text_type_for(type_word: str, old: str | None, new: str | None) -> str:
    """The TEXT type a converted column gets: the server keeps its length in characters, growing the type
    when the new charset needs more bytes for them (never shrinking it)."""
    if type_word not in _TEXT_BYTES or old is None or new is None:
        return type_word
    chars = _TEXT_BYTES[type_word] // MAX_CHAR_BYTES.get(old, 1)
    need = chars * MAX_CHAR_BYTES.get(new, 1)
    return type_word if need <= _TEXT_BYTES[type_word] else next(t for t, n in _TEXT_BYTES.items() if n >= need)


def _geometry_type(type_word: str) -> int | None:
    upper = type_word.upper()
    return GEOMETRY_TYPES.index(upper) if upper in GEOMETRY_TYPES else None


def _mismatch(column: ColumnDef, binlog_type: int) -> bool:
    """Whether a declared type cannot be the TABLE_MAP's type (only unmistakable families are compared)."""
    if column.type == "enum" or binlog_type == T.ENUM:
        return (column.type == "enum") != (binlog_type == T.ENUM)
    if column.type == "set" or binlog_type == T.SET:
        return (column.type == "set") != (binlog_type == T.SET)
    return (column.type in _INT_WORDS) != (binlog_type in _INT_TYPES)


def _alter(schema: TableSchema, spec: AlterSpec, table: Name, database: tuple[str | None, str | None]) -> bool:
    """Apply one clause (``database``: the database's default charset and collation); whether it added an index
    (MariaDB then sorts them again: ``settle``)."""
    cols = schema.columns
    if isinstance(spec, (AddColumn, ChangeColumn)) and spec.column.default_charset:
        with_charset(spec.column, schema.charset, schema.collation)

    def missing(name: str) -> UnparsedDDL:
        return UnparsedDDL(f"column {name} does not exist in the schema history", [table])

    def place(column: ColumnDef, position: tuple[str, str] | None, default: int) -> None:
        if position is None:
            cols.insert(default, column)
        elif position[0] == "first":
            cols.insert(0, column)
        else:
            at = schema.index(position[1])
            if at < 0:
                raise missing(position[1])
            cols.insert(at + 1, column)

    if isinstance(spec, AddColumn):
        if schema.index(spec.column.name) >= 0:
            if spec.if_not_exists:
                return False
            raise UnparsedDDL(f"column {spec.column.name} exists already", [table])
        place(spec.column, spec.position, len(cols))
    elif isinstance(spec, (DropColumn, ChangeColumn)):
        at = schema.index(spec.name if isinstance(spec, DropColumn) else spec.old)
        if at < 0:
            if spec.if_exists:
                return False
            raise missing(spec.name if isinstance(spec, DropColumn) else spec.old)
        old = cols.pop(at).name
        if isinstance(spec, DropColumn):
            _rename_in_keys(schema, old, None)
            return False
        place(spec.column, spec.position, at)
        _rename_in_keys(schema, old, spec.column.name)
    elif isinstance(spec, RenameColumn):
        at = schema.index(spec.old)
        if at < 0:
            raise missing(spec.old)
        cols[at].name = spec.new
        _rename_in_keys(schema, spec.old, spec.new)
    elif isinstance(spec, ColumnDefault):
        at = schema.index(spec.name)
        if at < 0:
            raise missing(spec.name)
        cols[at].default = spec.default
    elif isinstance(spec, AddPrimaryKey):
        schema.primary_key = list(spec.columns)
        schema.key_prefixes = dict(spec.prefixes)
        return True
    elif isinstance(spec, (AddIndex, DropIndex, RenameIndex)):
        return _alter_index(schema, spec, table)
    elif isinstance(spec, TableCharset):
        schema.charset, schema.collation = _table_default(spec.charset, spec.collation, database)
    elif isinstance(spec, TableComment):
        schema.comment = spec.comment or None
    elif isinstance(spec, ConvertCharset):
        schema.charset, schema.collation = _table_default(spec.charset, spec.collation, database)
        for c in cols:
            if c.type in TEXT_TYPES:
                c.type = _text_type_for(c.type, c.charset, schema.charset)
                with_charset(c, schema.charset, schema.collation)
            elif c.type in ("enum", "set"):
                with_charset(c, schema.charset, schema.collation)
            elif c.type == "json" and schema.charset is not None:  # MariaDB's JSON is LONGTEXT: converted too
                c.charset, c.collation = charset_of(schema.charset), schema.collation  # (MySQL's has no charset)
    else:
        assert isinstance(spec, DropPrimaryKey)
        schema.primary_key = []
        schema.key_prefixes = {}
    return False


def _table_default(charset: str | None, collation: str | None,
                   database: tuple[str | None, str | None]) -> tuple[str | None, str | None]:
    """A table's default charset and collation from its options (None: DEFAULT, the database's)."""
    if charset is None:
        return database
    return charset, collation or charset


def _rename_in_keys(schema: TableSchema, old: str, new: str | None) -> None:
    """A column renamed (``new``) or dropped (None) in the primary key and the indexes: an index left without
    columns goes (as MySQL documents it; MariaDB refuses to drop a column of a UNIQUE index of several)."""
    low = old.lower()
    prefix = schema.key_prefixes.pop(low, 0)
    if new is not None and prefix:
        schema.key_prefixes[new.lower()] = prefix
    if new is None:
        schema.primary_key = [k for k in schema.primary_key if k.lower() != low]
        for ix in schema.indexes:
            ix.columns = [(c, p) for c, p in ix.columns if c.lower() != low]
    else:
        schema.primary_key = [new if k.lower() == low else k for k in schema.primary_key]
        for ix in schema.indexes:
            ix.columns = [(new if c.lower() == low else c, p) for c, p in ix.columns]
    schema.indexes = [ix for ix in schema.indexes if ix.columns]


def _alter_index(schema: TableSchema, spec: AddIndex | DropIndex | RenameIndex, table: Name) -> bool:
    """An index added (True), dropped or renamed. Names the history does not know are let be (a warning):
    the server accepted the statement, and tables whose entries an older binlake wrote have no indexes."""
    name = spec.index.name if isinstance(spec, AddIndex) else spec.old if isinstance(spec, RenameIndex) else spec.name
    at = next((i for i, ix in enumerate(schema.indexes) if name and ix.name.lower() == name.lower()), -1)
    if isinstance(spec, AddIndex):
        if at >= 0:
            if spec.if_not_exists:
                return False
            log.warning("schema history: %s.%s: index %s added again (replaced)", *table, name)
            del schema.indexes[at]
        for column, _ in spec.index.columns:
            if column and schema.index(column) < 0:
                raise UnparsedDDL(f"column {column} of index {name or column} does not exist in the schema history",
                                  [table])
        schema.indexes.append(spec.index)
        return True
    if at < 0:
        if not (isinstance(spec, DropIndex) and spec.constraint):  # a CHECK's or a FOREIGN KEY's name
            log.warning("schema history: %s.%s: no index %s to %s (let be)", *table, name,
                        "drop" if isinstance(spec, DropIndex) else "rename")
    elif isinstance(spec, DropIndex):
        if not spec.constraint or schema.indexes[at].unique:
            del schema.indexes[at]
    else:
        schema.indexes[at].name = spec.new
    return False


_BLOBS = frozenset(("tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext", "longtext",
                    "json"))
_LENGTHS = frozenset(("char", "varchar", "binary", "varbinary"))


def settle(schema: TableSchema, sort: bool) -> None:
    """After a CREATE or ALTER, the table's indexes as the server keeps them: primary-key columns NOT NULL;
    a FOREIGN KEY's own index dropped where another index serves it (begins with its columns); a prefix as
    long as its column indexes the whole column; MariaDB's long UNIQUE (a BLOB or TEXT column without a
    prefix) marked; indexes without a name named after their first column (``c``, ``c_2``, ...). With
    ``sort`` (a statement that creates the table or adds an index: MariaDB keeps the order otherwise, even
    when a column's nullability changes) the indexes in the server's order: UNIQUE ones first (of NOT NULL
    columns before others, whole columns before prefixes, long UNIQUE last), FULLTEXT last, otherwise in the
    order they had. The first decides which UNIQUE index is the table's key (``TableSchema.key``)."""
    columns = {c.name.lower(): c for c in schema.columns}
    for k in schema.primary_key:
        if k.lower() in columns:
            columns[k.lower()].not_null = True
    for k, p in list(schema.key_prefixes.items()):  # as in indexes: a prefix as long as its column is none
        col = columns.get(k)
        if col is None or (col.type in _LENGTHS and col.args.isdigit() and p >= int(col.args)):
            del schema.key_prefixes[k]

    def serves(ix: Index, other: list[str]) -> bool:
        want = [c.lower() for c, _ in ix.columns]
        return [c.lower() for c in other[: len(want)]] == want

    def redundant(at: int, ix: Index) -> bool:  # of two FOREIGN KEYs' own indexes of the same columns, one stays
        return ix.generated and (serves(ix, schema.primary_key) or any(
            serves(ix, [c for c, _ in o.columns]) and (not o.generated or len(o.columns) > len(ix.columns) or j < at)
            for j, o in enumerate(schema.indexes) if j != at))

    indexes = [ix for at, ix in enumerate(schema.indexes) if not redundant(at, ix)]
    names = {ix.name.lower() for ix in indexes if ix.name}
    for ix in indexes:
        parts = []
        for c, p in ix.columns:
            col = columns.get(c.lower())
            if col is not None and col.type in _LENGTHS and col.args.isdigit() and p >= int(col.args):
                p = 0
            parts.append((c, p))
        ix.columns = parts
        if ix.unique and any(p == 0 and c.lower() in columns and columns[c.lower()].type in _BLOBS
                             for c, p in parts):
            ix.hash = True
        if not ix.name:
            base = ix.columns[0][0] or "functional_index"
            ix.name = next(n for n in (base, *(f"{base}_{i}" for i in range(2, 1000)))
                           if n.lower() not in names and n.lower() != "primary")
            names.add(ix.name.lower())

    def order(ix: Index) -> tuple[bool, ...]:
        if not ix.unique:
            return (True, ix.fulltext)
        nullable = any(not c or c.lower() not in columns or not columns[c.lower()].not_null for c, _ in ix.columns)
        return (False, ix.hash, nullable, any(p for _, p in ix.columns))

    schema.indexes = sorted(indexes, key=order) if sort else indexes


def column_from_type(name: str, column_type: str, charset: str | None = None) -> ColumnDef:
    """A column from information_schema's COLUMN_TYPE (``enum('a','b')``, ``int(10) unsigned``) and
    CHARACTER_SET_NAME."""
    toks = tokens(column_type)
    word = toks[0][1].lower() if toks else ""
    column = ColumnDef(name, word, any(t[0] == "word" and t[1].lower() in ("unsigned", "zerofill") for t in toks),
                       charset=string_charset(word, charset),
                       compressed=any(t[0] == "word" and t[1].lower() == "compressed" for t in toks))
    if word in ("enum", "set"):
        labels = [text for kind, text in toks if kind == "str"]
        if word == "enum":
            column.enum_values = labels
        else:
            column.set_values = labels
    elif len(toks) > 2 and toks[1] == ("op", "("):  # int(11), decimal(10,2)
        end = next((i for i, t in enumerate(toks) if t == ("op", ")")), len(toks))
        column.args = "".join(text for _, text in toks[2:end])
    return column


def capture(cur: Any, accept: Callable[[str, str], bool]) -> dict[Name, TableSchema]:
    """The accepted base tables' columns, charsets, nullability, primary keys and indexes, from
    information_schema (two queries)."""
    cur.execute("SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE, c.CHARACTER_SET_NAME,"
                " t.TABLE_COLLATION, c.IS_NULLABLE, c.COLUMN_KEY, c.COLUMN_DEFAULT, c.EXTRA, c.COLUMN_COMMENT,"
                " t.TABLE_COMMENT, @@version, c.COLLATION_NAME"
                " FROM information_schema.COLUMNS c"
                " JOIN information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME) WHERE t.TABLE_TYPE = 'BASE TABLE'"
                f" AND c.TABLE_SCHEMA NOT IN {_SYSTEM} ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION")
    tables: dict[Name, TableSchema] = {}
    pri: dict[Name, list[str]] = {}
    for (db, table, column, column_type, charset, table_collation, nullable, key, default, extra, comment,
         table_comment, version, collation) in cur.fetchall():
        name = (_text(db), _text(table))
        if accept(*name):
            schema = tables.setdefault(name, TableSchema([], charset=charset_of(_text(table_collation))
                                                         if table_collation else None,
                                                         comment=_text(table_comment) or None if table_comment
                                                         else None,
                                                         collation=_text(table_collation).lower() if table_collation
                                                         else None))
            col = column_from_type(_text(column), _text(column_type), _text(charset) if charset else None)
            if collation and col.type not in BINARY_TYPES:
                col.collation = _text(collation).lower()
            col.not_null = _text(nullable) == "NO"
            col.generated = any(w in _text(extra or "").upper() for w in ("VIRTUAL", "STORED", "PERSISTENT"))
            if default is not None:
                col.default = default_tokens(col, _text(default), _text(extra), "mariadb" in _text(version).lower())
            col.auto_increment = "auto_increment" in _text(extra or "").lower()
            col.comment = _text(comment) or None if comment else None
            schema.columns.append(col)
            if _text(key) == "PRI":
                pri.setdefault(name, []).append(col.name)
    # No ORDER BY: the rows come in the server's order of each table's indexes (which decides its key).
    cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART,"
                f" INDEX_TYPE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA NOT IN {_SYSTEM}")
    found: dict[Name, dict[str, tuple[bool, str, list[tuple[int, str, int]]]]] = {}
    for db, table, index, non_unique, seq, column, sub_part, kind in cur.fetchall():
        name = (_text(db), _text(table))
        if name in tables:
            entry = found.setdefault(name, {}).setdefault(_text(index), (int(non_unique) == 0, _text(kind), []))
            entry[2].append((int(seq), "" if column is None else _text(column), int(sub_part or 0)))
    for name, indexes in found.items():
        schema = tables[name]
        for index, (unique, kind, parts) in indexes.items():
            columns = [(c, p) for _, c, p in sorted(parts)]
            if index == "PRIMARY":
                schema.primary_key = [c for c, _ in columns]
                schema.key_prefixes = {c.lower(): p for c, p in columns if p}
            else:
                schema.indexes.append(Index(index, columns, unique, unique and kind == "HASH", kind == "FULLTEXT"))
        # Without a primary key, the index the server uses as the key comes first of all (as it does in the
        # server's order, whatever order the rows came in).
        key = None if schema.primary_key else server_key(
            {ix.name: [c for c, _ in ix.columns] for ix in schema.indexes if ix.unique}, pri.get(name, ()))
        at = next((i for i, ix in enumerate(schema.indexes) if ix.name == key), None)
        if at is not None:
            schema.indexes.insert(0, schema.indexes.pop(at))
    return tables


_SYSTEM = "('mysql', 'sys', 'performance_schema', 'information_schema')"


def server_key(unique: dict[str, list[str]], pri: Iterable[str]) -> str | None:
    """Which of a table's UNIQUE indexes (name -> columns) the server uses as its primary key: PRIMARY, or
    the one whose columns information_schema marks PRI (MySQL and MariaDB document it: "a UNIQUE index may
    be displayed as PRI if it cannot contain NULL values and there is no PRIMARY KEY in the table"); None
    when there is none."""
    if "PRIMARY" in unique:
        return "PRIMARY"
    want = {c.lower() for c in pri}
    return next((n for n, cols in unique.items() if want and {c.lower() for c in cols} == want), None)


def capture_databases(cur: Any, collations: dict[str, str | None] | None = None) -> dict[str, str | None]:
    """Every database's default charset (the charset of tables created in it without one); ``collations`` gets
    their default collations."""
    cur.execute("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME"
                " FROM information_schema.SCHEMATA")
    out = {}
    for db, charset, collation in cur.fetchall():
        out[_text(db)] = charset_of(_text(charset)) if charset else None
        if collations is not None:
            collations[_text(db)] = _text(collation).lower() if collation else None
    return out


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)


def enrich(tm: TableMap, attachment: bytes) -> TableMap:
    """A copy of a TABLE_MAP with the names, signedness, ENUM/SET labels, charsets, geometry types and
    key of a schema entry, where the map has none of its own."""
    from dataclasses import replace

    d = orjson.loads(attachment)
    columns = d["columns"]
    if len(columns) != len(tm.columns):
        raise ValueError(f"schema entry has {len(columns)} columns, the TABLE_MAP {len(tm.columns)}")
    out = []
    for col, c in zip(tm.columns, columns, strict=True):
        kw: dict[str, Any] = {"name": c["name"]}
        if col.unsigned is None and (col.type in _INT_TYPES or col.type in (T.FLOAT, T.DOUBLE, T.NEWDECIMAL)):
            kw["unsigned"] = c["unsigned"]
        if col.type == T.ENUM and col.enum_values is None:
            kw["enum_values"] = c["enum_values"]
        if col.type == T.SET and col.set_values is None:
            kw["set_values"] = c["set_values"]
        if col.type in STRING_TYPES and col.collation is None and c.get("charset"):
            kw["collation"] = collation_id_of(c["charset"], tm.is_mariadb)
        if col.type == T.GEOMETRY and col.geometry_type is None:
            kw["geometry_type"] = c.get("geometry_type")
        if c.get("default") is not None:
            kw["default"] = c["default"]
        out.append(replace(col, **kw))
    # The entry's key: the primary key, or the UNIQUE index the server uses in its place, as FULL metadata
    # reports it (entries of an older binlake have the primary key only).
    pk = tm.primary_key if tm.primary_key is not None else ([(i, 0) for i in d.get("key", d["primary_key"])] or None)
    return TableMap(tm.table_id, tm.map_flags, tm.database, tm.table, out, pk, has_names=True,
                    is_mariadb=tm.is_mariadb, optional_metadata=tm.optional_metadata)
