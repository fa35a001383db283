"""Debezium's schema change topic ``<topic.prefix>``: one event per DDL statement (per table for DROP TABLE and
RENAME TABLE), key ``{databaseName}``, value ``{source, ts_ms, databaseName, schemaName, ddl, tableChanges}``,
as the MySQL/MariaDB connectors publish them with ``include.schema.changes`` (docs/DEBEZIUM.md).

Which tables a statement changes and how comes from binlake's DDL parser (schema/ddl.py); what a table looks
like after it (``tableChanges[].table``) from the schema history's entries of the statement, which only exist
with schema history (``schema.history``): without them a table's change is not described (``tableChanges``
empty), as Debezium gives statements it does not follow. Sans-I/O: payloads as Kafka Connect structures.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ...schema.ddl import parse_ddl
from ...schema.ddl_operations import (
    AlterTable,
    CreateTable,
    CreateTableLike,
    DatabaseCharset,
    DropDatabase,
    DropTables,
    Name,
    Operation,
    RenameTables,
)
from ...schema.ddl_tokens import UnparsedDDL, default_text
from .envelope import source_schema


def _field(kind: str, name: str, optional: bool) -> dict[str, Any]:
    return {"type": kind, "optional": optional, "field": name}


def _strings(name: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "optional": False}, "optional": True, "field": name}


_COLUMN = {"type": "struct", "fields": [
    _field("string", "name", False), _field("int32", "jdbcType", False), _field("int32", "nativeType", True),
    _field("string", "typeName", False), _field("string", "typeExpression", True),
    _field("string", "charsetName", True), _field("int32", "length", True), _field("int32", "scale", True),
    _field("int32", "position", False), _field("boolean", "optional", True),
    _field("boolean", "autoIncremented", True), _field("boolean", "generated", True),
    _field("string", "comment", True), _field("string", "defaultValueExpression", True), _strings("enumValues")],
    "optional": False, "name": "io.debezium.connector.schema.Column", "version": 1}
_TABLE = {"type": "struct", "fields": [
    _field("string", "defaultCharsetName", True), _strings("primaryKeyColumnNames"),
    {"type": "array", "items": _COLUMN, "optional": False, "field": "columns"}, _field("string", "comment", True)],
    "optional": True, "name": "io.debezium.connector.schema.Table", "version": 1, "field": "table"}
_CHANGE = {"type": "struct", "fields": [_field("string", "type", False), _field("string", "id", False), _TABLE],
           "optional": False, "name": "io.debezium.connector.schema.Change", "version": 1}


def key_schema(connector: str) -> bytes:
    return orjson.dumps({"type": "struct", "fields": [_field("string", "databaseName", False)], "optional": False,
                         "name": f"io.debezium.connector.{connector}.SchemaChangeKey", "version": 1})


def value_schema(connector: str) -> bytes:
    return orjson.dumps({"type": "struct", "fields": [
        source_schema(connector), _field("int64", "ts_ms", False), _field("string", "databaseName", True),
        _field("string", "schemaName", True), _field("string", "ddl", True),
        {"type": "array", "items": _CHANGE, "optional": False, "field": "tableChanges"}],
        "optional": False, "name": f"io.debezium.connector.{connector}.SchemaChangeValue", "version": 1})


# java.sql.Types of each type word, as Debezium's DDL parser resolves them
_JDBC = {
    "bit": -7, "tinyint": 5, "bool": 16, "boolean": 16, "smallint": 5, "mediumint": 4, "int": 4, "integer": 4,
    "bigint": -5, "float": 6, "double": 8, "real": 7, "decimal": 3, "dec": 3, "numeric": 2, "fixed": 3,
    "date": 91, "time": 92, "datetime": 93, "timestamp": 2014, "year": 4, "char": 1, "varchar": 12,
    "binary": -2, "varbinary": -3, "tinyblob": 2004, "blob": 2004, "mediumblob": 2004, "longblob": 2004,
    "tinytext": 12, "text": 12, "mediumtext": 12, "longtext": 12, "enum": 1, "set": 1, "json": 1111,
}
_CHARSET_TYPES = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"))
# what Debezium's parser gives a type declared without its arguments
_DEFAULT_SIZE = {"decimal": (10, 0), "dec": (10, 0), "numeric": (10, 0), "fixed": (10, 0), "bit": (1, None)}


def _quoted(label: str) -> str:
    return "'" + label.replace("'", "''") + "'"


def column_struct(column: dict[str, Any], position: int, table_charset: str | None) -> dict[str, Any]:
    """A schema history entry's column as Debezium's ``io.debezium.connector.schema.Column`` (an ENUM or SET
    has the table's charset, unless it declares one)."""
    word = column["type"]
    type_name = word.upper() + (" UNSIGNED" if column["unsigned"] else "")
    labels = column["enum_values"] if word == "enum" else column["set_values"] if word == "set" else None
    length = scale = None
    if labels is not None:  # the longest member; a SET's members all together
        length = max(map(len, labels), default=0) if word == "enum" else len(",".join(labels))
    else:
        args = [a for a in column.get("args", "").split(",") if a.strip().isdigit()]
        length, scale = _DEFAULT_SIZE.get(word, (None, None)) if not args else (int(args[0]), None)
        scale = int(args[1]) if len(args) > 1 else scale
    auto = bool(column.get("auto_increment"))
    charset = None
    if word in _CHARSET_TYPES:
        charset = column.get("charset") or (table_charset if labels is not None else None)
    return {"name": column["name"], "jdbcType": _JDBC.get(word, 1111), "nativeType": None, "typeName": type_name,
            "typeExpression": type_name, "charsetName": charset,
            "length": length, "scale": scale, "position": position, "optional": not column.get("not_null", False),
            # Debezium's parser says generated for AUTO_INCREMENT columns (not for generated ones)
            "autoIncremented": auto, "generated": auto, "comment": column.get("comment"),
            "defaultValueExpression": default_text([(k, t) for k, t in column.get("default") or ()]),
            "enumValues": None if labels is None else [_quoted(x) for x in labels]}


def table_struct(entry: dict[str, Any]) -> dict[str, Any]:
    """A schema history entry as Debezium's ``io.debezium.connector.schema.Table``."""
    return {"defaultCharsetName": entry.get("charset"), "primaryKeyColumnNames": list(entry["primary_key"]),
            "columns": [column_struct(c, i, entry.get("charset")) for i, c in enumerate(entry["columns"], start=1)],
            "comment": entry.get("comment")}


def table_id(name: Name) -> str:
    return '"' + name[0] + '"."' + name[1] + '"'


@dataclass(frozen=True)
class SchemaChange:
    """One event of the schema change topic, before its source block."""

    database: str  # databaseName (the key)
    table: str | None  # source.table: the statement's tables of the database, comma-separated
    ddl: str
    changes: list[dict[str, Any]]  # tableChanges


@dataclass(frozen=True)
class Where:
    """Where a schema change event comes from: its source block's fields but the database and tables."""

    version: str  # source.version
    connector: str  # mariadb, mysql
    name: str  # the topic prefix
    ts_ms: int  # the statement's time
    server_id: int
    gtid: str | None
    file: str
    pos: int
    snapshot: str = "false"


def change_payload(change: SchemaChange, where: Where, now_ns: int) -> dict[str, Any]:
    """The value of a schema change event (``now_ns``: when it is published, its ts_ms)."""
    source = {
        "version": where.version, "connector": where.connector, "name": where.name, "ts_ms": where.ts_ms,
        "snapshot": where.snapshot, "db": change.database, "sequence": None, "ts_us": where.ts_ms * 1000,
        "ts_ns": where.ts_ms * 1_000_000, "table": change.table, "server_id": where.server_id, "gtid": where.gtid,
        "file": where.file, "pos": where.pos, "row": 0, "thread": None, "query": None}
    return {"source": source, "ts_ms": now_ns // 1_000_000, "databaseName": change.database, "schemaName": None,
            "ddl": change.ddl, "tableChanges": change.changes}


_DROP_PREFIX = re.compile(r"\s*DROP\s+(TEMPORARY\s+)?TABLES?\s+(IF\s+EXISTS\s+)?", re.I)
_RENAME_PREFIX = re.compile(r"\s*RENAME\s+TABLES?\s+", re.I)
_PAIRS = re.compile(r"((?:`[^`]*`|[^,`])+)")
_INDEX = re.compile(r"\s*(CREATE\s+(OR\s+REPLACE\s+)?((UNIQUE|FULLTEXT|SPATIAL)\s+)?|DROP\s+)INDEX\b", re.I)


def schema_changes(query: str, database: str, entries: dict[Name, dict[str, Any]] | None,
                   accept: Callable[[str, str], bool]) -> list[SchemaChange]:
    """The events of one statement (``database``: its QUERY event's). ``entries``: the schema history's
    entries written at this statement, by table (None without schema history); ``accept``: the table filter
    (changes of other tables are not published; database-level statements always are, as Debezium's).
    Statements that change no table's columns nor a database (views, routines, TRUNCATE, ...) have none; one
    binlake's parser cannot read is a database-level event with its text."""
    try:
        ops: list[Operation] = parse_ddl(query, database)
    except UnparsedDDL:
        return [SchemaChange(database, None, query, [])]
    out = []
    for op in ops:
        if isinstance(op, (CreateTable, CreateTableLike)):
            out += _tables([(op.name, "CREATE", query)], entries, accept)
        elif isinstance(op, AlterTable):
            changed = _tables([(op.rename_to or op.name, "ALTER", query)], entries, accept)
            if _INDEX.match(query):  # Debezium gives CREATE/DROP INDEX no table changes and source.table ""
                changed = [SchemaChange(c.database, "", c.ddl, []) for c in changed]
            out += changed
        elif isinstance(op, RenameTables):  # an event per pair, its text RENAME TABLE <pair>
            prefix = _RENAME_PREFIX.match(query)
            texts = [t.strip() for t in _PAIRS.findall(query[prefix.end():])] if prefix else []
            if len(texts) != len(op.pairs):
                texts = [query] * len(op.pairs)
            else:
                texts = ["RENAME TABLE " + t for t in texts]
            out += _tables([(new, "ALTER", text) for (_, new), text in zip(op.pairs, texts, strict=True)],
                           entries, accept)
        elif isinstance(op, DropTables):  # an event per table, its text DROP TABLE [IF EXISTS] `db`.`t`
            prefix = _DROP_PREFIX.match(query)
            head = prefix.group() if prefix else "DROP TABLE "
            out += _tables([(name, "DROP", f"{head}`{name[0]}`.`{name[1]}`") for name in op.names], entries, accept)
        elif isinstance(op, (DropDatabase, DatabaseCharset)):
            out.append(SchemaChange(op.database, None, query, []))
    return out


def _tables(changed: list[tuple[Name, str, str]], entries: dict[Name, dict[str, Any]] | None,
            accept: Callable[[str, str], bool]) -> list[SchemaChange]:
    """The events of a statement's tables (name, change type, text); source.table names all of them that are
    in the same database."""
    out = []
    for name, kind, ddl in changed:
        if not accept(*name):
            continue
        changes: list[dict[str, Any]] = []
        if kind == "DROP":
            changes = [{"type": kind, "id": table_id(name), "table": None}]
        elif entries is not None:
            entry = entries.get(name)
            if entry is not None and "columns" in entry:
                changes = [{"type": kind, "id": table_id(name), "table": table_struct(entry)}]
        tables = ",".join(sorted({n[1] for n, _, _ in changed if n[0] == name[0]}))
        out.append(SchemaChange(name[0], tables, ddl, changes))
    return out


SNAPSHOT_TOPIC = "_snapshot_schema"  # the snapshot's schema (snapshot_changes), held for the Debezium formats only


def snapshot_changes(described: dict[str, Any], entries: dict[Name, dict[str, Any]] | None,
                     accept: Callable[[str, str], bool]) -> list[SchemaChange]:
    """The schema change events Debezium's connector publishes at the start of a snapshot, in its order: the
    server's character set; DROP TABLE IF EXISTS of every table; then database by database DROP DATABASE IF
    EXISTS, CREATE DATABASE, USE and its tables' SHOW CREATE TABLE text. ``described``: what the snapshot read
    (``charset``, ``collation``, ``databases`` [[name, charset, collation]], ``tables`` [[db, table, text]]);
    ``entries``: the schema history's entries of the captured tables (None without schema history: CREATE
    events without a table change, as the binlog's)."""
    tables = [(db, t, text) for db, t, text in described["tables"] if accept(db, t)]
    out = [SchemaChange("", None, f"SET character_set_server={described['charset']}, "
                                  f"collation_server={described['collation']}", [])]
    out += [SchemaChange(db, t, f"DROP TABLE IF EXISTS `{db}`.`{t}`",
                         [{"type": "DROP", "id": table_id((db, t)), "table": None}]) for db, t, _ in tables]
    for database, charset, collation in described["databases"]:
        out += [SchemaChange(database, None, f"DROP DATABASE IF EXISTS `{database}`", []),
                SchemaChange(database, None, f"CREATE DATABASE `{database}` CHARSET {charset} COLLATE {collation}",
                             []),
                SchemaChange(database, None, f"USE `{database}`", [])]
        for db, t, text in tables:
            if db == database:
                out += _tables([((db, t), "CREATE", text)], entries, accept)
    return out
