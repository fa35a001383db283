"""The mirrors: a batch's candidates of a table (mirror.py: per key the last change wins) applied to its
mirror. What the batch finds of the mirror (``MirrorTable``: whether it exists, its columns, the columns
and defaults it gains now) is worked out once here; then a strategy applies the candidates. The driver
keeps the mirror itself where it can (mirror_driver.DriverMirror, candidates in the driver as Arrow);
Spark's writer and MERGE do anything else (mirror_spark.SparkMirror, candidates in a DataFrame)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ..batch import defaults as D
from ..batch.evolution import SchemaEvolution, SchemaGroup, widened
from ..batch.keys import MirrorKeys
from ..batch.mirror import COMMIT_TS, SEQ, candidates_ddl, mirror_columns, statement_seq
from ..lake.paths import join
from ..lake.scratch import Scratch
from .defaults import give_existing_rows
from .tables import DeltaTables

META = [(SEQ, "binary"), (COMMIT_TS, "timestamp")]  # kept in the mirror: the row's last change


@dataclass
class MirrorTable:
    """One table's mirror as a batch finds it: its state, read for the batch's share (format.TableChanges);
    ``columns``: the batch's union schema as the mirror takes it (mirror_columns)."""

    db: str
    table: str
    path: str
    columns: list[tuple[str, str]]  # the batch's (evolution.SchemaEvolution.evolve)
    pk: list[str]
    exists: bool
    known: list[tuple[str, str]] | None  # the mirror's columns (None: it does not exist)
    added: list[str]  # columns the mirror gains now
    fills: list[D.Default]  # defaults of added columns, and of images older than an ADD COLUMN
    widened: bool  # the batch widens a column of the mirror


C = TypeVar("C")


class MirrorStrategy(ABC, Generic[C]):
    """A way of applying a batch's candidates of type C (an Arrow table in the driver, or a DataFrame in
    Spark) to a mirror, idempotently by the batch's txnVersion."""

    @abstractmethod
    def apply(self, candidates: C, mirror: MirrorTable, batch_id: int) -> bool:
        """Apply the candidates; False: this strategy does not apply here (the caller uses another)."""

    def forget(self, db: str, table: str) -> None:
        """Another strategy wrote the mirror: what this one keeps of it is out of date."""


class Mirrors:
    def __init__(self, spark: SparkSession, lake: str, delta: DeltaTables, evolution: SchemaEvolution,
                 keys: MirrorKeys, driver: MirrorStrategy[pa.Table], in_spark: MirrorStrategy[DataFrame],
                 scratch: Scratch) -> None:
        self.spark = spark
        self.scratch = scratch
        self.lake = lake
        self.delta = delta
        self.evolution = evolution
        self.keys = keys
        self.driver = driver
        self.in_spark = in_spark
        self._known: dict[tuple[str, str], list[tuple[str, str]]] = {}  # columns once MERGEd
        self._since: dict[tuple[str, str], bytes] = {}  # the sequence of the last statement the mirror took

    def forget(self, db: str, table: str) -> None:
        """A statement changed the table's mirror (table_statements.py): its columns are read again."""
        self._known.pop((db, table), None)
        self._since.pop((db, table), None)

    def from_driver(self, candidates: pa.Table, db: str, table: str, columns: list[tuple[str, str]],
                    pk: list[str], batch_id: int, schemas: list[SchemaGroup] | None = None) -> None:
        """Apply candidates that are on the driver (an Arrow table): by the driver where it can, else Spark.
        ``schemas``: the batch's table maps (the mirror takes their columns and its own: mirror_columns)."""
        self.keys.check_nulls(candidates, db, table, pk)
        mirror = self._find(db, table, columns, pk, schemas)
        if self.driver.apply(candidates, mirror, batch_id):
            self.in_spark.forget(db, table)
        else:  # through the lake's scratch files unless small (scratch.py: local data would travel in the tasks)
            with self.scratch.frame(candidates, candidates_ddl(columns)) as frame:
                self.in_spark.apply(frame, mirror, batch_id)
        self._known[(db, table)] = mirror.columns

    def from_spark(self, candidates: DataFrame, db: str, table: str, columns: list[tuple[str, str]],
                   pk: list[str], batch_id: int, schemas: list[SchemaGroup] | None = None) -> None:
        """Apply candidates that are in Spark (a DataFrame)."""
        self.keys.check_nulls(candidates, db, table, pk)
        mirror = self._find(db, table, columns, pk, schemas)
        self.in_spark.apply(candidates, mirror, batch_id)
        self._known[(db, table)] = mirror.columns

    def _find(self, db: str, table: str, columns: list[tuple[str, str]], pk: list[str],
              schemas: list[SchemaGroup] | None = None) -> MirrorTable:
        from delta.tables import DeltaTable

        path = join(self.lake, db, table)
        known = self._known.get((db, table))
        found = self.delta.log(path) if known is None else None
        exists = known is not None or (found.version >= 0 if found is not None else self.delta.exists(path))
        if known is None and exists:
            # The mirror's own schema: a crash may have come between the change log's ALTER and this one,
            # or between adding columns and giving their defaults to the rows there.
            properties = found.configuration if found is not None else _properties(self.spark, path)
            self._since[(db, table)] = statement_seq(properties)
            pending = D.pending_in(properties)
            if pending:
                give_existing_rows(self.spark, path, pending)
            schema = found.columns() if found is not None else [
                (f.name, f.dataType.simpleString()) for f in DeltaTable.forPath(self.spark, path).toDF().schema]
            known = [(n, t) for n, t in schema if not n.startswith("_binlake_")]
        if exists and schemas is not None:  # rows older than the mirror's last statement (a replayed part) add none
            since = self._since.get((db, table), b"")
            columns = mirror_columns(columns, known or [], [g for g in schemas if g.first_seq > since])
        added = [n for n, _ in columns if n not in dict(known or [])] if exists else []
        fills = self.evolution.defaults(db, table, columns, added)
        return MirrorTable(db, table, path, columns, pk, exists, known, added, fills,
                           bool(widened(known or [], columns)) if exists else False)


def _properties(spark: SparkSession, path: str) -> dict[str, str]:
    from delta.tables import DeltaTable

    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    return dict((detail[0] if detail is not None else None) or {})


def key_stats(columns: list[tuple[str, str]], pk: list[str]) -> list[str]:
    """A mirror's statistics columns: its key's, but Delta keeps none of binary or boolean columns."""
    types = dict(columns)
    return [k for k in pk if types[k] not in ("binary", "boolean")]
