"""The schema history's starting point read from the server (information_schema): every captured table's columns,
key and indexes, and the databases' default charsets."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..codec.charsets import charset_of
from .column_defaults import default_tokens
from .ddl_operations import (
    Name,
)
from .ddl_tokens import tokens
from .table_schema import BINARY_TYPES, ColumnDef, Index, TableSchema, string_charset


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
