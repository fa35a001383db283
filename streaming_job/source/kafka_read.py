"""Batch reads of Kafka beside the stream: records read again (chunks cut by a batch's bound, a parked table's
records when it catches up), the schema topic's statements (ADD COLUMN defaults, the DDL named in an error)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import orjson
from pyspark.sql import DataFrame, SparkSession

# How the job reads Kafka (the stream, and records read again). The consumer's last fetch of a range
# finds nothing beyond its end (or only a transaction marker) and the broker holds it for
# fetch.max.wait.ms (Kafka's default 500 ms) for every topic partition of every micro-batch: 10 ms saved ~0.3 s
# a batch of one table, and 1 ms another ~10 ms per table of a batch touching many (a topic per table).
KAFKA_READ = {"kafka.isolation.level": "read_committed", "kafka.fetch.max.wait.ms": "1", "includeHeaders": "true"}


class OffsetRange(NamedTuple):
    """The records of a topic partition from ``start`` (-2: its first) up to ``end`` (not included)."""

    start: int
    end: int


@dataclass
class KafkaReader:
    spark: SparkSession
    bootstrap: str

    def fetch(self, topic: str, partition: int, start: int, end: int) -> list[tuple[int, dict[str, bytes], bytes]]:
        """Records [start, end) of one partition, read again from Kafka (committed ones only)."""
        rows = self.read(topic, {str(partition): start}, {str(partition): end}, partition).select(
            "offset", "headers", "value").collect()
        return [(r.offset, {h.key: bytes(h.value) for h in r.headers or ()}, bytes(r.value)) for r in rows]

    def read(self, topic: str, start: dict[str, int] | str, end: dict[str, int] | str,
             partition: int | None = None) -> DataFrame:
        """A batch read of one topic (or partition) between offsets, as the stream reads it."""
        reader = (self.spark.read.format("kafka").options(**KAFKA_READ)
                  .option("kafka.bootstrap.servers", self.bootstrap)
                  .option("startingOffsets", start if isinstance(start, str) else orjson.dumps({topic: start}).decode())
                  .option("endingOffsets", end if isinstance(end, str) else orjson.dumps({topic: end}).decode()))
        if partition is None:
            return reader.option("subscribe", topic).load()
        return reader.option("assign", orjson.dumps({topic: [partition]}).decode()).load()

    def ranges(self, ranges: dict[str, dict[int, OffsetRange]]) -> DataFrame:
        """The records of offset ranges ``[start, end)`` per topic partition (a start of -2: the partition's first),
        read as the stream reads them (committed ones only, with headers): a parked table's catch-up (parking.py)."""
        assign = {topic: sorted(parts) for topic, parts in ranges.items()}
        starts = {topic: {str(p): r.start for p, r in parts.items()} for topic, parts in ranges.items()}
        ends = {topic: {str(p): r.end for p, r in parts.items()} for topic, parts in ranges.items()}
        return (self.spark.read.format("kafka").options(**KAFKA_READ)
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("assign", orjson.dumps(assign).decode())
                .option("startingOffsets", orjson.dumps(starts).decode())
                .option("endingOffsets", orjson.dumps(ends).decode()).load())
