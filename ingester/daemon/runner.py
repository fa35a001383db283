"""The daemon loop: resume from the last checkpoint, stream, publish whole transactions exactly once."""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType

from ..config import Config
from ..records.builder import Checkpoint, Record, RecordBuilder
from ..records.gtid import MariadbGtidState, MysqlGtidSet
from ..sources.replication import BinlogStream, SourceURL
from .kafka_io import Publisher, read_checkpoint

log = logging.getLogger("binlake.run")


def transactional_id(cfg: Config) -> str:
    if cfg.kafka.transactional_id:
        return cfg.kafka.transactional_id
    src = SourceURL.parse(cfg.source.url)
    return f"{cfg.kafka.topic_prefix}.{src.host}:{src.port}"


class Runner:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.stop_requested = False
        self.stats = {"events": 0, "records": 0, "transactions": 0, "commits": 0}

    def request_stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """SIGTERM/SIGINT: finish the current transaction, commit its checkpoint, exit 0."""
        self.stop_requested = True

    def run(self) -> dict[str, int]:
        cfg = self.cfg
        source_id = transactional_id(cfg)
        checkpoint = read_checkpoint(cfg.kafka.bootstrap, cfg.kafka.topic_prefix, source_id)
        start_file, start_pos = cfg.source.start_file, cfg.source.start_position
        builder = RecordBuilder(accept=cfg.filters.accepts)
        if checkpoint:
            start_file, start_pos = checkpoint["file"], checkpoint["position"]
            if ":" in checkpoint["gtid_set"] or not checkpoint["gtid_set"]:
                builder.mysql_gtids = MysqlGtidSet.parse(checkpoint["gtid_set"])
            else:
                builder.mariadb_gtids = MariadbGtidState.parse(checkpoint["gtid_set"])
            log.info("resuming at %s:%s (%s)", start_file, start_pos, checkpoint["gtid_set"] or "no GTIDs")
        stream = BinlogStream(cfg.source_url(), server_id=cfg.source.server_id, start_file=start_file,
                              start_position=start_pos, non_blocking=cfg.exit_at_end,
                              heartbeat=cfg.source.heartbeat)
        publisher = Publisher(cfg.kafka.bootstrap, cfg.kafka.topic_prefix, source_id,
                              compression=cfg.kafka.compression, max_record_bytes=cfg.kafka.max_record_bytes)
        previous = {sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        pending: Checkpoint | None = None
        sent_since_commit = 0
        txns_since_commit = 0
        last_commit = time.monotonic()
        batch_s = cfg.kafka.batch_ms / 1000
        try:
            for raw, ev in stream.frames():
                self.stats["events"] += 1
                assert stream.decoder is not None
                if not builder.file:
                    builder.file = stream.file or ""
                for item in builder.feed(stream.decoder, raw, ev):
                    if type(item) is Record:
                        publisher.send(item)
                        sent_since_commit += 1
                        self.stats["records"] += 1
                    else:
                        if sent_since_commit:
                            txns_since_commit += 1
                        pending = item
                if pending is not None and pending.position == ev.log_pos and (
                        txns_since_commit >= cfg.kafka.batch_transactions or self.stop_requested
                        or time.monotonic() - last_commit >= batch_s):
                    publisher.commit(pending)
                    self.stats["commits"] += 1
                    self.stats["transactions"] += txns_since_commit
                    pending, sent_since_commit, txns_since_commit = None, 0, 0
                    last_commit = time.monotonic()
                    if self.stop_requested:
                        break
            if pending is not None:
                publisher.commit(pending)
                self.stats["commits"] += 1
                self.stats["transactions"] += txns_since_commit
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            publisher.close()
            stream.close()
        return self.stats
