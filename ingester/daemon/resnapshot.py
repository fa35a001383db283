"""On-demand re-snapshot of chosen tables while streaming continues (watermarks, as in Netflix's DBLog).

``binlake snapshot`` inserts an ``execute-snapshot`` row into the signal table; the daemon sees it in
its own binlog stream. It then reads the tables in primary-key chunks: for each chunk it inserts a low
watermark row, SELECTs the chunk, inserts a high watermark row. Until the stream reaches the high
watermark, every key changed by a rows event of the table is dropped from the chunk: those changes are
published anyway, with their full row images, so they carry the row's newest state. At the high
watermark the rest of the chunk is published as ``read`` rows, sequenced right after the watermark
event, in the same Kafka transaction as the checkpoint that records the progress (table, last key):
a restart continues with the next chunk, exactly once. Memory: one chunk.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..codec import events as E
from ..records.builder import Record
from ..records.format import Sequence, record_events
from ..records.open_records import statement_record
from ..records.statement import TableStatement, TableStatementEvent
from .progress import Progress
from .snapshot import read_records, verify_records
from .source_conn import connect, unbuffered_cursor
from .table_reader import SnapshotError, TableReader, _text, dump_key, load_key, table_reader

if TYPE_CHECKING:
    from ..config import Config
    from .metrics import Metrics

log = logging.getLogger("binlake.resnapshot")
EXECUTE = "execute-snapshot"
VERIFY = "execute-verify"  # data: {"run": id, "tables": ["db.t", ...]}
LOW, HIGH = "snapshot-window-open", "snapshot-window-close"
SKIPPED = "snapshot-table-skipped"  # a requested table the daemon cannot read (data: {"table", "reason"})
# A watermark chunk's fixed cost (two watermark rows and their way back through the binlog, a Kafka transaction)
# is spread over more rows while chunks read fast: from snapshot_chunk_rows, doubled while a chunk's read takes
# under _FAST_S, up to snapshot_chunk_growth times; halved once one takes over _SLOW_S (large rows, a busy server)
_FAST_S, _SLOW_S = 0.25, 1.0
SIGNAL_DDL = ("CREATE TABLE IF NOT EXISTS {} (id VARCHAR(64) NOT NULL PRIMARY KEY, type VARCHAR(32) NOT NULL,"
              " data TEXT)")


def quoted(name: str) -> str:
    """``db.table`` as a quoted SQL name."""
    if name.count(".") != 1:
        raise SnapshotError(f"snapshot_signal_table: must be <db>.<table>, got {name!r}")
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split(".", 1))


def signal(cur: Any, signal_table: str, kind: str, data: dict[str, Any]) -> str:
    """Insert a signal row for the daemon (``kind``: EXECUTE, data {"tables": [...]}, or VERIFY, data
    {"run": id, "tables": [...]}); returns its id."""
    signal_id = uuid.uuid4().hex
    cur.execute(f"INSERT INTO {quoted(signal_table)} (id, type, data) VALUES (%s, %s, %s)",
                (signal_id, kind, json.dumps(data)))
    return signal_id


@dataclass
class _Chunk:
    reader: TableReader
    high_id: str
    rows: dict[tuple[Any, ...], list[Any]]  # key -> wire row, in key order
    last_key: list[Any] | None  # None: the table's last chunk
    selected: int = 0
    high: tuple[Sequence, int] | None = None  # the high watermark's sequence and commit time, once seen
    dropped: int = 0
    verify: dict[str, Any] | None = None  # the verify run the chunk belongs to (None: a re-snapshot's)
    low: list[Any] | None = None  # verify: the chunk's exclusive lower key (None: from the table's start)
    # verify: every key of the table changed between the watermarks (the chunk's or not: rows inserted or
    # deleted there too), as a row of the key columns: excluded from the comparison
    changed: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    # a table statement (TRUNCATE, ALTER, a partition's...) between the watermarks: the rows read may be from before
    # or after it, and its columns too: the chunk is read again
    void: str | None = None


@dataclass
class ChunkSize:
    """The rows of a table's next watermark chunk, from how long the last one took to read (``_FAST_S`` ...)."""

    least: int  # snapshot_chunk_rows
    growth: int = 20  # snapshot_chunk_growth
    table: str = ""
    rows: int = 0

    def of(self, table: str) -> int:
        """The rows of ``table``'s next chunk (a new table starts again from ``least``)."""
        if table != self.table:
            self.table, self.rows = table, self.least
        return self.rows

    def read(self, rows: int, seconds: float) -> None:
        """A chunk of ``rows`` was read in ``seconds`` (a table's last, shorter chunk says nothing)."""
        if rows < self.rows:
            return
        if seconds < _FAST_S:
            self.rows = min(self.least * self.growth, self.rows * 2)
        elif seconds > _SLOW_S:
            self.rows = max(self.least, self.rows // 2)


@dataclass
class Resnapshotter:
    """Follows the signal table's records and runs one chunk at a time (the daemon's stream loop calls it)."""

    cfg: Config
    state: dict[str, Any] = field(default_factory=lambda: {"tables": [], "last_pk": None, "rows": 0})
    metrics: Metrics | None = None
    _progress: Progress | None = None  # of the table being read
    chunk: _Chunk | None = None
    signal_table: str = field(init=False, default="")
    _conn: Any = None
    _collations: dict[str, int] = field(default_factory=dict)
    pending: list[Record] = field(default_factory=list)  # reload entries to publish (`binlake snapshot --replace`)
    _mariadb: bool = True
    size: ChunkSize = field(init=False)

    def __post_init__(self) -> None:
        assert self.cfg.snapshot_signal_table
        self.size = ChunkSize(self.cfg.snapshot_chunk_rows, self.cfg.snapshot_chunk_growth)
        quoted(self.cfg.snapshot_signal_table)  # a clear error at start-up for a name without one dot
        self.signal_table = self.cfg.snapshot_signal_table

    def takes(self, record: Record) -> bool:
        """Look at a record about to be published: True for the signal table's (not published)."""
        chunk = self.chunk
        if record.topic == self.signal_table:
            for item in record_events(dict(record.headers), record.value, f"topic {record.topic}"):
                if isinstance(item.event, E.RowsEvent) and item.event.kind == "write":
                    for row in item.event.rows:
                        self._signal(list(row["after"].values()), item.seq, item.commit_ts)
            return True
        if chunk is not None and record.topic == chunk.reader.name:
            names = [chunk.reader.table_map.columns[i].name for i in chunk.reader.key]
            for item in record_events(dict(record.headers), record.value, f"topic {record.topic}"):
                if isinstance(item.event, TableStatementEvent) and (chunk.high is None or
                                                                    item.seq.encode() < chunk.high[0].encode()):
                    chunk.void = item.event.statement.statement
                elif isinstance(item.event, E.RowsEvent) and (chunk.high is None or
                                                              item.seq.encode() < chunk.high[0].encode()):
                    for row in item.event.rows:
                        for image in (row.get("before"), row.get("after")):
                            if image is None:
                                continue
                            key = tuple(image[n] for n in names)
                            if chunk.rows.pop(key, None):
                                chunk.dropped += 1
                            if chunk.verify is not None:
                                chunk.changed[key] = self._key_row(chunk.reader, key)
        return False

    @staticmethod
    def _key_row(reader: TableReader, key: tuple[Any, ...]) -> list[Any]:
        """A row of the table with only its key columns, in the wire representation (base64 for binary)."""
        row: list[Any] = [None] * len(reader.table_map.columns)
        for i, value in zip(reader.key, key, strict=True):
            row[i] = dump_key([value])[0]["b64"] if isinstance(value, bytes) and i in reader.binary else value
        return row

    def reload(self, db: str, table: str) -> bool:
        """Queue a re-read of a table whose rows a statement changed without naming them (partition maintenance:
        builder.RecordBuilder.reload), with the checkpoint of the statement's transaction. A table being read
        already starts again from its first key: the reload entry before the rows drops what was published.
        False where the table cannot be read in chunks (gone, no usable key, filtered out): said in one line."""
        name = f"{db}.{table}"
        if self._reader(name, report=False) is None:
            log.warning("%s: partition maintenance removed or moved rows the binlog does not name, and the table "
                        "cannot be read again in key chunks: a lake mirror of it may keep rows the server no "
                        "longer has (`binlake verify --tables %s` names them)", name, name)
            return False
        tables = self.state["tables"]
        if tables and tables[0] == name:
            if self.chunk is not None and self.chunk.verify is None and self.chunk.reader.name == name:
                self.chunk = None  # its watermarks are let pass
            self.state.update(last_pk=None, current=None)
        elif name not in tables:
            tables.append(name)
        log.info("%s: read again, its rows in the lake replaced (a reload entry before the re-snapshot)", name)
        return True

    def _signal(self, values: list[Any], seq: Sequence, commit_ts: int) -> None:
        signal_id, kind, data = (_text(v) for v in values[:3])
        if kind == EXECUTE:
            try:
                request = json.loads(data)
                wanted, replace = [str(t) for t in request["tables"]], bool(request.get("replace", False))
            except (ValueError, KeyError, TypeError, AttributeError):
                log.error("signal %s: bad data %r (expected {\"tables\": [\"db.t\", ...]}); ignored", signal_id, data)
                return
            if replace:  # the tables' lake rows dropped right after the signal: the re-snapshot makes them again
                reloads = [t for t in wanted if self.reload(*t.split(".", 1))]
                self.pending += [self._reload_record(t, Sequence(seq.file_number, seq.position, seq.sub + 1 + i),
                                                     commit_ts) for i, t in enumerate(reloads)]
                log.info("signal %s: %s replaced by a re-snapshot", signal_id, ", ".join(reloads) or "no table")
                return
            tables = [t for t in wanted if t not in self.state["tables"]]
            log.info("signal %s: re-snapshot of %s", signal_id, ", ".join(tables) or "tables already pending")
            self.state["tables"] += tables
        elif kind == VERIFY:
            try:
                request = json.loads(data)
                run, tables = str(request["run"]), [str(t) for t in request["tables"]]
            except (ValueError, KeyError, TypeError):
                log.error("signal %s: bad data %r (expected {\"run\": id, \"tables\": [\"db.t\", ...]}); ignored",
                          signal_id, data)
                return
            log.info("signal %s: verify run %s of %s", signal_id, run, ", ".join(tables))
            self.state.setdefault("verify", []).append({"run": run, "tables": tables, "last_pk": None, "chunk": 0})
        elif kind == HIGH and self.chunk is not None and signal_id == self.chunk.high_id:
            self.chunk.high = (seq, commit_ts)

    def _reload_record(self, name: str, seq: Sequence, commit_ts: int) -> Record:
        """A reload entry (records/statement.py) in the table's topic: `binlake snapshot --replace`."""
        db, _, table = name.partition(".")
        entry = TableStatement("reload", db, table, f"binlake snapshot --replace --tables {name}",
                               micros=commit_ts, mariadb=self._mariadb)
        return statement_record(name, (db, table), [(seq, entry)], commit_ts, b"")

    def before_commit(self) -> list[Record]:
        """At a transaction boundary: reload entries of ``binlake snapshot --replace``, then the chunk's rows once
        the stream has passed its high watermark."""
        pending, self.pending = self.pending, []
        return pending + self._chunk_rows()

    def _chunk_rows(self) -> list[Record]:
        chunk = self.chunk
        if chunk is None or chunk.high is None:
            return []
        if chunk.void is not None:  # read again (the progress stays where it was)
            log.info("%s of %s: the chunk is read again after %s", "verify" if chunk.verify else "re-snapshot",
                     chunk.reader.name, " ".join(chunk.void.split())[:200])
            self.chunk = None
            return []
        if chunk.verify is not None:
            return self._verified(chunk)
        seq, commit_ts = chunk.high
        sub = [seq.sub]

        def next_seq() -> Sequence:  # right after the high watermark's event: no other event is published there
            sub[0] += 1
            return Sequence(seq.file_number, seq.position, sub[0])

        records, _ = read_records(chunk.reader, list(chunk.rows.values()), commit_ts,
                                  self.cfg.kafka.max_record_bytes, next_seq) if chunk.rows else ([], 0)
        self.state["rows"] += len(chunk.rows)
        self.state["table_rows"] = self.state.get("table_rows", 0) + chunk.selected
        log.debug("re-snapshot %s: %d rows read, %d changed meanwhile (published as changes)", chunk.reader.name,
                  len(chunk.rows), chunk.dropped)
        if self.metrics is not None:
            self.metrics.resnapshot_rows.inc(len(chunk.rows))
        if self._progress is None:
            self._progress = Progress(self.state.get("estimate", 0), self.state["table_rows"] - chunk.selected)
        self._progress.update(self.state["table_rows"], f"re-snapshot of {chunk.reader.name}")
        if chunk.last_key is None:
            self.state["tables"].pop(0)
            self.state["last_pk"] = None
            self._progress.finish()
            log.info("re-snapshot of %s done: %s rows read", chunk.reader.name, f"{self.state['table_rows']:,}")
            self._progress = None
            if self.metrics is not None:
                self.metrics.resnapshot_tables_done.inc()
                self.metrics.resnapshot_tables_remaining.set(len(self.state["tables"]))
        else:
            self.state["last_pk"] = dump_key(chunk.last_key)
        self.chunk = None
        return records

    def _verified(self, chunk: _Chunk) -> list[Record]:
        """A verify chunk past its high watermark: its rows (but those changed in the window), the keys changed
        in the window and its bounds as verify entries in the table's topic, right after the watermark."""
        assert chunk.verify is not None and chunk.high is not None
        seq, commit_ts = chunk.high
        run = chunk.verify
        bounds = [self._key_row(chunk.reader, tuple(load_key(k) or ())) for k in (chunk.low, chunk.last_key)
                  if k is not None]
        meta = {"run": run["run"], "table": chunk.reader.name, "chunk": run["chunk"], "at": str(seq),
                "at_seq": seq.encode().hex(), "key": [chunk.reader.table_map.columns[i].name for i in chunk.reader.key],
                "low": chunk.low is not None, "high": chunk.last_key is not None, "rows": len(chunk.rows),
                "changed": len(chunk.changed)}
        sub = [seq.sub]

        def next_seq() -> Sequence:
            sub[0] += 1
            return Sequence(seq.file_number, seq.position, sub[0])

        records = verify_records(chunk.reader, meta, {"rows": list(chunk.rows.values()),
                                                      "changed": list(chunk.changed.values()), "bounds": bounds},
                                 commit_ts, self.cfg.kafka.max_record_bytes, next_seq)
        run["chunk"] += 1
        if chunk.last_key is None:
            run["tables"].pop(0)
            run["last_pk"] = None
            if not run["tables"]:
                self.state["verify"].pop(0)
        else:
            run["last_pk"] = dump_key(chunk.last_key)
        if self.metrics is not None:
            self.metrics.verify_rows.inc(len(chunk.rows))
        self.chunk = None
        return records

    def progress(self) -> dict[str, Any] | None:
        """What the checkpoint records: the tables left and the last key published, and the verify runs
        left (a copy)."""
        if not self.state["tables"] and not self.state.get("verify"):
            return None
        return orjson.loads(orjson.dumps(self.state))

    def next_chunk(self) -> None:
        """Start the next chunk unless one is open: low watermark, SELECT, high watermark. Re-snapshots go
        first; verify runs after them."""
        if self.chunk is None and not self.state["tables"]:
            self._next_verify_chunk()
        while self.chunk is None and self.state["tables"]:
            name = self.state["tables"][0]
            if self.metrics is not None:
                self.metrics.resnapshot_tables_remaining.set(len(self.state["tables"]))
            reader = self._reader(name)
            if reader is None:
                self.state["tables"].pop(0)
                self.state["last_pk"] = None
                continue
            if self.state.get("current") != name or self.state["last_pk"] is None:
                self.state.update(current=name, table_rows=0, estimate=self._estimate(reader))
            if self.metrics is not None:
                self.metrics.resnapshot_rows_estimated.set(self.state["estimate"])
            self.chunk = self._select(reader)

    def _next_verify_chunk(self) -> None:
        runs = self.state.get("verify") or []
        while self.chunk is None and runs:
            run = runs[0]
            if not run["tables"]:
                runs.pop(0)
                continue
            reader = self._reader(run["tables"][0])
            if reader is None:
                run["tables"].pop(0)
                run["last_pk"] = None
                continue
            low = run["last_pk"]
            self.chunk = self._select(reader, low, {"table": reader.name, "verify": run["run"],
                                                    "chunk": run["chunk"]})
            self.chunk.verify, self.chunk.low = run, low

    def _reader(self, name: str, report: bool = True) -> TableReader | None:
        conn = self._connection()
        db, _, table = name.partition(".")
        reader = table_reader(conn, db, table, self._collations, self._mariadb, self.cfg.filters.column_rules())
        if not reader.table_map.columns:
            reason = "does not exist"
        elif not reader.key:
            reason = "has no primary key usable for chunks"
        elif not self.cfg.filters.accepts(db, table):
            reason = "is excluded by the filters"
        else:
            return reader
        log.warning("re-snapshot: table %s %s; skipped", name, reason)
        if not report:
            return None
        with conn.cursor() as cur:  # for `binlake snapshot --wait`
            cur.execute(f"INSERT INTO {quoted(self.signal_table)} (id, type, data) VALUES (%s, %s, %s)",
                        (uuid.uuid4().hex, SKIPPED, json.dumps({"table": name, "reason": reason})))
        return None

    def _estimate(self, reader: TableReader) -> int:
        db, _, table = reader.name.partition(".")
        with self._connection().cursor() as cur:
            cur.execute("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        (db, table))
            row = cur.fetchone()
        return int(row[0] or 0) if row else 0

    def _select(self, reader: TableReader, after: list[Any] | None = None,
                high: dict[str, Any] | None = None) -> _Chunk:
        """A chunk of ``reader``'s table after the key ``after`` (the re-snapshot's last key where None) between
        two watermarks; ``high``: the high watermark's data (the re-snapshot's progress where None)."""
        high_id = uuid.uuid4().hex
        limit = self.size.of(reader.name)
        signal = quoted(self.signal_table)
        with self._connection().cursor(unbuffered_cursor()) as cur:
            insert = f"INSERT INTO {signal} (id, type, data) VALUES (%s, %s, %s)"
            cur.execute(insert, (uuid.uuid4().hex, LOW, reader.name))
            started = time.monotonic()
            cur.execute(*reader.query(limit, load_key(after if high is not None else self.state["last_pk"])))
            raw = reader.result(cur).fetch()
            wire = reader.convert(raw)
            self.size.read(len(raw), time.monotonic() - started)
            last = reader.key_values(raw[-1], wire[-1]) if len(raw) == limit else None
            # the high watermark says how far the table is, for `binlake snapshot --wait`
            cur.execute(insert, (high_id, HIGH, json.dumps(high if high is not None else {
                "table": reader.name, "rows": self.state.get("table_rows", 0) + len(raw),
                "estimate": self.state.get("estimate", 0), "last": last is None})))
        rows = {tuple(reader.key_values(r, w)): w for r, w in zip(raw, wire, strict=True)}
        return _Chunk(reader, high_id, rows, last, len(raw))

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = connect(self.cfg)
            self._conn.autocommit(True)  # every chunk reads the newest rows, every watermark commits at once
            with self._conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                self._mariadb = b"mariadb" in cur.fetchone()[0].lower()
                cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
                self._collations = {_text(n): int(i) for n, i in cur.fetchall()}
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
