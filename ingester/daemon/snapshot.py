"""The snapshot of ``binlake run``: the selected tables' rows at one consistent point, then streaming
from exactly that point (docs/FORMAT.md, "Snapshots").

MariaDB gives the binlog position of a ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` without any lock
(``binlog_snapshot_file``/``binlog_snapshot_position``); MySQL holds FLUSH TABLES WITH READ LOCK only
while the snapshot transaction starts. Rows are read in primary-key chunks (bounded memory), converted
to the binlog decoder's value representation, and published with the progress in the checkpoint, one
Kafka transaction per chunk (or per group of chunks while a commit is in flight), so a crash resumes
after the last committed chunk, from a newer snapshot: the binlog from the original position is
replayed over it, which converges on the source's rows because binlog events sort after every
snapshot row.
"""

from __future__ import annotations

import binascii
import codecs
import logging
import re
import struct
import sys
import time
from collections.abc import Callable
from collections.abc import Sequence as Items
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import orjson

from ..codec import BinlogError
from ..codec.charsets import decoder_for, is_utf8
from ..codec.constants import ColumnType as T
from ..codec.jsonb import JSON_NULL
from ..codec.table_map import STRING_TYPES, Column, TableMap
from ..column_rules import ColumnRules
from ..records import snapshot as S
from ..records.builder import Checkpoint, Record
from ..records.format import Sequence, file_number
from ..records.mask import value_masker
from ..records.xa import xid_text
from ..schema.history import server_key
from ..schema.table_columns import describe
from ..sources.position import binlog_status
from ..sources.replication import ReplicationError
from ..sources.resultset import ASCII, BYTES, INT, UTF8, UTF8_REPLACE, TextResult
from .source_conn import connect, unbuffered_cursor

if TYPE_CHECKING:
    from .kafka_io import Publisher
    from .streaming import Daemon

log = logging.getLogger("binlake.snapshot")
_TARGET_CHUNK_BYTES = 8 << 20  # chunks shrink below chunk_rows when rows are large (bounded memory)
_SYSTEM_SCHEMAS = ("mysql", "sys", "performance_schema", "information_schema")
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


def _warn_prepared(cur: Any, point: str) -> None:
    """XA transactions prepared at the snapshot's point (XA RECOVER): their changes are in neither the snapshot (not
    committed) nor the stream (prepared before it): said now, and again at an XA COMMIT (records/xa.py)."""
    import pymysql

    try:
        cur.execute("XA RECOVER")
        rows = cur.fetchall()
    except pymysql.err.MySQLError as exc:  # MySQL asks for XA_RECOVER_ADMIN, which binlake's user need not have
        log.debug("XA RECOVER at the snapshot's point: %s", exc)
        return
    for format_id, gtrid_length, bqual_length, data in rows:
        g, b, raw = int(gtrid_length), int(bqual_length), bytes(data)
        log.warning("XA transaction %s is prepared at the snapshot's point %s: its changes are not in the snapshot, "
                    "and if it commits they are not published (its XA PREPARE is before the stream's start): then "
                    "re-read the tables it changed (binlake snapshot --tables db.table,...)",
                    xid_text(int(format_id), raw[:g], raw[g : g + b]), point)


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

    def query(self, limit: int, after: list[Any] | None) -> tuple[str, list[Any]]:
        db, table = self.table_map.database, self.table_map.table
        sql = f"SELECT {', '.join(self.exprs)} FROM {_quote(db)}.{_quote(table)}"
        if not self.key:
            return sql, []
        names = [_quote(self.table_map.columns[i].name) for i in self.key]
        params: list[Any] = []
        if after is not None:  # (k1, k2) > (a, b) spelled out, so every server uses the index range
            terms = []
            for n in range(len(names)):
                terms.append("(" + " AND ".join([f"{c} = %s" for c in names[:n]] + [f"{names[n]} > %s"]) + ")")
                params += [*after[:n], after[n]]
            sql += " WHERE " + " OR ".join(terms)
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


class Progress:
    """Rows done / estimated, rate and ETA: one updating line on a terminal, a log line now and then otherwise."""

    def __init__(self, estimate: int, done: int, stream: IO[str] | None = None, tty: bool | None = None,
                 what: str = "snapshot") -> None:
        self.what = what  # the line's first word
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.estimate = estimate
        self.start_rows = done
        self.started = self.last = time.monotonic()
        self.shown = False

    def line(self, rows: int, table: str, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.started, 1e-6)
        rate = (rows - self.start_rows) / elapsed
        estimate = max(self.estimate, rows)
        left = estimate - rows
        eta = f"{int(left / rate) // 60}:{int(left / rate) % 60:02d}" if rate > 0 else "?"
        pct = 100 * rows // estimate if estimate else 100
        return f"{self.what} {table}: {rows:,}/{estimate:,} rows ({pct}%), {rate:,.0f} rows/s, ETA {eta}"

    def update(self, rows: int, table: str) -> None:
        now = time.monotonic()
        if now - self.last < (0.2 if self.tty else 10.0):
            return
        self.last = now
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line(rows, table, now))
            self.stream.flush()
            self.shown = True
        else:
            log.info("%s", self.line(rows, table, now))

    def finish(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def read_records(reader: TableReader, wire: list[list[Any]], ts: int, max_record_bytes: int,
                 next_seq: Callable[[], Sequence],
                 marks: tuple[bool, bool, bool, bool] | None = None) -> tuple[list[Record], int]:
    """Rows read by SELECT as ``read`` records of at most about ``max_record_bytes`` each (one sequence
    each, from ``next_seq``), and their encoded size: shared by the snapshot and the re-snapshot. ``marks``:
    whether the first row is the table's first, the last its last, the table the snapshot's first, its last
    (the first and last records carry them: records/snapshot.py ``marked_descriptor``)."""
    encoded = orjson.dumps(wire)
    groups = [rows for rows in _split(wire, encoded, max_record_bytes) if rows != b"[]"]
    records = []
    for k, rows in enumerate(groups):
        descriptor = reader.descriptor
        if marks is not None:
            descriptor = S.marked_descriptor(descriptor, marks[0] and k == 0, marks[1] and k == len(groups) - 1,
                                             marks[2], marks[3])
        records.append(_record(reader, descriptor, rows, ts, next_seq, verify=False))
    return records, len(encoded)


def verify_records(reader: TableReader, chunk: dict[str, Any], roles: dict[str, list[list[Any]]], ts: int,
                   max_record_bytes: int, next_seq: Callable[[], Sequence]) -> list[Record]:
    """A verify chunk (``chunk``: run, table, chunk, ...) as records of verify entries, one role each
    (``roles``: the chunk's rows, the keys changed while it was read, its bounds; wire rows), split like
    read_records' rows; every role is at least one entry, even empty, and each entry says its index among
    the chunk's entries and their number, so that the land job knows it has them all."""
    parts = [(role, rows) for role, wire in roles.items()
             for rows in _split(wire, orjson.dumps(wire), max_record_bytes)]
    return [_record(reader, S.verify_descriptor(reader.descriptor, {**chunk, "role": role, "entry": k,
                                                                   "entries": len(parts)}), rows, ts, next_seq,
                    verify=True)
            for k, (role, rows) in enumerate(parts)]


def _split(wire: list[list[Any]], encoded: bytes, max_record_bytes: int) -> list[bytes]:
    parts = 1 + len(encoded) // max_record_bytes
    return [encoded] if parts == 1 else [
        orjson.dumps(wire[k * len(wire) // parts : (k + 1) * len(wire) // parts]) for k in range(parts)]


def _record(reader: TableReader, descriptor: bytes, rows_json: bytes, ts: int, next_seq: Callable[[], Sequence],
            verify: bool) -> Record:
    db, table = reader.table_map.database, reader.table_map.table
    seq = next_seq()
    raw_seq = seq.encode()
    headers = [("binlake.v", b"2"), ("binlake.seq", raw_seq), ("binlake.count", b"1"),
               ("binlake.commit_ts", str(ts).encode()), ("binlake.db", db.encode("utf-8", "surrogateescape")),
               ("binlake.table", table.encode("utf-8", "surrogateescape")),
               ("binlake.index", S.index_entry(raw_seq, ts))]
    return Record(reader.name, reader.name.encode("utf-8", "surrogateescape"),
                  S.snapshot_value(descriptor, [rows_json], verify=verify), headers, seq)


class Snapshotter:
    """Reads and publishes one snapshot, resuming from ``state`` (the committed checkpoint's progress)."""

    def __init__(self, runner: Daemon, publisher: Publisher, state: dict[str, Any] | None) -> None:
        self.runner = runner
        self.cfg = runner.cfg
        self.publisher = publisher
        self.state = state

    def run(self) -> bool:
        """Publish what is left of the snapshot; False when stopped by request before the end."""
        import pymysql

        try:
            conn = connect(self.cfg)
            self.runner.metrics.source_connected = True  # /readyz: reading the source, if not its binlog yet
            try:
                return self._run(conn)
            finally:
                conn.close()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if len(exc.args) > 1 and isinstance(exc.args[0], int) else None
            raise ReplicationError(f"snapshot: error {code or 0}: {exc.args[-1] if exc.args else exc}", code) from None

    def _begin(self, cur: Any, mariadb: bool, first: bool) -> tuple[str, int, str]:
        """Start the consistent-snapshot transaction; the binlog position and GTIDs of its point."""
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if mariadb or not first:  # MariaDB reports the snapshot's position itself: no lock at all
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            if not first:
                return "", 0, ""
            cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
            status = {_text(k).lower(): _text(v) for k, v in cur.fetchall()}
            file, position = status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, position))
            return file, position, _text(cur.fetchone()[0] or b"")
        # MySQL: no commit may happen between the snapshot and reading the position; hold the lock briefly.
        cur.execute("FLUSH TABLES WITH READ LOCK")
        try:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            try:
                return binlog_status(cur)
            except ReplicationError as exc:
                raise ReplicationError(f"snapshot: {exc}") from None
        finally:
            cur.execute("UNLOCK TABLES")

    def _run(self, conn: Any) -> bool:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), UNIX_TIMESTAMP(NOW(6))")
            version, now = cur.fetchone()
            mariadb = b"mariadb" in version.lower()
            cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
            collations = {_text(name): int(cid) for name, cid in cur.fetchall()}
            first = self.state is None
            file, position, gtid_set = self._begin(cur, mariadb, first)
            if first:
                _warn_prepared(cur, f"{file}:{position}")
            if first and self.runner.schema_history:  # the columns at the snapshot's point
                from .schema_io import capture_records

                for record in capture_records(self.cfg, cur, file, position)[1]:
                    self.runner.send(self.publisher, record)
            if first:
                cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES"
                            " WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN %s", (_SYSTEM_SCHEMAS,))
                tables = sorted((_text(db), _text(t), int(n or 0)) for db, t, n in cur.fetchall())
                tables = [t for t in tables if self.cfg.filters.accepts(t[0], t[1])]
                self.state = {"file": file, "position": position, "gtid_set": gtid_set,
                              "ts": int(float(now) * 1_000_000), "pending": [f"{db}.{t}" for db, t, _ in tables],
                              "names": [[db, t] for db, t, _ in tables], "last_pk": None, "rows": 0, "events": 0,
                              "estimate": sum(n for _, _, n in tables)}
                log.info("snapshot of %d tables (about %s rows) at %s:%s (%s)", len(tables),
                         f"{self.state['estimate']:,}", file, position, gtid_set or "no GTIDs")
                if self.cfg.kafka.format != "binlake" and self.cfg.debezium.include_schema_changes:
                    from .snapshot_schema import snapshot_schema_record  # Debezium's schema change events

                    self.runner.send(self.publisher, snapshot_schema_record(
                        cur, [(db, t) for db, t, _ in tables], mariadb, self._seq(),
                        str(Sequence(file_number(file), position))))
            else:
                assert self.state is not None
                log.info("resuming the snapshot of %s:%s at %s (%s rows done)", self.state["file"],
                         self.state["position"], self.state["pending"][0] if self.state["pending"] else "the end",
                         f"{self.state['rows']:,}")
        state = self.state
        self.runner.binlog_names.saw(file_number(state["file"]), state["file"])
        assert state is not None
        assert state is not None
        names = {f"{db}.{t}": (db, t) for db, t in state["names"]}
        names_order = [f"{db}.{t}" for db, t in state["names"]] or [""]
        progress = Progress(state["estimate"], state["rows"])
        metrics = self.runner.metrics
        metrics.snapshot_rows_estimated.set(state["estimate"])
        try:
            while state["pending"]:
                metrics.snapshot_tables_remaining.set(len(state["pending"]))
                name = state["pending"][0]
                db, table = names[name]
                reader = table_reader(conn, db, table, collations, mariadb, self.cfg.filters.column_rules())
                if not reader.table_map.columns:  # dropped since the snapshot began
                    log.warning("snapshot: table %s no longer exists; skipped", name)
                else:
                    self.publisher.mapped(f"{db}.{table}", reader.table_map, b"")  # (before the stream's maps)
                    if not self._table(conn, reader, progress, (name == names_order[0], len(state["pending"]) == 1)):
                        return False
                state["pending"].pop(0)
                state["last_pk"] = None
                self._commit(final=not state["pending"])
                metrics.snapshot_tables_done.inc()
            if not state["names"]:
                self._commit(final=True)
            metrics.snapshot_tables_remaining.set(0)
        finally:
            progress.finish()
        log.info("snapshot done: %s rows of %d tables; streaming from %s:%s", f"{state['rows']:,}",
                 len(state["names"]), state["file"], state["position"])
        return True

    def _table(self, conn: Any, reader: TableReader, progress: Progress, place: tuple[bool, bool]) -> bool:
        """Publish the rest of one table; False when a stop was requested (progress committed). ``place``:
        whether the table is the snapshot's first, its last (Debezium's markers of its rows)."""
        state = self.state
        assert state is not None
        after = _load_key(state["last_pk"])
        first_row = after is None
        held: list[list[Any]] | None = None  # a one-pass read: the chunk before, until the next says it is not last
        size = 0
        limit = min(self.cfg.snapshot_chunk_rows, 256)  # grows while chunks stay small: rows may be large
        # No usable key: one pass, in one Kafka transaction (it cannot resume inside).
        cur = conn.cursor(unbuffered_cursor())
        try:
            if not reader.key:
                cur.execute(*reader.query(0, None))
                result = reader.result(cur)
            while True:
                if reader.key:  # a row more than the chunk: whether the chunk is the table's last
                    cur.execute(*reader.query(limit + 1, after))
                    raw = reader.result(cur).fetch()
                    last = len(raw) <= limit
                    raw = raw[:limit]
                else:
                    raw = result.fetch(limit)
                    if held is not None:  # the chunk before: the table's last when nothing follows
                        size = self._publish(reader, held, (first_row, not raw, *place))
                        first_row, held = False, None
                    last = False
                if not raw:
                    break
                wire = reader.convert(raw)
                if reader.key:
                    size = self._publish(reader, wire, (first_row, last, *place))
                    first_row = False
                else:
                    held = wire  # published with the next fetch (the chunk size adapts to the one before)
                state["rows"] += len(wire)
                self.runner.metrics.snapshot_rows.inc(len(wire))
                self.runner.metrics.last_progress = time.monotonic()  # /healthz: a long snapshot is progress
                self.runner.stats["snapshot_rows"] = self.runner.stats.get("snapshot_rows", 0) + len(wire)
                progress.update(state["rows"], reader.name)
                if reader.key and last:
                    break  # the table's last chunk: committed with the table's end
                if size > _TARGET_CHUNK_BYTES and limit > 1:
                    limit = max(1, limit * _TARGET_CHUNK_BYTES // size)
                elif size < _TARGET_CHUNK_BYTES // 4:
                    limit = min(self.cfg.snapshot_chunk_rows, limit * 2)
                if reader.key:
                    after = reader.key_values(raw[-1], wire[-1])
                    state["last_pk"] = _dump_key(after)
                    if self.runner.stop_requested:
                        self._commit(final=False)
                        return False
                    if not self.publisher.committing:
                        self._commit(final=False)
        finally:
            cur.close()
        return True

    def _publish(self, reader: TableReader, wire: list[list[Any]], marks: tuple[bool, bool, bool, bool]) -> int:
        """Send rows as records of at most about ``max_record_bytes``; returns their encoded size."""
        state = self.state
        assert state is not None
        records, size = read_records(reader, wire, state["ts"], self.cfg.kafka.max_record_bytes, self._next_seq,
                                     marks)
        for record in records:
            self.runner.send(self.publisher, record)
        return size

    def _next_seq(self) -> Sequence:
        seq = self._seq()
        assert self.state is not None
        self.state["events"] += 1
        return seq

    def _seq(self) -> Sequence:
        """Snapshot rows sort after everything before the snapshot's position and before everything at
        or after it: (file, position - 1, n); no event starts at position - 1."""
        state = self.state
        assert state is not None
        if state["events"] >= 1 << 32:
            raise ReplicationError("snapshot: more than 2^32 snapshot events; raise snapshot_chunk_rows")
        return Sequence(file_number(state["file"]), state["position"] - 1, state["events"])

    def _commit(self, final: bool) -> None:
        """Queue the checkpoint of everything published so far (the progress is copied: it changes)."""
        state = self.state
        assert state is not None
        progress = None if final else {**state, "pending": list(state["pending"])}
        checkpoint = Checkpoint(state["file"], state["position"], state["gtid_set"], self._seq(), progress)
        runner = self.runner

        def committed() -> None:  # on the publisher's thread
            done = {"file": checkpoint.file, "position": checkpoint.position, "gtid_set": checkpoint.gtid_set}
            if progress is not None:
                done["snapshot"] = progress
            runner.committed = done
            runner.stats["commits"] += 1

        self.publisher.commit(checkpoint, committed)


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


def _dump_key(values: list[Any]) -> list[Any]:
    return [{"b64": _b64(v)} if isinstance(v, bytes) else v for v in values]


def _load_key(values: list[Any] | None) -> list[Any] | None:
    if values is None:
        return None
    return [binascii.a2b_base64(v["b64"]) if isinstance(v, dict) else v for v in values]
