"""The Iceberg tables' schemas and the mirror's key filters (pure: pyarrow and pyiceberg's expressions, no
catalog). Types: a lake column's Arrow type (lake_types.arrow_type) as pyiceberg maps it to Iceberg's: TINYINT
and SMALLINT (and their unsigned widenings) are Iceberg ``int``, unsigned BIGINT ``decimal(20,0)``, TIME
and BIT ``long``, DATETIME ``timestamp``, TIMESTAMP ``timestamptz``, ENUM/SET/JSON ``string``, binary
strings and BLOBs ``binary`` (docs/LAND.md, "Iceberg")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg import expressions
from pyiceberg.expressions import BooleanExpression

from ..batch.key_range import KeyRange, range_of
from ..batch.mirror import COMMIT_TS, SEQ
from ..batch.writer import PARTITION_COLUMN
from ..decode.lake_types import arrow_type
from ..decode.typed import TYPED_HEAD
from .renames import Renames


@dataclass(frozen=True)
class WantedTable:
    """A table as a batch needs it (IcebergFormat.ready): created with ``properties()`` and ``partition`` (an
    identity partition column), at ``location`` under the lake (else at its namespace and name), where it does
    not exist; given ``columns`` (recorded in its properties; none: the job's own tables) where it lacks some."""

    namespace: str
    name: str
    schema: pa.Schema
    columns: list[tuple[str, str]]
    properties: Callable[[], dict[str, str]]
    partition: str | None = None
    location: str | None = None


@dataclass(frozen=True)
class Reshape:
    """How an existing table's rows and columns follow the batch's: ``renames`` first (inside the images'
    structs where ``nested``), then ``rows(a part of the table's rows, column names)`` gives the part as it is
    to be with the added columns (their defaults), rewritten a part at a time in the commit that adds them
    (None: the rows stay as they are)."""

    rows: Callable[[pa.Table, list[str]], pa.Table] | None = None
    renames: Renames | None = None
    nested: bool = False


E: Any = expressions  # pyiceberg's predicates (pydantic models whose constructors mypy misreads)
TS = pa.timestamp("us", tz="UTC")
COLUMNS_PROPERTY = "binlake.columns"  # a table's row columns with their lake (Spark DDL) types, as JSON
# Statistics (Iceberg's column metrics) only where readers and the job prune by them, as Delta's tables do:
# every nested image column's bounds cost a share of each write
_CHANGE_LOG_METRICS = ("commit_ts", "kafka_offset", PARTITION_COLUMN)


def image_fields(columns: list[tuple[str, str]]) -> list[pa.Field]:
    return [pa.field(n, arrow_type(t)) for n, t in columns]


def change_log_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    """The change log's columns, in the Delta change log's order."""
    image = pa.struct(image_fields(columns))
    return pa.schema([*(pa.field(n, arrow_type(t)) for n, t in TYPED_HEAD), ("before", image), ("after", image),
                      (PARTITION_COLUMN, pa.date32()), ("ingest_ts", TS)])


def mirror_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    return pa.schema([*image_fields(columns), (SEQ, pa.binary()), (COMMIT_TS, TS)])


def columns_property(columns: list[tuple[str, str]]) -> dict[str, str]:
    return {COLUMNS_PROPERTY: orjson.dumps(columns).decode()}


def recorded_columns(properties: dict[str, str]) -> list[tuple[str, str]] | None:
    text = properties.get(COLUMNS_PROPERTY)
    return None if text is None else [(n, t) for n, t in orjson.loads(text)]


def metrics(full: Sequence[str]) -> dict[str, str]:
    """Table properties: column metrics of ``full`` only."""
    return {"write.metadata.metrics.default": "none",
            **{f"write.metadata.metrics.column.{c}": "full" for c in full}}


def change_log_properties(columns: list[tuple[str, str]]) -> dict[str, str]:
    return {**metrics(_CHANGE_LOG_METRICS), **columns_property(columns), **_METADATA}


def mirror_properties(columns: list[tuple[str, str]], key: dict[str, str], pk: list[str]) -> dict[str, str]:
    return {**metrics(pk), **columns_property(columns), **key, **_METADATA}


# Each commit writes a new metadata file: keep the newest (land.iceberg_metadata_versions, 20: the property is
# iceberg/maintenance.IcebergMaintenance.table_properties'), delete older ones (the table's history beyond them
# is its snapshots', expired by the job: iceberg/maintenance.py). Each append adds a manifest: merged
# once a snapshot would list 100 of them (Iceberg's default count), so that planning a read or the mirror's
# delete does not read a manifest per micro-batch ever landed
_METADATA = {"write.metadata.delete-after-commit.enabled": "true", "commit.manifest-merge.enabled": "true"}


def change_rows(typed: list[pa.RecordBatch], columns: list[tuple[str, str]], ingest_micros: int) -> pa.Table:
    """Typed row changes (typed.typed_batches) as the change log's rows: with commit_date and ingest_ts."""
    schema = change_log_schema(columns)
    if not typed:
        return schema.empty_table()
    rows = pa.Table.from_batches(typed)
    dates = pc.cast(pc.cast(rows.column("commit_ts"), pa.timestamp("us")), pa.date32())
    rows = rows.append_column(PARTITION_COLUMN, dates)
    return rows.append_column("ingest_ts", pa.repeat(pa.scalar(ingest_micros, TS), len(rows)))


def literals(values: pa.ChunkedArray | pa.Array) -> list[Any]:
    """A key column's values as pyiceberg's literals take them: temporal ones as their integers."""
    if pa.types.is_timestamp(values.type):
        values = pc.cast(values, pa.int64())
    elif pa.types.is_date32(values.type):
        values = pc.cast(values, pa.int32())
    return values.to_pylist()


def key_filter(keys: pa.Table, pk: list[str]) -> BooleanExpression:
    """Rows whose key is one of ``keys``' rows: a key of several columns grouped by its leading columns (one
    IN of the last column per prefix), the alternatives as a balanced OR (no deep expression trees)."""
    if len(pk) == 1:
        values = sorted(set(literals(keys.column(pk[0]))), key=repr)
        return E.EqualTo(pk[0], values[0]) if len(values) == 1 else E.In(pk[0], values)
    first = literals(keys.column(pk[0]))
    groups: dict[Any, list[int]] = {}
    for i, v in enumerate(first):
        groups.setdefault(v, []).append(i)
    return _any([E.And(E.EqualTo(pk[0], v), key_filter(keys.take(rows), pk[1:])) for v, rows in groups.items()])


def _any(expressions: list[BooleanExpression]) -> BooleanExpression:
    if len(expressions) == 1:
        return expressions[0]
    half = len(expressions) // 2
    return E.Or(_any(expressions[:half]), _any(expressions[half:]))


def keys_filter(keys: pa.Table, key: str) -> BooleanExpression | None:
    """The range of ``keys``' first key column as a row filter (None where it has no order pyiceberg compares,
    or no value)."""
    column = keys.column(key)
    if not (pa.types.is_integer(column.type) or pa.types.is_decimal(column.type) or pa.types.is_string(column.type)):
        return None
    found = range_of(column)
    return None if found is None else range_filter(key, found)


def range_filter(key: str, bounds: KeyRange) -> BooleanExpression:
    """A key column's range as pyiceberg's row filter (everything where it is unbounded)."""
    parts = [*([E.GreaterThanOrEqual(key, bounds.low)] if bounds.low is not None else []),
             *([E.LessThanOrEqual(key, bounds.high)] if bounds.high is not None else [])]
    if not parts:
        return E.AlwaysTrue()
    return parts[0] if len(parts) == 1 else E.And(*parts)
