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
from ..codec.charsets import COLLATION_CHARSET, collation_id_of
from ..codec.constants import ColumnType as T
from ..codec.table_map import GEOMETRY_TYPES, STRING_TYPES, TableMap
from .collations import Collations
from .column_defaults import column_default
from .ddl import parse_ddl
from .ddl_operations import (
    AlterTable,
    ConvertCharset,
    CreateTable,
    CreateTableLike,
    DatabaseCharset,
    DropDatabase,
    DropTables,
    Name,
    Operation,
    RenameTables,
    TableCharset,
    TruncateTable,
)
from .ddl_tokens import UnparsedDDL
from .table_alter import alter, settle
from .table_schema import TEXT_TYPES, ColumnDef, Index, TableSchema

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
                added = alter(schema, spec, op.name, database) or added
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
