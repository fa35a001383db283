"""The results of ``binlake verify``: their columns, and reading them back without Spark, for ``binlake verify
--wait`` and ``binlake status``. On a Delta lake they are the Delta table ``<lake>/_verify`` (its log read by
delta_log, its files by pyarrow: ``DeltaResults``); on an Iceberg lake the Iceberg table
``_binlake.verify`` of the lake's catalog, at ``<lake>/_binlake/verify`` (a SQL or REST catalog: ``<lake>/_verify``;
read by pyiceberg: iceberg/verify.py's ``IcebergResults``).
The land job writes them through its lake format (lake_format.LakeFormat.record_verify)."""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..decode.lake_types import arrow_type
from ..lake.delta_log import TableLog
from ..lake.files import LakeFiles
from ..lake.paths import join

VERIFY_TABLE = "_verify"
ICEBERG_VERIFY = ("_binlake", "verify")  # an Iceberg lake's results: its namespace and name in the catalog
# A result's columns with their lake (Spark DDL) types (docs/VERIFY.md)
RESULT_COLUMNS = [("run", "string"), ("table", "string"), ("chunk", "int"), ("low", "string"), ("high", "string"),
                  ("source_rows", "bigint"), ("lake_rows", "bigint"), ("excluded", "bigint"), ("missing", "bigint"),
                  ("extra", "bigint"), ("different", "bigint"), ("match", "boolean"), ("keys", "string"),
                  ("exact", "boolean"), ("at", "string"), ("kafka_topic", "string"), ("kafka_partition", "int"),
                  ("kafka_offset", "bigint"), ("batch_id", "bigint"), ("checked_ts", "timestamp")]


def result_schema() -> pa.Schema:
    return pa.schema([pa.field(n, arrow_type(t)) for n, t in RESULT_COLUMNS])


class VerifyResults(ABC):
    """A lake's verify results."""

    def read(self, run: str | None = None) -> list[dict[str, Any]]:
        """Every result row (of ``run`` only, if given), oldest first by check time; [] without results."""
        rows = self._rows(run)
        for r in rows:  # Spark writes INT96 by default: naive, in UTC
            if r["checked_ts"].tzinfo is None:
                r["checked_ts"] = r["checked_ts"].replace(tzinfo=dt.UTC)
        if run is not None:
            rows = [r for r in rows if r["run"] == run]
        return sorted(rows, key=lambda r: (r["checked_ts"], r["chunk"]))

    @abstractmethod
    def _rows(self, run: str | None) -> list[dict[str, Any]]:
        """The rows (those of ``run`` at least, if given)."""


class DeltaResults(VerifyResults):
    def __init__(self, files: LakeFiles, lake: str) -> None:
        self.files = files
        self.lake = lake

    def _rows(self, run: str | None) -> list[dict[str, Any]]:
        path = join(self.lake, VERIFY_TABLE)
        log = TableLog.read(path, self.files)
        if log.version < 0:
            return []
        schema = result_schema()
        tables = [_as_results(self.files.read_parquet(join(path, name)), schema) for name in log.files]
        return pa.concat_tables(tables, promote_options="permissive").to_pylist() if tables else []


def _as_results(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A results file's columns as ``schema`` types them (the land job's driver writes them so; Spark wrote its
    timestamps as INT96, read as naive nanoseconds in UTC)."""
    for i, name in enumerate(table.column_names):
        if name not in schema.names or table.schema.field(name).type == schema.field(name).type:
            continue
        column = table.column(i)
        if pa.types.is_timestamp(column.type) and column.type.tz is None:
            column = pc.assume_timezone(column.cast(pa.timestamp("us")), "UTC")
        table = table.set_column(i, name, column.cast(schema.field(name).type))
    return table


def read_results(files: LakeFiles, lake: str, run: str | None = None) -> list[dict[str, Any]]:
    """A Delta lake's results (``DeltaResults``): every row (of ``run`` only, if given), oldest first."""
    return DeltaResults(files, lake).read(run)
