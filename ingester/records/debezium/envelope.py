"""Debezium's change-event layout for one table: topic, key and value schemas, and the payloads of a row
change (before, after, source, transaction, op, ts_ms/us/ns), as Kafka Connect structures (dicts in
schema field order). Serializing them is the converter's job (layouts.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ...codec.table_map import TableMap
from .columns import Modes, column_codec, connect_default

_SNAPSHOT_ENUM = {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
                  "parameters": {"allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,"
                                            "incremental"}, "default": "false", "field": "snapshot"}


def _field(kind: str, name: str, optional: bool) -> dict[str, Any]:
    return {"type": kind, "optional": optional, "field": name}


def source_schema(connector: str) -> dict[str, Any]:
    """The ``source`` block's schema (MySQL and MariaDB share it; only its name differs)."""
    return {"type": "struct", "fields": [
        _field("string", "version", False), _field("string", "connector", False), _field("string", "name", False),
        _field("int64", "ts_ms", False), _SNAPSHOT_ENUM, _field("string", "db", False),
        _field("string", "sequence", True), _field("int64", "ts_us", True), _field("int64", "ts_ns", True),
        _field("string", "table", True), _field("int64", "server_id", False), _field("string", "gtid", True),
        _field("string", "file", False), _field("int64", "pos", False), _field("int32", "row", False),
        _field("int64", "thread", True), _field("string", "query", True)],
        "optional": False, "name": f"io.debezium.connector.{connector}.Source", "version": 1, "field": "source"}


TRANSACTION_BLOCK = {"type": "struct", "fields": [
    _field("string", "id", False), _field("int64", "total_order", False),
    _field("int64", "data_collection_order", False)],
    "optional": True, "name": "event.block", "version": 1, "field": "transaction"}

TRANSACTION_KEY_SCHEMA = {"type": "struct", "fields": [_field("string", "id", False)], "optional": False,
                          "name": "io.debezium.connector.common.TransactionMetadataKey", "version": 1}
TRANSACTION_VALUE_SCHEMA = {"type": "struct", "fields": [
    _field("string", "status", False), _field("string", "id", False), _field("int64", "event_count", True),
    {"type": "array", "items": {"type": "struct", "fields": [
        _field("string", "data_collection", False), _field("int64", "event_count", False)],
        "optional": True, "name": "event.collection", "version": 1}, "optional": True, "field": "data_collections"},
    _field("int64", "ts_ms", False)],
    "optional": False, "name": "io.debezium.connector.common.TransactionMetadataValue", "version": 1}

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def topic_name(*parts: str) -> str:
    """Debezium's topic naming: the non-empty parts joined by dots, other characters than letters, digits,
    '.', '_' and '-' replaced by '_'."""
    return _UNSAFE.sub("_", ".".join(p for p in parts if p))


RowConverter = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class TableCodec:
    """One table map's Debezium shape: topic, schemas (as JSON bytes) and row converters."""

    table_map: TableMap
    topic: str
    key_schema: bytes | None  # None: a table without a primary key has no key
    value_schema: bytes
    key_names: list[str]
    row: RowConverter  # image (codec values by column name) -> the Value struct's payload

    def key(self, image: dict[str, Any]) -> dict[str, Any]:
        return {name: image[name] for name in self.key_names}


def table_codec(tm: TableMap, prefix: str, modes: Modes) -> TableCodec:
    """The Debezium shape of a table as its (named) table map describes it."""
    where = f"`{tm.database}`.`{tm.table}`"
    names = tm.column_names
    columns = [(col, name, column_codec(col, modes, where)) for col, name in zip(tm.columns, names, strict=True)
               if col.visible]
    key_index = {i for i, _ in tm.primary_key or ()}
    fields = []
    for col, name, codec in columns:
        optional = col.nullable and col.index not in key_index
        default = None if optional else connect_default(col, codec, tm.is_mariadb)
        field = {**codec.schema, "optional": optional}
        if default is not None:  # JsonConverter writes it after "optional"
            field = {"type": field.pop("type"), "optional": optional, "default": default, **field}
        fields.append({**field, "field": name})
    base = f"{prefix}.{tm.database}.{tm.table}"
    value_struct = {"type": "struct", "fields": fields, "optional": True, "name": f"{base}.Value"}
    envelope = {"type": "struct", "fields": [
        {**value_struct, "field": "before"}, {**value_struct, "field": "after"},
        source_schema("mariadb" if tm.is_mariadb else "mysql"), TRANSACTION_BLOCK, _field("string", "op", False),
        _field("int64", "ts_ms", True), _field("int64", "ts_us", True), _field("int64", "ts_ns", True)],
        "optional": False, "name": f"{base}.Envelope", "version": 2}
    key_names = [names[i] for i, _ in tm.primary_key or ()]
    key_schema = None
    if key_names:
        by_name = {f["field"]: f for f in fields}
        key_schema = orjson.dumps({"type": "struct", "fields": [{**by_name[n], "optional": False} for n in key_names],
                                   "optional": False, "name": f"{base}.Key"})
    converters = [(name, codec.convert) for _, name, codec in columns]

    def row(image: dict[str, Any]) -> dict[str, Any]:
        out = {}
        get = image.get
        for name, convert in converters:
            value = get(name)
            out[name] = value if value is None or convert is None else convert(value)
        return out

    return TableCodec(tm, topic_name(prefix, tm.database, tm.table), key_schema, orjson.dumps(envelope),
                      key_names, row)


def snapshot_marker(marks: tuple[bool, bool, bool, bool], index: int, last: int) -> str:
    """Debezium's ``source.snapshot`` of a snapshot's row ``index`` (of rows 0..``last`` of an event whose
    ``marks`` say whether its first row is its table's first, its last row the table's last, and whether the
    table is the snapshot's first, its last): the snapshot's last row is ``last``, its first ``first``, a
    table's last and first ``last_in_data_collection``/``first_in_data_collection``, every other ``true``."""
    first_row, last_row = marks[0] and index == 0, marks[1] and index == last
    if last_row and marks[3]:
        return "last"
    if first_row and marks[2]:
        return "first"
    return "last_in_data_collection" if last_row else "first_in_data_collection" if first_row else "true"
