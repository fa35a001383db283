"""The daemon loop: resume from the last checkpoint, stream, publish whole transactions exactly once."""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from ..config import Config
from ..records.builder import Checkpoint, Record, RecordBuilder
from ..records.debezium.columns import Modes
from ..records.debezium.encoder import DebeziumAvro, DebeziumJson, DebeziumOptions
from ..records.format import Sequence, file_number
from ..records.outbound import BinlogNames, Outbound
from ..records.statement import is_statement_record
from ..records.xa import Prepared
from ..schema.collations import Collations, capture_collations
from ..schema.history import SchemaHistory
from ..sources.errors import SourceUnreachable
from ..sources.position import current_position
from ..sources.replication import BinlogStream, ReplicationError, SourceURL
from .failures import BINLOG_GONE, KAFKA_RETRY_MAX, BinlogGone, fatal, kafka_failure
from .kafka_io import ClientErrors, Publisher, read_checkpoint, read_prepared
from .metrics import Metrics
from .producers import RdkafkaProducer
from .resnapshot import Resnapshotter
from .schema_io import history_topic
from .server_id import ServerIdClaim
from .stream_loop import StreamLoop

log = logging.getLogger("binlake.run")
_SWITCH_INTERVAL = 0.0005


def transactional_id(cfg: Config) -> str:
    if cfg.kafka.transactional_id:
        return cfg.kafka.transactional_id
    src = SourceURL.parse(cfg.source.url)
    return f"{cfg.kafka.topic_prefix}.{src.host}:{src.port}"


class Runner:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.stop_requested = False
        self.stop_requested_at = 0.0
        self.stats = {"events": 0, "records": 0, "transactions": 0, "commits": 0, "reconnects": 0}
        self.committed: dict[str, Any] | None = None
        self.metrics = Metrics()
        # follow DDL in a schema history (schema.history: auto or always): records of a server whose TABLE_MAPs carry
        # no column names carry the history's, and table statement entries their tables' columns
        self.schema_history = False
        self.full_metadata = False  # the server's TABLE_MAPs name the columns (binlog_row_metadata=FULL)
        self.collations = Collations()  # the server's, for the history's descriptions of columns
        self.resnap: Resnapshotter | None = None  # on-demand re-snapshots (snapshot_signal_table)
        self.sources = cfg.source_candidates()  # the URL's server, then source.hosts: failover in this order
        self.source_index = 0
        self.claim: ServerIdClaim | None = None  # the server_id's lock on the server streamed from
        self.binlog_names = BinlogNames()  # binlog file names by sequence file number (Debezium's source.file)

    def _outbound(self) -> Outbound | None:
        """What records become on Kafka (kafka.format); None: binlake's records."""
        cfg = self.cfg
        if cfg.kafka.format == "binlake":
            return None
        dbz = cfg.debezium
        options = DebeziumOptions(cfg.kafka.topic_prefix, Modes(
            dbz.decimal_handling_mode, dbz.time_precision_mode, dbz.bigint_unsigned_handling_mode,
            dbz.binary_handling_mode), dbz.schemas_enable, dbz.tombstones_on_delete, dbz.provide_transaction_metadata,
            dbz.include_schema_changes, cfg.filters.accepts,
            (dbz.key_subject_name_strategy, dbz.value_subject_name_strategy),
            frozenset(op for op in dbz.skipped_operations if op != "none"),
            self.schema_history and (cfg.schema.history == "always" or not self.full_metadata))
        if cfg.kafka.format == "debezium-avro":
            from ..registry_client import RegistryClient, SchemaLookup  # HTTP: imported only by those who use it

            assert dbz.schema_registry_url is not None  # load_config insists
            registry = (RegistryClient if dbz.auto_register_schemas else SchemaLookup)(
                dbz.schema_registry_url, *dbz.registry_credentials(), dbz.schema_registry_ca)
            return DebeziumAvro(options, registry, self.binlog_names, cfg.kafka.max_record_bytes)
        return DebeziumJson(options, self.binlog_names, cfg.kafka.max_record_bytes)

    def request_stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """SIGTERM/SIGINT: finish the current transaction, commit its checkpoint, exit 0."""
        if not self.stop_requested:
            self.stop_requested_at = time.monotonic()
        self.stop_requested = True

    def run(self) -> dict[str, int]:
        """Stream until caught up (--exit-at-end) or asked to stop; reconnect after broken connections.

        After any failure the open Kafka transaction is aborted and streaming resumes from the last
        committed checkpoint, so a retry can neither lose nor duplicate a transaction.
        """
        cfg = self.cfg
        source_id = transactional_id(cfg)  # the configured URL's: the same whichever server is streamed from
        http = self.metrics.serve(cfg.metrics_port, cfg.metrics_host) if cfg.metrics_port is not None else None
        self.preflight()
        try:
            self.schema_history = self._schema_history_wanted()
        except BaseException:
            self._unclaim()
            raise
        previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        # The Kafka client's threads wait for the GIL while the stream loop runs: hand it over sooner
        # than the default 5 ms, or every commit round trip waits for it several times.
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(_SWITCH_INTERVAL)
        publisher: Publisher | None = None
        delay = 0.5
        client_errors = ClientErrors()  # why the Kafka client failed (its own lines go to a log file)
        logging.getLogger("kafka").addHandler(client_errors)
        try:
            while True:
                try:
                    if publisher is None:  # (re)connect to Kafka; resume from what it has committed
                        publisher = Publisher(cfg.kafka.bootstrap, cfg.kafka.topic_prefix, source_id,
                                              compression=cfg.kafka.producer_compression(),
                                              max_record_bytes=cfg.kafka.max_record_bytes,
                                              security=cfg.kafka.client_options(), out=self._outbound(),
                                              producer=None if cfg.kafka.format == "binlake" else RdkafkaProducer)
                        self.committed = None if publisher.new_checkpoints else read_checkpoint(
                            cfg.kafka.bootstrap, cfg.kafka.topic_prefix, source_id, cfg.kafka.client_options(),
                            exists=True)
                        if self.schema_history:
                            publisher.ensure_topic(history_topic(cfg.kafka.topic_prefix), "compact")
                        self.metrics.kafka_connected = True
                    cfg = self.cfg  # the server failed over to, if any
                    if self._snapshot_needed() and not self._snapshot(publisher):
                        return self.stats  # stopped on request; the next start resumes the snapshot
                    self._stream(publisher)
                    return self.stats
                except ReplicationError as exc:
                    self.metrics.source_connected = False
                    if publisher is not None:
                        publisher.abort()
                    if fatal(exc):
                        raise
                    if self.stop_requested:  # everything committed stays; the rest is re-read on the next start
                        log.info("%s; stopping as requested", exc)
                        return self.stats
                    pause = delay
                    if isinstance(exc, SourceUnreachable) and len(self.sources) > 1:
                        self._use_source(self.source_index + 1)
                        self._claim_quietly()
                        log.warning("%s; failing over to %s in %.1f s from the last checkpoint", exc,
                                    self.source, pause)
                    else:
                        log.warning("%s; reconnecting in %.1f s from the last checkpoint", exc, pause)
                except Exception as exc:  # Kafka unavailable: stop reading the source until it is back
                    if not kafka_failure(exc):
                        raise
                    if self.stop_requested:
                        log.warning("kafka %s: %s; stopping as requested", cfg.kafka.bootstrap, exc)
                        return self.stats
                    self.metrics.kafka_connected = False
                    if publisher is not None:
                        publisher.discard()
                        publisher = None
                    pause = min(delay, KAFKA_RETRY_MAX)
                    cause = client_errors.take()
                    log.warning("kafka %s: %s%s; retrying in %.1f s from the last committed checkpoint",
                                cfg.kafka.bootstrap, exc, f" ({cause})" if cause else "", pause)
                self.stats["reconnects"] += 1
                self.metrics.reconnects.inc()
                retry_at = time.monotonic() + pause
                while not self.stop_requested and time.monotonic() < retry_at:  # a stop ends the wait
                    time.sleep(0.1)
                if self.stop_requested:
                    log.info("stopping as requested while waiting to retry")
                    return self.stats
                delay = min(delay * 2, 30.0)
        finally:
            logging.getLogger("kafka").removeHandler(client_errors)
            self._unclaim()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            sys.setswitchinterval(switch_interval)
            if publisher is not None:
                publisher.close()
            if http is not None:
                http.shutdown()

    @property
    def source(self) -> str:
        """host:port of the server streamed from (one of ``sources``), for messages and checkpoints."""
        return _host_port(self.sources[self.source_index])

    def _use_source(self, index: int) -> None:
        """Stream from ``sources[index]`` (modulo their number) from now on: the snapshot, schema capture and
        re-snapshot connect through ``self.cfg`` too."""
        self.source_index = index % len(self.sources)
        source = dataclasses.replace(self.cfg.source, url=self.sources[self.source_index])
        self.cfg = dataclasses.replace(self.cfg, source=source)

    def preflight(self) -> None:
        """The doctor's checks at start-up (preflight.start_checks, which waits source.start_wait for a server it
        cannot reach); the first reachable server is streamed from, with its server_id's lock held."""
        from .preflight import start_checks

        index, self.claim = start_checks(self.cfg, self.sources)
        self._use_source(index)

    def _claim_quietly(self) -> None:
        """After a failover: the new server's lock (a live daemon holding it there stops this one; an
        unreachable server is the retry's to report)."""
        self._unclaim()
        try:
            self.claim = ServerIdClaim(self.cfg.source_url(self.sources[self.source_index]),
                                       self.cfg.source.server_id).acquire()
        except SourceUnreachable:
            pass

    def _unclaim(self) -> None:
        if self.claim is not None:
            self.claim.release()
            self.claim = None

    def _schema_history_wanted(self) -> bool:
        """Whether to keep a schema history (``never``: no; ``auto`` and ``always``: yes, on every server), and what
        the server is: its row metadata (``full_metadata``) and collations."""
        from . import schema_io
        from .source_conn import connect

        if self.cfg.schema.history == "never":
            return False
        conn = connect(self.cfg, raw=False)
        try:
            with conn.cursor() as cur:
                self.full_metadata = not schema_io.wanted(cur)
                self.collations = capture_collations(cur)
        finally:
            conn.close()
        return True

    @property
    def lenient_history(self) -> bool:
        """``schema.history: auto`` on a server whose TABLE_MAPs name the columns: the history serves table statement
        entries only, so a DDL it cannot follow is a warning (entries without columns), never a reason to stop."""
        return self.full_metadata and self.cfg.schema.history == "auto"

    def _capture_schema(self, publisher: Publisher) -> SchemaHistory:
        """Capture the selected tables' columns now. On a first start (no checkpoint, no configured start
        file) they are committed with a checkpoint at the server's current position, where that schema
        is valid and streaming then starts; otherwise they go with the next checkpoint."""
        import pymysql

        from . import schema_io
        from .source_conn import connect

        conn = connect(self.cfg, raw=False)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                file, position, gtid_set = current_position(cur, "mariadb" in cur.fetchone()[0].lower())
                history, records = schema_io.capture_records(self.cfg, cur, file, position)
        except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as exc:  # the server went away: retried
            raise ReplicationError(f"{self.source}: the schema history's capture: {exc}",
                                   exc.args[0] if exc.args and isinstance(exc.args[0], int) else None) from None
        finally:
            if conn.open:
                conn.close()
        for record in records:
            self.send(publisher, record)
        if self.lenient_history:  # the stream starts where it did without a history: its records need none
            log.info("schema history: captured at %s:%s; table statements before it come without columns", file,
                     position)
            return history
        if self.committed or self.cfg.source.start_file:
            log.warning("schema history: captured the current schema and assumed it valid at the start position"
                        " (a snapshot captures it at the snapshot's point instead)")
            return history
        log.info("schema history: streaming from %s:%s, where the captured schema is valid", file, position)
        self.commit(publisher, Checkpoint(file, position, gtid_set, Sequence(file_number(file), position)), 0)
        publisher.wait()
        return history

    def _snapshot_needed(self) -> bool:
        """An unfinished snapshot always resumes; ``initial`` starts one without a checkpoint,
        ``when-needed`` also when the checkpoint's binlog has been purged."""
        committed, mode = self.committed, self.cfg.snapshot
        if committed and committed.get("snapshot"):
            return True
        if mode == "never":
            return False
        if not committed:
            return True
        if mode == "when-needed" and committed.get("source") in (None, self.source):  # file names are per server
            from .source_conn import binlog_purged

            if binlog_purged(self.cfg, committed["file"]):
                log.warning("the checkpoint's binlog %s has been purged: taking a new snapshot", committed["file"])
                self.committed = None
                return True
        return False

    def _snapshot(self, publisher: Publisher) -> bool:
        """Publish the snapshot (or its rest); False when stopped on request before its end."""
        from .snapshot import Snapshotter

        progress = self.committed.get("snapshot") if self.committed else None
        started = time.monotonic()
        done = Snapshotter(self, publisher, progress).run()
        publisher.wait()  # every chunk committed: self.committed is the snapshot's position now
        self.stats["snapshot_ms"] = self.stats.get("snapshot_ms", 0) + round((time.monotonic() - started) * 1000)
        return done

    def _stream(self, publisher: Publisher) -> None:
        """Stream from the checkpoint (or source.start_*) through a StreamLoop (stream_loop.py)."""
        cfg = self.cfg
        resnap = self._resnapshotter()
        builder = self._builder(publisher, resnap)
        took_over = self._take_over(builder)
        builder.xa.load = self._prepared_reader(publisher)
        start_file, start_pos = cfg.source.start_file, cfg.source.start_position
        if self.committed:
            builder.xa.resume(self.committed.get("prepared"))
            start_file, start_pos = self.committed["file"], self.committed["position"]
            gtids = self.committed["gtid_set"]
            builder.txn.resume_after(gtids)
            log.info("resuming at %s:%s (%s)", start_file, start_pos, gtids or "no GTIDs")
        gtid_set = None
        if cfg.source.resume == "gtid" or len(self.sources) > 1:  # by executed GTIDs (positions are per
            # server); the first start streams all the server has
            if self.committed:
                gtid_set = self.committed["gtid_set"]
            elif not start_file:
                gtid_set = ""
        stream = BinlogStream(cfg.source_url(), server_id=cfg.source.server_id, start_file=start_file,
                              start_position=start_pos, non_blocking=cfg.exit_at_end,
                              heartbeat=cfg.source.heartbeat, gtid_set=gtid_set)
        loop = StreamLoop(self, publisher, builder, stream, resnap)
        connecting = time.monotonic()
        try:
            if loop.run():
                # From connecting to the source to the last commit: the rate a running daemon sustains.
                self.stats["streaming_ms"] = self.stats.get("streaming_ms", 0) + round(
                    (time.monotonic() - connecting) * 1000)
        except ReplicationError as exc:
            if exc.code != BINLOG_GONE:
                raise
            if took_over is not None:  # the new server's own GTID check
                from .failover import diverged

                raise diverged(exc, took_over, self.source) from None
            where = "the checkpoint's" if self.committed else "source.start_file's"
            raise BinlogGone(f"cannot resume at {where} {start_file or 'oldest binlog'}:{start_pos} (GTIDs "
                             f"{(self.committed or {}).get('gtid_set') or 'none'}) on "
                             f"{self.source}: {exc}; snapshot: when-needed would take a new snapshot") from None
        finally:
            loop.report()
            stream.close()
            if resnap is not None:
                resnap.close()
                self.resnap = None

    def _resnapshotter(self) -> Resnapshotter | None:
        """With snapshot_signal_table: on-demand re-snapshots and verify runs, resumed from the checkpoint."""
        cfg = self.cfg
        if not cfg.snapshot_signal_table:
            return None
        resnap = self.resnap = Resnapshotter(cfg, metrics=self.metrics)
        if self.committed and self.committed.get("resnapshot"):
            # a deep copy: uncommitted progress must not change what a retry resumes from
            resnap.state = json.loads(json.dumps(self.committed["resnapshot"]))
            log.info("resuming the re-snapshot of %s%s", ", ".join(resnap.state["tables"]) or "no table",
                     "".join(f", verify run {v['run']} of {', '.join(v['tables'])}"
                             for v in resnap.state.get("verify", [])))
        return resnap

    def _builder(self, publisher: Publisher, resnap: Resnapshotter | None) -> RecordBuilder:
        """The record builder: the filters (and the signal table, whose rows are signals, never published), the
        schema history if followed, masks, the publisher's hooks."""
        cfg = self.cfg
        history = None
        if self.schema_history:  # what was committed with the checkpoint; captured when there is none yet
            from . import schema_io

            history = schema_io.load(cfg) or self._capture_schema(publisher)
            history.collations = self.collations
            if self.lenient_history:
                history.on_unparsed = "warn"
        accept: Callable[[str, str], bool] = cfg.filters.accepts
        if signal_table := cfg.snapshot_signal_table:

            def with_signals(db: str, table: str) -> bool:
                return f"{db}.{table}" == signal_table or cfg.filters.accepts(db, table)

            accept = with_signals
        builder = RecordBuilder(accept=accept, max_record_bytes=cfg.kafka.max_record_bytes, schema=history,
                                masks=cfg.filters.column_rules(), names=self.binlog_names,
                                together=publisher.across_tables, mapped=self._mapped(publisher),
                                named_entries=cfg.schema.history == "always")
        if resnap is not None:  # partition maintenance's rows read again (reload entries)
            builder.reload = resnap.reload
        return builder

    def _take_over(self, builder: RecordBuilder) -> str | None:
        """With ``source.hosts``, before streaming from a server: refuse one whose GTID history diverges from
        the checkpoint's, and keep sequences growing across servers. The server the checkpoint was read
        from when that is another one (None otherwise)."""
        committed = self.committed
        if not committed:
            return None
        source = self.source
        previous = committed.get("source") or _host_port(self.sources[0])
        if len(self.sources) == 1 or previous == source:
            builder.file_offset = committed.get("file_offset", 0)
            return None
        from .failover import check_history, file_offset
        from .source_conn import connect

        conn = connect(self.cfg, raw=False)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                if "mariadb" in cur.fetchone()[0].lower() and committed["gtid_set"]:
                    check_history(cur, committed["gtid_set"], previous, source)
                builder.file_offset = file_offset(cur, committed)
        finally:
            conn.close()
        log.info("taking over from %s on %s after %s (binlog file numbers + %d in sequences)", previous, source,
                 committed["gtid_set"], builder.file_offset)
        return previous

    def _mapped(self, publisher: Publisher) -> Callable[[str, Any, bytes], None]:
        """What the builder tells of tables first mapped: the publisher (their topics, Avro's schemas), but for the
        signal table's (its rows are signals, never published)."""
        signal = self.cfg.snapshot_signal_table
        if signal is None:
            return publisher.mapped
        return lambda topic, table_map, entry: None if topic == signal else publisher.mapped(topic, table_map, entry)

    def _prepared_reader(self, publisher: Publisher) -> Callable[[list[Prepared]], dict[str, list[Record]]]:
        """How the builder reads prepared XA transactions' records back from _prepared (records/xa.py): once the
        Kafka transactions that put them there have committed."""
        kafka = self.cfg.kafka

        def read(wanted: list[Prepared]) -> dict[str, list[Record]]:
            publisher.wait()
            log.info("reading the records of prepared XA transaction%s %s back from %s._prepared",
                     "s" if len(wanted) > 1 else "", ", ".join(p.xid for p in wanted), kafka.topic_prefix)
            return read_prepared(kafka.bootstrap, kafka.topic_prefix, kafka.client_options(), wanted)

        return read

    def send(self, publisher: Publisher, record: Record) -> None:
        """Publish a record (streaming.Daemon): the re-snapshot takes its signal table's."""
        if self.resnap is not None and self.resnap.takes(record):
            return
        if is_statement_record(record.value):  # of a table perhaps never mapped: its topic asked for
            publisher.expect([record.topic])
        publisher.send(record)
        self.stats["records"] += 1
        self.metrics.records.inc()

    def commit(self, publisher: Publisher, checkpoint: Checkpoint, transactions: int) -> None:
        """Queue the Kafka commit; the bookkeeping happens once the broker has committed it."""
        queued = time.monotonic()
        checkpoint.source = self.source

        def committed() -> None:  # on the publisher's thread
            self.metrics.commit_latency.observe(time.monotonic() - queued)
            self.metrics.transactions.inc(transactions)
            self.metrics.position.labels(checkpoint.file).set(checkpoint.position)
            self.committed = {"file": checkpoint.file, "position": checkpoint.position,
                              "gtid_set": checkpoint.gtid_set, "seq": str(checkpoint.seq),
                              "source": checkpoint.source, "file_offset": checkpoint.file_offset}
            if checkpoint.resnapshot is not None:
                self.committed["resnapshot"] = checkpoint.resnapshot
            if checkpoint.prepared:
                self.committed["prepared"] = checkpoint.prepared
            self.stats["commits"] += 1
            self.stats["transactions"] += transactions

        publisher.commit(checkpoint, committed)


def _host_port(url: str) -> str:
    src = SourceURL.parse(url)
    return f"{src.host}:{src.port}"
