"""The stream's Kafka source for micro-batches that touch many topics (a topic per table).

Spark's Kafka source reads each topic partition in a task of its own, with a consumer of its own and
two fetches (the record, then the transaction marker after it): a batch touching 200 tables paid
~1 s for that alone. This source (Spark's Python data source API) reads a batch's partitions in one
task per core, each with one consumer fetching all of its partitions in the same requests.

It gives the same columns as Spark's Kafka source, and its offsets are the same JSON
(``{"<topic>": {"<partition>": <offset>}}``), so one checkpoint goes on with either source. Only committed
records are read (read_committed); records gone from Kafka before they were read stop the query (Spark's
``failOnDataLoss``).

A batch is bounded in bytes (``max_bytes``, land.max_batch_bytes): whatever the backlog, a batch reads about that
many bytes of records, each topic partition cut in proportion to what it holds beyond the last batch (Spark 4.0
has no admission control for Python sources; the reader knows where the next batch starts: the end it gave last,
or after a restart the end of the last batch in the checkpoint, which Spark hands a Python source as its
``AcceptsLatestSeenOffset``, a call of ``partitions(end, end)``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming import DataStreamReader
from pyspark.sql.types import StructType

from .kafka_read import KAFKA_READ
from .kafka_tasks import SourceError, Span, consumer, read_spans
from .partition_sizes import PartitionSizes

log = logging.getLogger("binlake.land")

# The columns of Spark's Kafka source (includeHeaders), in its order
KAFKA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
             "timestampType int, headers array<struct<key: string, value: binary>>")
_KAFKA_WAIT_S = 600.0  # the driver's questions to Kafka, asked again while it is unreachable

Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class StreamSource:
    """How the query reads its topics (``pattern``, a regex) from Kafka at ``bootstrap``: binlake's source
    (BinlakeKafka) or Spark's (SparkKafka, which can bound a batch). Both start at the earliest offsets."""
    bootstrap: str
    pattern: str
    min_partitions: int = 0  # split ranges so that a batch has at least this many tasks

    def reader(self, spark: SparkSession) -> DataStreamReader:
        raise NotImplementedError


@dataclass(frozen=True)
class BinlakeKafka(StreamSource):
    """A batch's partitions read by one task per core (KafkaSource), about ``max_bytes`` of records at most
    (0: all there is)."""
    max_bytes: int = 0

    def reader(self, spark: SparkSession) -> DataStreamReader:
        spark.dataSource.register(KafkaSource)
        tasks = max(spark.sparkContext.defaultParallelism, self.min_partitions)
        return (spark.readStream.format(KafkaSource.name()).option("bootstrap", self.bootstrap)
                .option("pattern", self.pattern).option("tasks", str(tasks))
                .option("min_partitions", str(self.min_partitions)).option("max_bytes", str(self.max_bytes)))


@dataclass(frozen=True)
class SparkKafka(StreamSource):
    """Spark's Kafka source: a task per topic partition; ``max_offsets`` bounds a batch
    (maxOffsetsPerTrigger)."""
    max_offsets: int = 0

    def reader(self, spark: SparkSession) -> DataStreamReader:
        reader = (spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", self.bootstrap)
                  .option("subscribePattern", self.pattern)
                  .option("startingOffsets", "earliest")
                  .options(**KAFKA_READ)
                  .option("kafka.metadata.max.age.ms", "5000")  # new tables' topics are found within seconds
                  .option("failOnDataLoss", "true"))
        if self.min_partitions:
            reader = reader.option("minPartitions", str(self.min_partitions))
        if self.max_offsets:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets))
        return reader


KAFKA_SOURCE_PARTITIONS = 8  # "auto": binlake's source from this many topic partitions at the start


def stream_source(bootstrap: str, pattern: str, min_partitions: int | None, max_offsets_per_trigger: int | None,
                  choice: str = "auto", max_bytes: int = 0, start: Offsets | None = None,
                  once: bool = False) -> StreamSource:
    """Spark's source where asked for, or where a batch is bounded in records (``max_offsets_per_trigger``,
    Spark's maxOffsetsPerTrigger); binlake's where asked for, its batches bounded in bytes (``max_bytes``). ``auto``:
    binlake's where the topics have many partitions when the job starts (a batch touching many of them costs a
    task, a consumer and two fetches each with Spark's), and for a running job whose batches are bounded (Spark's
    source plans each batch up to Kafka's end: a backlog built while the job runs, a bulk load arriving faster than
    it lands, would be one batch, however large); for a run that lands what Kafka holds at its start (``once``:
    available-now), binlake's where that is more than one batch of ``max_bytes`` past ``start`` (where the query's
    next batch starts: None, the topics' first offsets), Spark's otherwise: its Java consumer reads a few large
    partitions faster (a single-table bulk batch of 230,000 row changes: 2.2-2.6 s against 2.5-3.1 s)."""
    if max_offsets_per_trigger or choice == "spark":
        return SparkKafka(bootstrap, pattern, min_partitions or 0, max_offsets_per_trigger or 0)
    bounded_running = max_bytes > 0 and not once
    if choice == "auto" and not bounded_running and not _binlakes_needed(bootstrap, pattern, max_bytes, start):
        return SparkKafka(bootstrap, pattern, min_partitions or 0)
    return BinlakeKafka(bootstrap, pattern, min_partitions or 0, max_bytes)


def _binlakes_needed(bootstrap: str, pattern: str, max_bytes: int, start: Offsets | None) -> bool:
    """Whether the topics have KAFKA_SOURCE_PARTITIONS partitions or more, or hold more than ``max_bytes`` past
    ``start`` (False where Kafka does not answer: the query then waits for it)."""
    from kafka.errors import KafkaError

    try:
        reader = KafkaStreamReader(bootstrap, pattern, 1, 0, max_bytes)
        try:
            if len(reader._partitions()) >= KAFKA_SOURCE_PARTITIONS:
                return True
            if not max_bytes:
                return False
            reader._remember(start if start is not None else reader.initialOffset())
            latest = reader._ask(lambda kafka: kafka.end_offsets(reader._partitions()))
            return reader._bounded(latest) != latest
        finally:
            reader.stop()
    except KafkaError:
        return False


def end_offsets(bootstrap: str, pattern: str) -> Offsets:
    """The last stable offsets (read_committed) of the topics matching ``pattern`` now, as a batch's end offsets
    (asked again while Kafka is unreachable, as the query's own questions)."""
    reader = KafkaStreamReader(bootstrap, pattern, 1, 0)
    try:
        return reader.latestOffset()
    finally:
        reader.stop()


class Split(InputPartition):
    """A task's spans."""

    def __init__(self, spans: tuple[Span, ...]) -> None:
        super().__init__(spans)
        self.spans = spans


class KafkaSource(DataSource):
    """``spark.readStream.format("binlake_kafka")``; options: bootstrap, pattern (the topics' regex), tasks
    (a batch's tasks at least, default 2), min_partitions (as Spark's minPartitions: ranges split so a
    batch has at least this many tasks)."""

    @classmethod
    def name(cls) -> str:
        return "binlake_kafka"

    def schema(self) -> str:
        return KAFKA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options["bootstrap"], self.options["pattern"],
                                 int(self.options.get("tasks", "2")), int(self.options.get("min_partitions", "0")),
                                 int(self.options.get("max_bytes", "0")))


class KafkaStreamReader(DataSourceStreamReader):
    """The driver's side: a batch's end offsets (the last stable offsets of the matching topics, cut to about
    ``max_bytes`` of records past the last batch's end) and its tasks."""

    def __init__(self, bootstrap: str, pattern: str, tasks: int, min_partitions: int, max_bytes: int = 0) -> None:
        self.bootstrap = bootstrap
        self.pattern = re.compile(pattern)
        self.tasks = max(1, tasks, min_partitions)
        self.min_partitions = min_partitions
        self.max_bytes = max_bytes
        self._kafka = None
        self._sizes = PartitionSizes(bootstrap)
        # every topic partition this process has seen, with its last end offset: a batch's end offsets
        # name them all, even when Kafka's metadata leaves one out for a moment (a topic being created
        # answers with an error, and the consumer then lists it no more): the next batch starts where the
        # last one ended, and a partition left out would start again at 0
        self._known: dict[tuple[str, int], int] = {}

    @property
    def kafka(self):  # type: ignore[no-untyped-def]
        if self._kafka is None:
            self._kafka = consumer(self.bootstrap)
        return self._kafka

    def _partitions(self) -> list:  # type: ignore[type-arg]
        """The matching topics' partitions that have a leader, and every one known before."""
        from kafka import TopicPartition

        kafka = self.kafka
        listed = set()
        for topic in kafka.topics():
            if self.pattern.fullmatch(topic):
                for p in kafka.partitions_for_topic(topic) or ():
                    tp = TopicPartition(topic, p)
                    leader = kafka._client.cluster.leader_for_partition(tp)
                    if (leader is not None and leader >= 0) or (topic, p) in self._known:
                        listed.add(tp)
        return sorted(listed | {TopicPartition(t, p) for t, p in self._known}, key=lambda tp: (tp.topic, tp.partition))

    def _remember(self, offsets: Offsets) -> Offsets:
        for topic, parts in offsets.items():
            for p, offset in parts.items():
                key = (topic, int(p))
                self._known[key] = max(offset, self._known.get(key, 0))
        return offsets

    def initialOffset(self) -> Offsets:
        """The earliest offsets of the topics there now (Spark's startingOffsets=earliest)."""
        return self._remember(self._ask(lambda kafka: kafka.beginning_offsets(self._partitions())))

    def latestOffset(self) -> Offsets:
        """The last stable offsets (read_committed) of the matching topics' partitions, cut to about max_bytes of
        records past where the next batch starts."""
        latest = self._ask(lambda kafka: kafka.end_offsets(self._partitions()))
        if self.max_bytes > 0:
            latest = self._bounded(latest)
        return self._remember(latest)

    def _bounded(self, latest: Offsets) -> Offsets:
        """``latest`` cut so that the batch from the known ends holds about max_bytes: each partition's part of
        it in proportion to its estimated bytes past its start, at least one record each (so a batch moves on)."""
        start = {(t, int(p)): self._known.get((t, int(p)), 0) for t, parts in latest.items() for p in parts}
        behind = {key: latest[key[0]][str(key[1])] - first for key, first in start.items()
                  if latest[key[0]][str(key[1])] > first}
        if sum(behind.values()) * _LARGEST_RECORD <= self.max_bytes:  # within the bound whatever their sizes
            return latest
        per_offset = self._sizes.bytes_per_offset({key: start[key] for key in behind}, behind)
        estimate = {key: n * per_offset[key] for key, n in behind.items()}
        total = sum(estimate.values())
        if total <= self.max_bytes:
            return latest
        share = self.max_bytes / total
        cut = {topic: dict(parts) for topic, parts in latest.items()}
        for (topic, p), n in behind.items():
            cut[topic][str(p)] = start[(topic, p)] + max(1, int(n * share))
        log.info("binlake_kafka: a batch of about %d MiB of the %d MiB held past the last batch", self.max_bytes >> 20,
                 int(total) >> 20)
        return cut

    def _ask(self, question: Callable[[Any], dict]) -> Offsets:  # type: ignore[type-arg]
        """Offsets from Kafka, asked again while it is unreachable (a broker restarting), for up to
        _KAFKA_WAIT_S: then the query stops, naming Kafka."""
        from kafka.errors import KafkaError

        deadline = time.monotonic() + _KAFKA_WAIT_S
        while True:
            try:
                return _offsets(question(self.kafka))
            except KafkaError as exc:
                self.stop()  # a new consumer for the next try
                if time.monotonic() > deadline:
                    raise SourceError(f"Kafka at {self.bootstrap} did not answer for {_KAFKA_WAIT_S:.0f} s: "
                                      f"{exc}") from None
                time.sleep(1.0)

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        self._remember(start)
        self._remember(end)
        spans = batch_spans(start, end)
        return [Split(s) for s in plan(spans, self.tasks, 1 if self.min_partitions > 0 else LEAST_PIECE)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Split)
        yield from read_spans(self.bootstrap, partition.spans)

    def commit(self, end: Offsets) -> None:
        pass

    def stop(self) -> None:
        if self._kafka is not None:
            self._kafka.close()
            self._kafka = None
        self._sizes.close()


def batch_spans(start: Offsets, end: Offsets) -> list[Span]:
    """The offsets of a batch from ``start`` to ``end`` (a query's offsets), as spans of the partitions it reads."""
    left = [f"{t}-{p}" for t, parts in start.items() for p, o in parts.items()
            if o > 0 and p not in end.get(t, {})]
    if left:  # only a batch planned by another process (before a restart) can leave one out
        raise SourceError(f"Kafka topic partitions {', '.join(left[:5])} are missing from the batch's end "
                          "offsets (deleted, or left out of Kafka's metadata): their next records would "
                          "not land")
    spans = []
    for topic, parts in end.items():
        for partition, stop in parts.items():
            # a partition found since the last batch starts at 0: a record gone already stops the read
            first = start.get(topic, {}).get(partition, 0)
            if stop < first:
                raise SourceError(f"Kafka topic partition {topic}-{partition} ends at offset {stop}, before "
                                  f"offset {first} that was read already: was the topic recreated?")
            if stop > first:
                spans.append(Span(topic, int(partition), first, stop))
    return spans


# A span is cut for more tasks into pieces of at least this many records (a task reading a few records costs more
# than their decoding); min_partitions cuts it into as many as asked
LEAST_PIECE = 16
_LARGEST_RECORD = 1 << 20  # a record's bytes at most (Kafka's default message.max.bytes; binlake's: 900,000)
def _offsets(found: dict) -> Offsets:  # type: ignore[type-arg]
    out: Offsets = {}
    for tp, offset in found.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return out


def plan(spans: list[Span], tasks: int, least: int = LEAST_PIECE) -> list[tuple[Span, ...]]:
    """Spans -> at most ``tasks`` groups of about the same number of offsets (largest first, each to the
    least loaded group). A span longer than a group's share is cut into pieces of that share, of at least ``least``
    offsets: a batch of one busy table's partition is decoded by every core, not one (Spark's minPartitions cuts
    its ranges so too)."""
    if not spans:
        return []
    share = max(least, -(-sum(s.end - s.start for s in spans) // tasks))
    spans = [Span(s.topic, s.partition, lo, min(s.end, lo + share))
             for s in spans for lo in range(s.start, s.end, share)]
    groups: list[list[Span]] = [[] for _ in range(min(tasks, len(spans)))]
    loads = [0] * len(groups)
    for s in sorted(spans, key=lambda s: s.start - s.end):
        i = loads.index(min(loads))
        groups[i].append(s)
        loads[i] += s.end - s.start
    return [tuple(sorted(g, key=lambda s: (s.topic, s.partition, s.start))) for g in groups]
