"""What the land job's topics hold (``land.source_format``), one strategy each: which topics are the tables', how
a batch's messages are decoded into record rows (decode.RECORD_FIELDS), what the job keeps between batches, and
whether a schema topic of DDL statements exists beside them.

- ``BinlakeRecords``: the daemon's own records (decode.py), exactly once in Kafka already.
- ``DebeziumJsonEvents``: Debezium's change events in Kafka Connect's JSON converter layout (binlake's
  ``kafka.format: debezium-json`` or a real Debezium MySQL/MariaDB connector's), at least once: the repeats are
  dropped by their source position (debezium_decode.py). The newest position landed per topic partition is
  read from the change logs when the job starts and then kept by the driver as batches land.
- ``DebeziumAvroEvents``: the same change events in Avro with a schema registry (binlake's
  ``kafka.format: debezium-avro`` or Debezium's with Confluent's AvroConverter): one decoder difference
  (debezium_avro.py), the registry client going to the executors with the decoder.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from ingester.registry_client import RegistryClient

from ..decode.debezium_avro import AvroEvents
from ..decode.debezium_decode import DebeziumError, EventCodec, JsonEvents, Marks, decode_debezium_partition, merged
from ..decode.decode import decode_partition
from ..lake.generations import parse_change_log
from ..runtime.errors import LandError
from .kafka_read import KafkaReader

log = logging.getLogger("binlake.land")

Decoder = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]


class SourceFormat(ABC):
    name: str
    schema_topic: bool  # <prefix>._schema holds the source's DDL statements (defaults after ADD COLUMN)

    @staticmethod
    @abstractmethod
    def topic_pattern(prefix: str) -> str:
        """The regex of the tables' topics."""

    @abstractmethod
    def decoder(self, ship: int | None = None) -> Decoder:
        """The mapInArrow function that decodes a batch's messages (``ship``: decode.decode_partition's)."""

    @abstractmethod
    def check(self, min_partitions: int | None) -> None:
        """Refuse settings this format cannot land with (one line)."""

    @abstractmethod
    def landed(self, info: list[Any]) -> None:
        """A batch has landed (its record rows but their data)."""


class BinlakeRecords(SourceFormat):
    name = "binlake"
    schema_topic = True

    @staticmethod
    def topic_pattern(prefix: str) -> str:
        """Everything of the prefix but its _schema, _schema_history, _offsets and _prepared topics (the last holds
        prepared XA transactions' records, which their XA COMMIT publishes to the tables' topics)."""
        return rf"{re.escape(prefix)}\.(?!_schema$|_schema_history$|_offsets$|_prepared$).+"

    def decoder(self, ship: int | None = None) -> Decoder:
        return decode_partition if ship is None else partial(decode_partition, ship=ship)

    def check(self, min_partitions: int | None) -> None:
        """Every setting lands binlake's records."""

    def landed(self, info: list[Any]) -> None:
        """Kafka holds each record once: nothing to keep."""


class DebeziumJsonEvents(SourceFormat):
    name = "debezium-json"
    schema_topic = False

    def __init__(self, spark: SparkSession, lake: str, kafka: KafkaReader, codec: EventCodec | None = None) -> None:
        self.spark = spark
        self.lake = lake
        self.kafka = kafka
        self.codec = codec or JsonEvents()
        self.marks: Marks | None = None

    @staticmethod
    def topic_pattern(prefix: str) -> str:
        """``<prefix>.<db>.<table>``: not the transaction topic ``<prefix>.transaction``, the schema change topic
        ``<prefix>`` or binlake's own ``<prefix>._*`` topics."""
        return rf"{re.escape(prefix)}\.[^.]+\..+"

    def check(self, min_partitions: int | None) -> None:
        if min_partitions:
            raise LandError("land.min_partitions splits a topic partition between tasks, and repeats of Debezium's "
                            "change events are found in one partition's order: leave it unset with "
                            f"--source-format {self.name}")

    def decoder(self, ship: int | None = None) -> Decoder:
        if self.marks is None:
            self.marks = read_marks(self.spark, self.lake, self.kafka, self.codec)
            log.info("Debezium change events: the newest landed position of %d topic partitions read from the lake",
                     len(self.marks))
        return partial(decode_debezium_partition, marks=dict(self.marks), ship=ship, codec=self.codec)

    def landed(self, info: list[Any]) -> None:
        assert self.marks is not None
        for r in info:
            if r.kind == "row" and r.mark is not None:
                key = (r.topic, r.partition)
                self.marks[key] = merged(self.marks.get(key), bytes(r.mark))


class DebeziumAvroEvents(DebeziumJsonEvents):
    name = "debezium-avro"

    def __init__(self, spark: SparkSession, lake: str, kafka: KafkaReader, registry: RegistryClient) -> None:
        super().__init__(spark, lake, kafka, AvroEvents(registry))


def topic_pattern(prefix: str, name: str = "binlake") -> str:
    """The regex of the tables' topics of ``prefix`` in the source format ``name`` (land.source_format)."""
    return (BinlakeRecords if name == "binlake" else DebeziumJsonEvents).topic_pattern(prefix)


def source_format(name: str, spark: SparkSession, lake: str, bootstrap: str,
                  registry: RegistryClient | None = None) -> SourceFormat:
    if name == "debezium-json":
        return DebeziumJsonEvents(spark, lake, KafkaReader(spark, bootstrap))
    if name == "debezium-avro":
        if registry is None:
            raise LandError("--source-format debezium-avro needs the schema registry of the topics: "
                            "debezium.schema_registry_url (--schema-registry-url)")
        return DebeziumAvroEvents(spark, lake, KafkaReader(spark, bootstrap), registry)
    return BinlakeRecords()


# Per topic partition of a change log: its newest position (debezium_decode.position) and the Kafka offsets of the
# change events landed at its binlog position (their seq)
_MARKS_SQL = """SELECT kafka_topic, kafka_partition, max(at) AS at, collect_list(kafka_offset) AS offsets FROM (
  SELECT kafka_topic, kafka_partition, kafka_offset, at, seq,
         max(seq) OVER (PARTITION BY kafka_topic, kafka_partition) AS top
  FROM (SELECT kafka_topic, kafka_partition, kafka_offset, seq,
               concat(seq, unhex(lpad(hex(row_index), 8, '0')), IF(op = 'delete', X'00', X'01')) AS at
        FROM delta.`{path}` WHERE op IN ('insert', 'update', 'delete', 'truncate')))
WHERE seq = top GROUP BY kafka_topic, kafka_partition"""


def read_marks(spark: SparkSession, lake: str, kafka: KafkaReader, codec: EventCodec) -> Marks:
    """The marks (debezium_decode.Marks) of every change log of the lake: the newest position landed per topic
    partition, and the digests of the events landed there, read again from Kafka (without them, as when
    retention removed the events, any event at that position is taken for a repeat)."""
    paths = _change_logs(spark, lake)
    if not paths:
        return {}
    sql = " UNION ALL ".join(f"({_MARKS_SQL.format(path=p.replace('`', '``'))})" for p in paths)
    marks: Marks = {}
    for r in spark.sql(sql).collect():
        at, offsets = bytes(r.at), sorted(r.offsets)
        digests = _digests_at(kafka, codec, r.kafka_topic, r.kafka_partition, offsets)
        if digests is None:
            log.warning("%s[%d]: the change events landed at its newest position are gone from Kafka: events at that "
                        "position are taken for repeats", r.kafka_topic, r.kafka_partition)
        marks[(r.kafka_topic, r.kafka_partition)] = at + b"".join(sorted(set(digests or ())))
    return marks


def _digests_at(kafka: KafkaReader, codec: EventCodec, topic: str, partition: int,
                offsets: list[int]) -> list[bytes] | None:
    """The digests of the change events at ``offsets`` (None unless every one of them is read again)."""
    try:
        found = {offset: value for offset, _, value in kafka.fetch(topic, partition, offsets[0], offsets[-1] + 1)}
    except Exception as exc:  # the marks then know positions only
        log.warning("%s[%d]: %s", topic, partition, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None
    digests = []
    for offset in offsets:
        if offset not in found:
            return None
        try:
            digests.append(codec.digest(found[offset]))
        except DebeziumError:
            return None
    return digests


def _change_logs(spark: SparkSession, lake: str) -> list[str]:
    """``<lake>/<db>/<table>__changes`` tables, listed through Spark's own file systems (any lake URI)."""
    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    root = jvm.org.apache.hadoop.fs.Path(lake)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if not fs.exists(root):
        return []
    found = []
    for db in fs.listStatus(root):
        if not db.isDirectory() or db.getPath().getName().startswith("_"):
            continue
        for table in fs.listStatus(db.getPath()):
            path = table.getPath()
            if (table.isDirectory() and parse_change_log(path.getName()) is not None  # every generation's
                    and fs.exists(jvm.org.apache.hadoop.fs.Path(path, "_delta_log"))):
                found.append(path.toString())
    return sorted(found)
