"""A Delta lake's side of schema evolution (batch/evolution.py has the format-neutral union schema): a table's
columns as its change log's Delta log has them, and the ALTERs that bring a change log or a mirror to a batch's
union (added columns, widened types; docs/LAND.md, "Schema changes")."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from ..batch import defaults as D
from ..batch.evolution import widened
from ..decode.lake_types import quote
from ..lake.delta_log import simple_type
from .defaults import give_existing_rows, mark_pending
from .tables import DeltaTables


class DeltaEvolution:
    """The tables' lake columns as this job knows them, and their ALTERs."""

    def __init__(self, spark: SparkSession, delta: DeltaTables) -> None:
        self.spark = spark
        self.delta = delta
        self._columns: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def lake_columns(self, db: str, table: str, path: str) -> list[tuple[str, str]]:
        """The table's columns in the lake: its change log's (at ``path``) row images, none for a new table."""
        key = (db, table)
        if key not in self._columns:
            columns: list[tuple[str, str]] = []
            found = self.delta.log(path)
            if found is not None and found.version >= 0:  # read from the log by the driver: no Spark job
                after = next(f["type"] for f in found.schema["fields"] if f["name"] == "after")
                columns = [(f["name"], simple_type(f["type"])) for f in after["fields"]]
            elif found is None and self.delta.exists(path):
                after = self.spark.read.format("delta").load(path).schema["after"].dataType
                assert isinstance(after, StructType)  # the change log's row images
                columns = [(f.name, f.dataType.simpleString()) for f in after.fields]
            self._columns[key] = columns
        return self._columns[key]

    def forget(self, db: str, table: str) -> None:
        """A statement changed the table's change log (table_statements.py): its columns are read again."""
        self._columns.pop((db, table), None)

    def landed(self, db: str, table: str, columns: list[tuple[str, str]]) -> None:
        """The table's batch landed: the lake now has ``columns``."""
        self._columns[(db, table)] = columns

    def add_columns(self, path: str, lake: list[tuple[str, str]], columns: list[tuple[str, str]],
                    nested: bool, defaults: list[D.Default] | None = None) -> None:
        """ALTER a table from the lake's columns to the union: added columns, widened types (type widening,
        enabled on the table at its first widening). ``defaults``: of added mirror columns, for the rows
        already there."""
        current = dict(lake)
        prefixes = ("before.", "after.") if nested else ("",)
        added = [(n, t) for n, t in columns if n not in current]
        if added and not defaults and self.delta.add_columns(path, added, nested):  # the driver's commit
            added = []
        if added:
            if any(t == "timestamp_ntz" for _, t in added):  # Delta adds this feature only to new tables itself
                self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES "
                               "('delta.feature.timestampNtz' = 'supported')")
            if defaults:
                mark_pending(self.spark, path, defaults)
            specs = ", ".join(f"{p}{quote(n)} {t}" for p in prefixes for n, t in added)
            self.spark.sql(f"ALTER TABLE delta.{quote(path)} ADD COLUMNS ({specs})")
            if defaults:
                give_existing_rows(self.spark, path, defaults)
        found = widened(lake, columns)
        if found:
            # Delta's typeWidening is a reader feature (reader 3, writer 7) that delta-rs cannot read yet, so a
            # table gets it only now, at its first widening (setting it again at a later one, or after a crash
            # before the ALTER, is harmless). date -> timestamp_ntz also needs timestampNtz, which Delta
            # enables by itself only on new tables.
            features = {"delta.enableTypeWidening": "true"}
            if any(t == "timestamp_ntz" for _, t in found):
                features["delta.feature.timestampNtz"] = "supported"
            spec = ", ".join(f"'{k}' = '{v}'" for k, v in features.items())
            self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({spec})")
        for name, dtype in found:
            for p in prefixes:
                self.spark.sql(f"ALTER TABLE delta.{quote(path)} ALTER COLUMN {p}{quote(name)} TYPE {dtype}")
