"""``binlake consume``: read the daemon's topics back and print the JSONL contract, rows decoded."""

from __future__ import annotations

import argparse
import heapq
import logging
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..codec.events import Event
from ..config import load_config
from ..dump.jsonl import event_json
from ..records.format import ChunkAssembler, RecordEvent, record_events
from .run import overrides


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consume", help="read binlake topics back as JSON lines (read_committed)")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--kafka", metavar="HOST:PORT")
    p.add_argument("--topic-prefix", metavar="P")
    p.add_argument("--format", choices=("jsonl",), default="jsonl")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--exit-at-end", action="store_true",
                   help="stop at the end of every topic; output is then in source order (by sequence)")
    p.set_defaults(run=run)


def _messages(bootstrap: str, prefix: str, from_beginning: bool, exit_at_end: bool,
              security: Mapping[str, Any] | None) -> Iterator[list[Any]]:
    """Per-partition batches of committed messages of the prefix's data topics."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**(security or {}), bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    try:
        # not records, or (_prepared) records of XA transactions not committed yet (docs/FORMAT.md)
        internal = {f"{prefix}._offsets", f"{prefix}._schema_history", f"{prefix}._prepared"}
        topics = sorted(t for t in consumer.topics() if t.startswith(prefix + ".") and t not in internal)
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        if not partitions and exit_at_end:  # nothing published under this prefix (yet)
            return
        consumer.assign(partitions)
        if not partitions:
            return
        if from_beginning:
            consumer.seek_to_beginning(*partitions)
        else:
            consumer.seek_to_end(*partitions)
        end = consumer.end_offsets(partitions) if exit_at_end else {}
        while True:
            if exit_at_end and all(consumer.position(tp) >= end[tp] for tp in partitions):
                return
            yield from consumer.poll(timeout_ms=500).values()
    finally:
        consumer.close()


def committed_events(bootstrap: str, prefix: str, from_beginning: bool = True, exit_at_end: bool = True,
                     security: Mapping[str, Any] | None = None) -> Iterator[Event]:
    """Decoded events of the prefix's topics; with ``exit_at_end``, in source order (by sequence).
    ``security``: kafka-python's TLS/SASL options (``KafkaConfig.client_options()``)."""
    return (item.event for item in committed_record_events(bootstrap, prefix, from_beginning, exit_at_end, security))


def committed_record_events(bootstrap: str, prefix: str, from_beginning: bool = True, exit_at_end: bool = True,
                            security: Mapping[str, Any] | None = None) -> Iterator[RecordEvent]:
    """Like ``committed_events``, with each event's sequence, GTID and commit time."""
    source = f"kafka {bootstrap}"
    chunks = ChunkAssembler()

    def decoded(msg: Any) -> Iterator[RecordEvent]:
        headers = dict(msg.headers or ())
        where = f"{source} {msg.topic}[{msg.partition}]"
        value = chunks.feed((msg.topic, msg.partition), headers, msg.value, where, msg.offset)
        if value is not None:
            yield from record_events(headers, value, f"{where}@{msg.offset}")

    batches = _messages(bootstrap, prefix, from_beginning, exit_at_end, security)
    if not exit_at_end:
        for batch in batches:
            for msg in batch:
                yield from decoded(msg)
        return
    # Each partition is in source order and a record holds many events: merge the partitions' events.
    per_partition: dict[tuple[str, int], list[Any]] = {}
    for batch in batches:
        for msg in batch:
            per_partition.setdefault((msg.topic, msg.partition), []).append(msg)
    streams = [(item for msg in msgs for item in decoded(msg)) for msgs in per_partition.values()]
    yield from heapq.merge(*streams, key=lambda item: item.seq)


def run(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    from ..daemon.kafka_io import ClientErrors

    cfg = load_config(args.config, overrides(args))
    out = sys.stdout.buffer
    errors = ClientErrors()
    logging.getLogger("kafka").addHandler(errors)
    try:
        for ev in committed_events(cfg.kafka.bootstrap, cfg.kafka.topic_prefix, args.from_beginning,
                                   args.exit_at_end, cfg.kafka.client_options()):
            out.write(event_json(ev))
            if not args.exit_at_end:
                out.flush()
    except KafkaError as exc:
        out.flush()
        print(f"binlake: error: kafka {cfg.kafka.bootstrap} ({cfg.kafka.security_protocol}): {exc}"
              + (f" ({errors.cause()})" if errors.messages else ""), file=sys.stderr)
        return 2
    finally:
        logging.getLogger("kafka").removeHandler(errors)
    out.flush()
    return 0
