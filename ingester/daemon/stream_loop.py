"""The daemon's streaming loop: binlog events in, records out, a Kafka commit at transaction ends.

One object owns the loop's state (what was committed last and when, the events not yet reported to the
metrics) and the one rule of when to commit (``commit_due``): at a transaction's end once ``kafka.batch_ms``
has passed since the last commit and no commit is in flight, when the source goes quiet (``idle``), and at
the end. The binlog stream asks the same rule (``commit_wanted``) to stop its native routing at such an end.
Runner._stream builds the parts (schema history, record builder, re-snapshotter, stream) and runs it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from ..codec import header as H
from ..records.builder import RecordBuilder
from ..sources.replication import BinlogStream

if TYPE_CHECKING:
    from .kafka_io import Publisher
    from .resnapshot import Resnapshotter
    from .runner import Runner

log = logging.getLogger("binlake.run")

REPORT_EVERY = 4096  # events between two reports to the metrics
STOP_GRACE = 10.0  # seconds a stop request waits for the current transaction to end


@dataclasses.dataclass
class Unreported:
    """Events read since the last report to the metrics: how many, their bytes, the newest one's timestamp."""

    events: int = 0
    size: int = 0
    newest: int = 0


class StreamLoop:
    def __init__(self, runner: Runner, publisher: Publisher, builder: RecordBuilder, stream: BinlogStream,
                 resnap: Resnapshotter | None) -> None:
        self.runner = runner
        self.publisher = publisher
        self.builder = builder
        self.stream = stream
        self.resnap = resnap
        self.batch_s = runner.cfg.kafka.batch_ms / 1000
        self.committed_transactions = 0  # the builder's transaction count at the last commit
        self.last_commit = time.monotonic()
        self.unreported = Unreported()
        stream.on_idle = self.idle
        stream.commit_wanted = self.commit_due
        stream.stopping = lambda: runner.stop_requested

    def commit_due(self) -> bool:
        """Commit at the next transaction's end: none in flight and ``kafka.batch_ms`` passed (or 0)."""
        return not self.publisher.committing and (
            not self.batch_s or time.monotonic() - self.last_commit >= self.batch_s)

    def report(self) -> None:
        unreported = self.unreported
        self.runner.stats["events"] += unreported.events
        self.runner.metrics.progress(unreported.events, unreported.size, unreported.newest)
        unreported.events = unreported.size = 0

    def commit_pending(self) -> None:
        """Everything routed since the last commit, as one Kafka transaction with its checkpoint."""
        runner, builder, publisher, resnap = self.runner, self.builder, self.publisher, self.resnap
        self.report()
        checkpoint = builder.checkpoint()
        if checkpoint is None:
            return
        for record in builder.flush():
            runner.send(publisher, record)
        if resnap is not None:
            for record in resnap.before_commit():
                runner.send(publisher, record)
            checkpoint.resnapshot = resnap.progress()
        if builder.xa.pending:  # prepared XA transactions still open: into _prepared, and named in the checkpoint
            for prepared, records in builder.xa.persist():
                offsets = [publisher.send_prepared(record) for record in records]
                prepared.offset = offsets[0]
            checkpoint.prepared = builder.xa.checkpoint()
        runner.commit(publisher, checkpoint, builder.transactions - self.committed_transactions)
        self.committed_transactions, self.last_commit = builder.transactions, time.monotonic()
        if resnap is not None and not runner.stop_requested:
            resnap.next_chunk()

    def idle(self) -> None:
        """Everything received is routed and the next read would wait: commit now, after the commit in
        flight if there is one, or the last batch would wait for the next event (a heartbeat away)."""
        if not self.builder.in_transaction:
            self.publisher.wait()
            self.commit_pending()

    def run(self) -> bool:
        """Stream until the end (--exit-at-end) or a stop request; False when a stop came inside a transaction
        that did not end within STOP_GRACE (it is aborted: the next start publishes it)."""
        runner, builder, stream, publisher = self.runner, self.builder, self.stream, self.publisher
        unreported = self.unreported
        feed = builder.feed
        send = runner.send
        dec = None
        if self.resnap is not None:
            self.resnap.next_chunk()  # a re-snapshot the checkpoint left unfinished
        for raw, position in stream.positioned(builder):
            if raw is None:  # a run of events the native router fed to the builder
                events, size, newest = stream.routed
                unreported.events += events
                unreported.size += size
                unreported.newest = newest
                if unreported.events >= REPORT_EVERY:
                    self.report()
            else:
                if dec is None:  # connected: the stream's decoder and file are known now
                    dec = stream.decoder
                    assert dec is not None
                    builder.file = builder.file or stream.file or ""
                    runner.metrics.source_connected = True
                unreported.events += 1
                unreported.size += len(raw)
                if unreported.events >= REPORT_EVERY:
                    unreported.newest = H.timestamp(raw)
                    self.report()
                closed = feed(dec, raw, position)
                if closed:
                    for record in closed:
                        send(publisher, record)
            if builder.in_transaction:
                if runner.stop_requested and time.monotonic() - runner.stop_requested_at > STOP_GRACE:
                    # A huge transaction is still streaming: drop it rather than ignore the operator; the
                    # next start resumes before it (nothing is lost).
                    log.warning("stopping inside a transaction: it will be published on the next start")
                    publisher.abort()
                    return False
                continue
            if raw is not None:
                unreported.newest = H.timestamp(raw)
            if self.commit_due():
                self.commit_pending()
            if runner.stop_requested:
                break
        self.commit_pending()
        publisher.wait()
        return True
