"""A table's schema changed by one ALTER TABLE clause (the schema history's ``apply``): columns added, dropped,
changed, renamed and moved, charsets and defaults, the primary key and indexes; and ``settle``: the indexes in the
server's order, the key the server uses where there is no primary key."""

from __future__ import annotations

import logging

from ..codec.charsets import MAX_CHAR_BYTES, charset_of
from .ddl_operations import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    ChangeColumn,
    ColumnDefault,
    ConvertCharset,
    DropColumn,
    DropIndex,
    DropPrimaryKey,
    Name,
    RenameColumn,
    RenameIndex,
    TableCharset,
    TableComment,
)
from .ddl_tokens import UnparsedDDL
from .table_schema import TEXT_TYPES, ColumnDef, Index, TableSchema, with_charset

log = logging.getLogger("binlake.schema")


_TEXT_BYTES = {"tinytext": 255, "text": 65535, "mediumtext": (1 << 24) - 1, "longtext": (1 << 32) - 1}


def _text_type_for(type_word: str, old: str | None, new: str | None) -> str:
    """The TEXT type a converted column gets: the server keeps its length in characters, growing the type
    when the new charset needs more bytes for them (never shrinking it)."""
    if type_word not in _TEXT_BYTES or old is None or new is None:
        return type_word
    chars = _TEXT_BYTES[type_word] // MAX_CHAR_BYTES.get(old, 1)
    need = chars * MAX_CHAR_BYTES.get(new, 1)
    return type_word if need <= _TEXT_BYTES[type_word] else next(t for t, n in _TEXT_BYTES.items() if n >= need)


def alter(schema: TableSchema, spec: AlterSpec, table: Name, database: tuple[str | None, str | None]) -> bool:
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
