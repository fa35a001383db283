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

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from ..records import snapshot as S
from ..records.builder import Checkpoint, Record
from ..records.format import Sequence, file_number
from ..records.xa import xid_text
from ..sources.position import binlog_status
from ..sources.replication import ReplicationError
from .chunk_reader import encode_groups, split_rows, table_chunks
from .parallel_snapshot import RangeChunk, RangeReader, key_ranges
from .progress import Progress
from .source_conn import connect
from .table_reader import TableReader, _text, dump_key, load_key, table_reader

if TYPE_CHECKING:
    from .kafka_io import Publisher
    from .streaming import Daemon

log = logging.getLogger("binlake.snapshot")
_SYSTEM_SCHEMAS = ("mysql", "sys", "performance_schema", "information_schema")
_SAME_POINT_TRIES = 10  # MariaDB: snapshots taken again until every connection's is at the same binlog position


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


def read_records(reader: TableReader, wire: list[list[Any]], ts: int, max_record_bytes: int,
                 next_seq: Callable[[], Sequence],
                 marks: tuple[bool, bool, bool, bool] | None = None) -> tuple[list[Record], int]:
    """Rows read by SELECT as ``read`` records of at most about ``max_record_bytes`` each (one sequence
    each, from ``next_seq``), and their encoded size: shared by the snapshot and the re-snapshot. ``marks``:
    whether the first row is the table's first, the last its last, the table the snapshot's first, its last
    (the first and last records carry them: records/snapshot.py ``marked_descriptor``)."""
    groups, size = encode_groups(wire, max_record_bytes)
    return group_records(reader, groups, ts, next_seq, marks), size


def group_records(reader: TableReader, groups: list[bytes], ts: int, next_seq: Callable[[], Sequence],
                  marks: tuple[bool, bool, bool, bool] | None = None, compressed: bool = False) -> list[Record]:
    """``read`` records of rows already encoded: one per group (a JSON array of wire rows, or with ``compressed``
    its zstd frame), as read_records."""
    records = []
    for k, rows in enumerate(groups):
        descriptor = reader.descriptor
        if marks is not None:
            descriptor = S.marked_descriptor(descriptor, marks[0] and k == 0, marks[1] and k == len(groups) - 1,
                                             marks[2], marks[3])
        records.append(_record(reader, descriptor, rows, ts, next_seq, verify=False, compressed=compressed))
    return records


def verify_records(reader: TableReader, chunk: dict[str, Any], roles: dict[str, list[list[Any]]], ts: int,
                   max_record_bytes: int, next_seq: Callable[[], Sequence]) -> list[Record]:
    """A verify chunk (``chunk``: run, table, chunk, ...) as records of verify entries, one role each
    (``roles``: the chunk's rows, the keys changed while it was read, its bounds; wire rows), split like
    read_records' rows; every role is at least one entry, even empty, and each entry says its index among
    the chunk's entries and their number, so that the land job knows it has them all."""
    parts = [(role, rows) for role, wire in roles.items()
             for rows in split_rows(wire, orjson.dumps(wire), max_record_bytes)]
    return [_record(reader, S.verify_descriptor(reader.descriptor, {**chunk, "role": role, "entry": k,
                                                                   "entries": len(parts)}), rows, ts, next_seq,
                    verify=True)
            for k, (role, rows) in enumerate(parts)]


def _record(reader: TableReader, descriptor: bytes, rows_json: bytes, ts: int, next_seq: Callable[[], Sequence],
            verify: bool, compressed: bool = False) -> Record:
    db, table = reader.table_map.database, reader.table_map.table
    seq = next_seq()
    raw_seq = seq.encode()
    headers = [("binlake.v", b"2"), ("binlake.seq", raw_seq), ("binlake.count", b"1"),
               ("binlake.commit_ts", str(ts).encode()), ("binlake.db", db.encode("utf-8", "surrogateescape")),
               ("binlake.table", table.encode("utf-8", "surrogateescape")),
               ("binlake.index", S.index_entry(raw_seq, ts))]
    return Record(reader.name, reader.name.encode("utf-8", "surrogateescape"),
                  S.snapshot_value(descriptor, [rows_json], verify=verify, compressed=compressed), headers, seq)


class Snapshotter:
    """Reads and publishes one snapshot, resuming from ``state`` (the committed checkpoint's progress)."""

    def __init__(self, runner: Daemon, publisher: Publisher, state: dict[str, Any] | None) -> None:
        self.runner = runner
        self.cfg = runner.cfg
        self.publisher = publisher
        self.state = state
        self.others: list[Any] = []
        self.reading: str | None = None  # the table being read ("db.table"), named by a source error's line

    def run(self) -> bool:
        """Publish what is left of the snapshot; False when stopped by request before the end."""
        import pymysql

        try:
            conn = connect(self.cfg)
            self.runner.metrics.source_connected = True  # /readyz: reading the source, if not its binlog yet
            # snapshot_parallelism: the other connections that read key ranges, their snapshots opened with conn's
            self.others = [connect(self.cfg) for _ in range(self.cfg.snapshot_parallelism - 1)]
            try:
                return self._run(conn)
            finally:
                for other in [conn, *self.others]:
                    other.close()
        except pymysql.err.MySQLError as exc:
            code = exc.args[0] if len(exc.args) > 1 and isinstance(exc.args[0], int) else None
            where = f" of {self.reading}" if self.reading else ""
            raise ReplicationError(f"snapshot{where}: error {code or 0}: {exc.args[-1] if exc.args else exc}",
                                   code) from None

    def _begin(self, cur: Any, mariadb: bool, first: bool) -> tuple[str, int, str]:
        """Start the consistent-snapshot transactions (this connection's and the others'); the binlog position and
        GTIDs of the point. The others' snapshots are the point's too where the server allows: on MySQL they start
        under the same brief lock; on MariaDB each reports its own position, and the snapshots are taken again
        (``_SAME_POINT_TRIES`` times) until all report the same; where commits never pause that long, theirs are
        newer (their rows converge through the binlog replay, as a resumed snapshot's)."""
        cursors = [cur, *(other.cursor() for other in self.others)]
        for c in cursors:
            c.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if not first:  # a resumed snapshot: any newer point does (see the module's comment)
            for c in cursors:
                c.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            return "", 0, ""
        if mariadb:  # MariaDB reports each snapshot's position itself: no lock at all
            for attempt in range(_SAME_POINT_TRIES):
                points = []
                for c in cursors:
                    c.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                    c.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                    status = {_text(k).lower(): _text(v) for k, v in c.fetchall()}
                    points.append((status["binlog_snapshot_file"], int(status["binlog_snapshot_position"])))
                if len(set(points)) == 1:
                    break
                if attempt + 1 < _SAME_POINT_TRIES:
                    for c in cursors:
                        c.execute("COMMIT")
            else:
                log.info("snapshot: the source committed while its %d connections opened their snapshots, %d times:"
                         " rows read on the others are newer than the point and converge through the binlog "
                         "replay", len(cursors), _SAME_POINT_TRIES)
            file, position = points[0]
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (file, position))
            return file, position, _text(cur.fetchone()[0] or b"")
        # MySQL: no commit may happen between the snapshots and reading the position; hold the lock briefly.
        cur.execute("FLUSH TABLES WITH READ LOCK")
        try:
            for c in cursors:
                c.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
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
                              "names": [[db, t] for db, t, _ in tables], "last_pk": None, "ranges": None,
                              "rows": 0, "events": 0, "estimate": sum(n for _, _, n in tables)}
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
                self.reading = name
                reader = table_reader(conn, db, table, collations, mariadb, self.cfg.filters.column_rules())
                if not reader.table_map.columns:  # dropped since the snapshot began
                    log.warning("snapshot: table %s no longer exists; skipped", name)
                else:
                    self.publisher.mapped(f"{db}.{table}", reader.table_map, b"")  # (before the stream's maps)
                    place = (name == names_order[0], len(state["pending"]) == 1)
                    if state.get("ranges") is None and state["last_pk"] is None:
                        state["ranges"] = key_ranges(conn, reader, self.cfg.snapshot_parallelism,
                                                     self.cfg.snapshot_parallel_rows)
                    if state.get("ranges") is not None:
                        if not self._ranges(conn, reader, progress, place):
                            return False
                    elif not self._table(conn, reader, progress, place):
                        return False
                self.reading = None
                state["pending"].pop(0)
                state["last_pk"] = state["ranges"] = None
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
        whether the table is the snapshot's first, its last (Debezium's markers of its rows). A table without a
        usable key is read in one pass, in one Kafka transaction (it cannot resume inside)."""
        state = self.state
        assert state is not None
        first_row = state["last_pk"] is None
        chunks = table_chunks(conn, reader, load_key(state["last_pk"]), self.cfg.snapshot_chunk_rows,
                              self.cfg.kafka.max_record_bytes)
        try:
            for chunk in chunks:
                self._publish(reader, chunk.rows.groups, (first_row, chunk.last, *place))
                first_row = False
                self._count(reader, chunk.rows.rows, progress)
                if chunk.last or chunk.key is None:
                    continue  # the table's last chunk is committed with the table's end
                state["last_pk"] = dump_key(chunk.key)
                if self.runner.stop_requested:
                    self._commit(final=False)
                    return False
                if not self.publisher.committing:
                    self._commit(final=False)
        finally:
            chunks.close()
        return True

    def _ranges(self, conn: Any, reader: TableReader, progress: Progress, place: tuple[bool, bool]) -> bool:
        """Publish the rest of a table cut into key ranges (parallel_snapshot.py), read on several connections;
        False when a stop was requested (progress committed). Each chunk is held until the next arrives, so that
        the table's last record is known (Debezium's markers)."""
        state = self.state
        assert state is not None
        ranges: list[dict[str, Any]] = state["ranges"]
        first_row = not any(r["rows"] for r in ranges)
        held: RangeChunk | None = None
        chunks = RangeReader(self.cfg, reader, ranges, [conn, *self.others])
        try:
            for chunk in chunks:
                if held is not None:
                    self._publish_part(reader, held, (first_row, False, *place), progress)
                    first_row = False
                    if self.runner.stop_requested:
                        self._commit(final=False)
                        return False
                    if not self.publisher.committing:
                        self._commit(final=False)
                held = chunk
        finally:
            chunks.close()
        if held is not None:  # the table's last chunk: committed with the table's end
            self._publish_part(reader, held, (first_row, True, *place), progress)
        return True

    def _publish_part(self, reader: TableReader, chunk: RangeChunk, marks: tuple[bool, bool, bool, bool],
                      progress: Progress) -> None:
        state = self.state
        assert state is not None
        self._publish(reader, chunk.frames, marks, compressed=True)
        part = state["ranges"][chunk.part]
        part["after"], part["rows"] = dump_key(chunk.key), part["rows"] + chunk.rows
        self._count(reader, chunk.rows, progress)

    def _count(self, reader: TableReader, rows: int, progress: Progress) -> None:
        state = self.state
        assert state is not None
        state["rows"] += rows
        self.runner.metrics.snapshot_rows.inc(rows)
        self.runner.metrics.last_progress = time.monotonic()  # /healthz: a long snapshot is progress
        self.runner.stats["snapshot_rows"] = self.runner.stats.get("snapshot_rows", 0) + rows
        progress.update(state["rows"], reader.name)

    def _publish(self, reader: TableReader, groups: list[bytes], marks: tuple[bool, bool, bool, bool],
                 compressed: bool = False) -> None:
        """Send encoded rows (one record each group; ``compressed``: each group a zstd frame)."""
        state = self.state
        assert state is not None
        for record in group_records(reader, groups, state["ts"], self._next_seq, marks, compressed):
            self.runner.send(self.publisher, record)

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
        progress = None if final else {**state, "pending": list(state["pending"]),  # (copies: they change)
                                       "ranges": [dict(r) for r in state["ranges"]] if state.get("ranges") else None}
        checkpoint = Checkpoint(state["file"], state["position"], state["gtid_set"], self._seq(), progress)
        runner = self.runner

        def committed() -> None:  # on the publisher's thread
            done = {"file": checkpoint.file, "position": checkpoint.position, "gtid_set": checkpoint.gtid_set}
            if progress is not None:
                done["snapshot"] = progress
            runner.committed = done
            runner.stats["commits"] += 1

        self.publisher.commit(checkpoint, committed)
