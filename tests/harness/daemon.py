"""Running the daemon in tests, and what it published against what the server wrote: GTID ledgers on both
sides, and a watcher of its committed checkpoints."""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ingester.cli.main import main
from ingester.codec import events as E
from ingester.daemon.kafka_io import offsets_topic, read_checkpoint
from ingester.records.format import read_index
from ingester.records.statement import TABLE_STATEMENT
from ingester.sources.binlog_file import read_binlog_file

# `binlake` as a process of its own
BINLAKE = [sys.executable, "-m", "ingester.cli.main"]


def run_daemon(server, kafka, prefix: str, *extra: str) -> None:
    """`binlake run --exit-at-end` in this process (server id 4545): the source's binlog so far, published (and
    visible to read_committed readers)."""
    assert main(["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix,
                 "--server-id", "4545", "--exit-at-end", *extra]) == 0
    settled(kafka, prefix)


def settled(kafka, prefix: str, timeout: float = 30.0) -> None:
    """Until read_committed readers of the prefix's topics see all their messages: a commit's markers reach the
    partitions a moment after the commit returns (seconds on a busy broker), and until then their last stable
    offset stops before the transaction. Gives up quietly after ``timeout`` (a transaction may be left open)."""
    from kafka import KafkaConsumer, TopicPartition

    committed = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed",
                              enable_auto_commit=False, group_id=None)
    try:
        topics = [t for t in committed.topics() if t == prefix or t.startswith(prefix + ".")]
        parts = [TopicPartition(t, p) for t in topics for p in committed.partitions_for_topic(t) or ()]
        if parts:
            stable_end_offsets(kafka, committed, parts, timeout)
    finally:
        committed.close()


def stable_end_offsets(kafka, committed: Any, parts: list[Any], timeout: float) -> dict[Any, int]:
    """The partitions' end offsets for the read_committed consumer ``committed`` once their last stable offsets
    reached their ends (no transaction's markers still to come), or as they are after ``timeout``."""
    from kafka import KafkaConsumer

    everything = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False, group_id=None)
    try:
        deadline = time.monotonic() + timeout
        while True:
            end = committed.end_offsets(parts)
            if end == everything.end_offsets(parts) or time.monotonic() > deadline:
                return end
            time.sleep(0.1)
    finally:
        everything.close()


def start_daemon(server, kafka, prefix: str, server_id: int, log, env: dict[str, str] | None = None,
                 *extra: str) -> subprocess.Popen:
    """`binlake run` as a process of its own (stderr to ``log``), the working tree importable."""
    return subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix",
                             prefix, "--server-id", str(server_id), *extra],
                            env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})}, stderr=log)


def caught_up(server, kafka, prefix: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the daemon's checkpoint is the server's current position (it streams); fails if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the daemon exited with {proc.returncode}"
        checkpoint = read_checkpoint(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")
        pos = server.current_binlog_position()
        if checkpoint and (checkpoint["file"], checkpoint["position"]) == (pos.file, pos.position):
            return
        time.sleep(0.2)
    raise AssertionError(f"the daemon did not catch up within {timeout:.0f} s")


def rows_events_per_gtid(server, database: str) -> collections.Counter:
    """What the server wrote: rows events per GTID, read from its own binlog files."""
    server.flush_logs()
    expected: collections.Counter = collections.Counter()
    gtid = ""
    for f in server.binlog_files():
        for ev in read_binlog_file(f):
            if isinstance(ev, E.MariadbGtidEvent):
                gtid = ev.gtid
            elif isinstance(ev, E.RowsEvent) and ev.database == database:
                expected[gtid] += 1
    return expected


def gtid_rows(kafka, prefix: str) -> collections.Counter:
    """What the daemon published: how often each (GTID, sequence) of a rows event is in the committed records of the
    prefix's table topics, which each hold their sequences in increasing order (table statement entries, at their
    statements' sequences, are no rows events)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    topics = [t for t in consumer.topics() if t.startswith(prefix + ".")
              and not t.endswith(("._offsets", "._schema", "._schema_history", "._prepared"))]
    parts = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    end = consumer.end_offsets(parts)
    seen: collections.Counter = collections.Counter()
    last_seq: dict = {}
    while any(consumer.position(tp) < end[tp] for tp in parts):
        for tp, msgs in consumer.poll(timeout_ms=1000).items():
            for m in msgs:
                for entry in read_index(dict(m.headers)["binlake.index"]):
                    assert tp not in last_seq or last_seq[tp] < entry.seq, "out of order within a table"
                    last_seq[tp] = entry.seq
                    if entry.type_code != TABLE_STATEMENT:
                        seen[(entry.gtid, entry.seq)] += 1
    consumer.close()
    return seen


class CheckpointWatcher:
    """Follows the offsets topic (read_committed) so a test reacts to a commit within milliseconds."""

    def __init__(self, bootstrap: str, prefix: str, source_id: str) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.admin import KafkaAdminClient, NewTopic

        topic = offsets_topic(prefix)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
        admin.close()
        self.key = source_id.encode()
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                      enable_auto_commit=False, group_id=None, fetch_max_wait_ms=5)
        self.consumer.assign([TopicPartition(topic, 0)])
        # its start (the topic's end) fixed now, not at its first poll: a daemon started after this watcher may
        # write its first checkpoint before that poll, and on a quiet server it writes no next one
        self.consumer.position(TopicPartition(topic, 0))
        self.latest: dict[str, Any] = {}

    def wait(self, done: Callable[[dict[str, Any]], bool], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.latest):
            assert time.monotonic() < deadline, f"checkpoint never got there; last {self.latest}"
            for records in self.consumer.poll(timeout_ms=20).values():
                for msg in records:
                    if msg.key == self.key:
                        self.latest = orjson.loads(msg.value)

    def reach(self, server, timeout: float = 120) -> None:
        """Until the daemon's checkpoint is at the server's binlog position now: it has published everything."""
        end = server.current_binlog_position()
        self.wait(lambda c: "file" in c and (c["file"], c["position"]) >= (end.file, end.position), timeout)

    def close(self) -> None:
        self.consumer.close()


@contextlib.contextmanager
def daemon_running(server, kafka, prefix: str, server_id: int,
                   env: dict[str, str] | None = None) -> Iterator[CheckpointWatcher]:
    """`binlake run` as a process of its own (its lines dropped) and a watcher of its checkpoints, from its first
    checkpoint to the block's end (the daemon stopped then)."""
    watcher = CheckpointWatcher(kafka.bootstrap, prefix, f"{prefix}.127.0.0.1:{server.port}")  # before the daemon
    daemon = subprocess.Popen([*BINLAKE, "run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix",
                               prefix, "--server-id", str(server_id)],
                              env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})}, stderr=subprocess.DEVNULL)
    try:
        watcher.wait(lambda c: "file" in c, timeout=60)
        yield watcher
    finally:
        daemon.terminate()
        daemon.wait()
        watcher.close()
