"""How ``binlake run``'s snapshots read a table (ingester/daemon/snapshot.py, resnapshot.py): its columns from
information_schema described as its binlog TABLE_MAP would describe them, the SELECT of a chunk by its key, and each
column's value converted to the binlog decoder's representation (masks applied as on the binlog path)."""

from __future__ import annotations

import binascii
import codecs
import re
import struct
from collections.abc import Callable
from collections.abc import Sequence as Items
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..codec import BinlogError
from ..codec.charsets import decoder_for, is_utf8
from ..codec.constants import ColumnType as T
from ..codec.jsonb import JSON_NULL
from ..codec.table_map import STRING_TYPES, Column, TableMap
from ..column_rules import ColumnRules
from ..records import snapshot as S
from ..records.mask import value_masker
from ..schema.capture import server_key
from ..schema.table_columns import describe
from ..sources import resultset
from ..sources.replication import ReplicationError
from ..sources.resultset import ASCII, BYTES, INT, JSON_KINDS, UTF8, UTF8_REPLACE, TextResult

_F32 = struct.Struct("<f")
_LABEL = re.compile(r"'((?:[^']|'')*)'")

Converter = Callable[[Any], Any]


class SnapshotError(ReplicationError):
    """The snapshot cannot read a table as it is (the message names the table and column): no retry helps."""

    fatal = True


def _float32(v: str) -> float:
    return _F32.unpack(_F32.pack(float(v)))[0]


def _bits(v: bytes) -> int:
    return int.from_bytes(v, "big")


def _b64(v: bytes) -> str:
    return binascii.b2a_base64(v, newline=False).decode("ascii")


def _vector(v: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(v) // 4}f", v))


def _json(v: bytes) -> Any:
    """A JSON column's text; the null document (SQL NULL never gets here) as its JSONL form."""
    value = orjson.loads(v)
    return JSON_NULL.to_json() if value is None else value


def _text(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


@dataclass
class TableReader:
    """How one table is read: its table map, SELECT expressions, per-column converters, chunk key."""

    name: str  # "<db>.<table>", also the logical topic
    table_map: TableMap
    exprs: list[str]
    converters: list[tuple[int, Converter]]  # columns whose raw value needs converting
    binary: list[int]  # columns whose values are bytes (base64 on the wire)
    key: list[int]  # chunk key columns (the primary key); empty: read in one pass
    descriptor: bytes
    utf8: frozenset[int] = frozenset()  # columns whose converter is UTF-8 decoding, errors replaced
    plan: tuple[bytes, list[tuple[int, Converter]]] | None = field(default=None, repr=False)

    def result(self, cur: Any) -> TextResult:
        """The rows of the query just run on the unbuffered cursor ``cur`` (``convert`` finishes them): read by
        resultset.TextResult, by column kinds planned on the first result."""
        if self.plan is None:
            self.plan = self._plan([encoding for encoding, _ in cur._result.converters])
        return TextResult(cur, self.plan[0], f"snapshot of {self.name}")

    @property
    def json_rows(self) -> bool:
        """Whether the planned columns' values are their text (integers and text, no converter left): the result's
        rows can then go to JSON straight from the packets (TextResult.fetch_json)."""
        return (self.plan is not None and not self.plan[1] and resultset.native()
                and all(k in JSON_KINDS for k in self.plan[0]))

    def _plan(self, encodings: list[str | None]) -> tuple[bytes, list[tuple[int, Converter]]]:
        """Each column's kind, from the encoding pymysql gives it (None: bytes; character_set_results is
        binary, so text is bytes until its converter): integers and UTF-8 text are converted by the kind,
        the other converters stay for ``convert``."""
        converters = dict(self.converters)
        kinds, rest = bytearray(), []
        for i, encoding in enumerate(encodings):
            f = converters.get(i)
            if encoding is None:
                kind = UTF8_REPLACE if i in self.utf8 else BYTES
            elif encoding == "ascii":
                kind = INT if f is int else ASCII
            elif codecs.lookup(encoding).name == "utf-8":
                kind = UTF8
            else:  # pymysql's strict decode, then the converter
                kind = BYTES
                f = _decoding(encoding, f)
            kinds += kind
            if f is not None and kind not in (INT, UTF8_REPLACE):
                rest.append((i, f))
        return bytes(kinds), rest

    def convert(self, rows: list[list[Any]]) -> list[list[Any]]:
        """Rows of ``result`` to wire rows in the binlog decoder's representation (new lists: the rows keep
        the values their keys are selected by)."""
        assert self.plan is not None, "convert before result"
        converters = self.plan[1]
        if not converters:
            return rows
        out = []
        for raw in rows:
            row = list(raw)
            for i, f in converters:
                v = row[i]
                if v is not None:
                    row[i] = f(v)
            out.append(row)
        return out

    def key_values(self, raw: Items[Any], wire: list[Any]) -> list[Any]:
        """The chunk key of a row as SELECT parameters: bytes for binary columns, else the decoded value."""
        return [raw[i] if i in self.binary else wire[i] for i in self.key]

    def query(self, limit: int, after: list[Any] | None, upto: list[Any] | None = None) -> tuple[str, list[Any]]:
        """The SELECT of a chunk: ``limit`` rows by the key, after the key ``after`` (None: from the start), up to
        the key ``upto`` (None: to the end; one-column keys only)."""
        db, table = self.table_map.database, self.table_map.table
        sql = f"SELECT {', '.join(self.exprs)} FROM {_quote(db)}.{_quote(table)}"
        if not self.key:
            return sql, []
        names = [_quote(self.table_map.columns[i].name) for i in self.key]
        params: list[Any] = []
        where = []
        if after is not None:  # (k1, k2) > (a, b) spelled out, so every server uses the index range
            terms = []
            for n in range(len(names)):
                terms.append("(" + " AND ".join([f"{c} = %s" for c in names[:n]] + [f"{names[n]} > %s"]) + ")")
                params += [*after[:n], after[n]]
            where.append(" OR ".join(terms))  # (one term where ``upto`` joins it)
        if upto is not None:
            assert len(names) == 1, "a range's end: one-column keys only"
            where.append(f"{names[0]} <= %s")
            params.append(upto[0])
        if where:
            sql += " WHERE " + " AND ".join(where)
        return f"{sql} ORDER BY {', '.join(names)} LIMIT {int(limit)}", params


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_reader(conn: Any, database: str, table: str, collations: dict[str, int], mariadb: bool,
                 masks: ColumnRules | None = None) -> TableReader:
    """The table's columns from information_schema, described as its binlog TABLE_MAP would describe them;
    ``masks`` (filters.columns) replace the values of their columns as the binlog path does."""
    with conn.cursor() as cur:
        cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLLATION_NAME, NUMERIC_PRECISION, NUMERIC_SCALE,"
                    " DATETIME_PRECISION, CHARACTER_OCTET_LENGTH, IS_NULLABLE, COLUMN_KEY"
                    " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
                    " ORDER BY ORDINAL_POSITION", (database, table))
        infos = cur.fetchall()
        # No ORDER BY: the indexes in the server's order (of two of the same columns, the first is the key)
        cur.execute("SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS"
                    " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0", (database, table))
        unique: dict[str, list[tuple[str, int]]] = {}
        for index, _, column, sub_part in sorted(cur.fetchall(), key=lambda r: int(r[1])):
            unique.setdefault(_text(index), []).append((_text(column), int(sub_part or 0)))
    # The key the server's TABLE_MAP names: the primary key, or the UNIQUE index used in its place
    key_index = server_key({n: [c for c, _ in parts] for n, parts in unique.items()},
                           [_text(info[0]) for info in infos if _text(info[9]) == "PRI"])
    name = f"{database}.{table}"
    columns, exprs, converters, binary = [], [], [], []
    for i, info in enumerate(infos):
        col, expr, conv, is_binary = _column(i, [_text(v) for v in info[:9]], collations, mariadb, name)
        columns.append(col)
        exprs.append(expr)
        if conv is not None:
            converters.append((i, conv))
        if is_binary:
            binary.append(i)
    index = {c.name: c.index for c in columns}
    pk = [(index[c], sub) for c, sub in unique[key_index]] if key_index is not None else None
    tm = TableMap(0, 0, database, table, columns, pk, has_names=True, is_mariadb=mariadb)
    key = [i for i, _ in pk or ()]
    if any(columns[i].type in (T.ENUM, T.SET, T.FLOAT, T.DOUBLE) for i in key):
        key = []  # their SQL comparison is not their ORDER BY order: read in one pass
    if masks is not None and columns:
        converters = _masked(tm, converters, binary, masks)
    utf8 = frozenset(i for i, f in converters if is_utf8(columns[i].collation, mariadb)
                     and f is decoder_for(columns[i].collation, mariadb))
    return TableReader(name, tm, exprs, converters, binary, key, S.encode_descriptor(tm, binary), utf8)


def _masked(tm: TableMap, converters: list[tuple[int, Converter]], binary: list[int],
            masks: ColumnRules) -> list[tuple[int, Converter]]:
    """The converters with those of masked columns replaced by their masks (records/mask.py)."""
    name = f"{tm.database}.{tm.table}"
    out = dict(converters)
    for i, action in masks.for_table(tm).items():
        col = tm.columns[i]
        if any(i == k for k, _ in tm.primary_key or ()):  # chunks and re-snapshots find rows by their key
            raise SnapshotError(f"snapshot of {name}: primary key column {col.name} has a filters.columns rule "
                                f"({action}), which snapshots cannot apply; exclude the table or drop the rule")
        try:
            mask = value_masker(tm, i, action, masks.key)
        except BinlogError as exc:
            raise SnapshotError(f"snapshot of {name}: {exc.reason}") from None
        out[i] = _base64_of(mask) if i in binary else mask
    return list(out.items())


def _column(i: int, info: list[Any], collations: dict[str, int], mariadb: bool,
            table: str) -> tuple[Column, str, Converter | None, bool]:
    """One column: its table-map description (schema/table_columns.py), SELECT expression, converter and whether it
    is bytes."""
    name, data_type, column_type, collation_name, precision, scale, fsp, octets, nullable = info
    labels = [m.replace("''", "'") for m in _LABEL.findall(column_type)]  # ENUM/SET labels keep their case
    data_type, column_type = data_type.lower(), column_type.lower()
    q = _quote(name)
    collation = collations.get(collation_name) if collation_name else None
    column = describe(i, name, data_type, unsigned="unsigned" in column_type, compressed="compressed" in column_type,
                      labels=labels, binary=collation_name is None,
                      collation=collation, precision=int(precision or 0), scale=int(scale or 0), fsp=int(fsp or 0),
                      octets=int(octets or 0), nullable=nullable == "YES", mariadb=mariadb)
    if column is None:
        raise SnapshotError(f"snapshot of {table}: column {name} has type {column_type}, which the snapshot cannot "
                            "read yet (exclude the table with filters.exclude)")
    t = column.type
    if t == T.FLOAT:
        return column, f"CAST({q} AS DOUBLE)", _float32, False
    if t in (T.ENUM, T.SET):
        return column, q, decoder_for(collation, mariadb), False
    if t in STRING_TYPES:
        is_binary = collation_name is None
        return column, q, _b64 if is_binary else decoder_for(collation, mariadb), is_binary
    return column, q, _CONVERTERS.get(t), t == T.GEOMETRY


_CONVERTERS: dict[int, Converter] = {T.TINY: int, T.SHORT: int, T.INT24: int, T.LONG: int, T.LONGLONG: int,
                                     T.YEAR: int, T.DOUBLE: float, T.BIT: _bits, T.JSON: _json, T.GEOMETRY: _b64,
                                     T.VECTOR: _vector}


def _decoding(encoding: str, then: Converter | None) -> Converter:
    """A converter of a column's bytes in ``encoding`` (strictly decoded), then ``then``'s conversion."""
    if then is None:
        return lambda v: v.decode(encoding)
    convert = then
    return lambda v: convert(v.decode(encoding))


def _base64_of(mask: Converter) -> Converter:
    """A binary column's mask whose masked bytes go on the wire as base64, as its values do."""

    def masked(v: Any) -> Any:
        x = mask(v)
        return None if x is None else _b64(x)

    return masked


def dump_key(values: list[Any]) -> list[Any]:
    """A chunk key as JSON (bytes as base64) for the checkpoint."""
    return [{"b64": _b64(v)} if isinstance(v, bytes) else v for v in values]


def load_key(values: list[Any] | None) -> list[Any] | None:
    """A chunk key from the checkpoint (dump_key's)."""
    if values is None:
        return None
    return [binascii.a2b_base64(v["b64"]) if isinstance(v, dict) else v for v in values]
