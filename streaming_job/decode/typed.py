"""Step 2 of decoding (decode.py has step 1): one table's record rows -> typed row changes in the batch's union schema
(TYPED_HEAD, then before/after structs): added columns null, widened types, by Arrow casts only."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from ..runtime.spark_archives import keep_spark_archive_listings
from .lake_types import arrow_type, quote


def struct_ddl(columns: list[tuple[str, str]]) -> str:
    return "struct<" + ", ".join(f"{quote(n)}: {t}" for n, t in columns) + ">"


TYPED_HEAD = [("op", "string"), ("seq", "binary"), ("position", "string"), ("gtid", "string"),
              ("commit_ts", "timestamp"), ("row_index", "int"), ("kafka_topic", "string"),
              ("kafka_partition", "int"), ("kafka_offset", "bigint")]


def typed_ddl(columns: list[tuple[str, str]]) -> str:
    image = struct_ddl(columns)
    return ", ".join([f"{quote(n)} {t}" for n, t in TYPED_HEAD] + [f"before {image}", f"after {image}"])


def _conform(image: pa.StructArray, fields: list[pa.Field]) -> pa.StructArray:
    """A record's images in the union schema: its columns cast (widened), the others null."""
    have = {f.name: i for i, f in enumerate(image.type)}
    arrays = []
    for f in fields:
        i = have.get(f.name)
        if i is None:
            arrays.append(pa.nulls(len(image), f.type))
            continue
        child = image.field(i)
        arrays.append(child if child.type == f.type else child.cast(f.type))
    return pa.StructArray.from_arrays(arrays, fields=fields, mask=image.is_null())


def typed_batches(columns: list[tuple[str, str]], batches: Iterable[pa.RecordBatch],
                  batch_rows: int = 65_536) -> Iterator[pa.RecordBatch]:
    """Record rows of one table -> TYPED_HEAD + typed before/after structs in the batch's union schema,
    in batches of about ``batch_rows`` row changes (memory stays bounded)."""
    keep_spark_archive_listings()  # a mapInArrow function too (sink.Lander._land_table, remote lakes)
    fields = [pa.field(n, arrow_type(t)) for n, t in columns]
    image = pa.struct(fields)
    schema = pa.schema([*[pa.field(n, arrow_type(t)) for n, t in TYPED_HEAD], ("before", image), ("after", image)])
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        for topic, partition, offset, data in zip(*(batch.column(c).to_pylist() for c in (
                "topic", "partition", "offset", "data")), strict=True):
            for part in pa.ipc.open_stream(data):
                n = len(part)
                # a row of Debezium's change events carries each one's offset (debezium_decode.py)
                offsets = (part.column("kafka_offset") if "kafka_offset" in part.schema.names
                           else pa.array([offset] * n, pa.int64()))
                arrays = [*part.columns[:6], pa.array([topic] * n, pa.string()),
                          pa.array([partition] * n, pa.int32()), offsets,
                          _conform(part.column("before"), fields), _conform(part.column("after"), fields)]
                pending.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
                size += n
            if size >= batch_rows:
                yield from _combined(pending, schema)
                pending, size = [], 0
    if pending:
        yield from _combined(pending, schema)


def _combined(batches: list[pa.RecordBatch], schema: pa.Schema) -> list[pa.RecordBatch]:
    """Record batches as one (a record alone is already one)."""
    if len(batches) == 1:
        return batches
    return pa.Table.from_batches(batches, schema).combine_chunks().to_batches()
