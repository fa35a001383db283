"""The mirror kept by Spark: a batch's candidates (a DataFrame) reduced to the last change per key and
applied with Delta's MERGE, or appended where no mirror row can match (a new mirror, or keys outside the
mirror's); the mirror's schema ALTERed first (added columns and their defaults, widened types)."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..batch import defaults as D
from ..batch.key_range import KeyRange
from ..batch.key_stats import INTEGER
from ..batch.mirror import DELETED, ORDER, SEQ
from ..batch.writer import MIRROR_FILE_ROWS
from ..decode.lake_types import quote
from .deletion_vectors import ENABLE_PROPERTY
from .evolution import DeltaEvolution
from .keys import record_key
from .mirrors import META, MirrorStrategy, MirrorTable, key_stats
from .tables import DeltaTables

log = logging.getLogger("binlake.land")
_NUMBER: dict[str, Any] = {**dict.fromkeys(INTEGER, int), "decimal": Decimal}


class SparkMirror(MirrorStrategy[DataFrame]):
    def __init__(self, spark: SparkSession, delta: DeltaTables, columns: DeltaEvolution, vectors: bool = True) -> None:
        self.spark = spark
        self.delta = delta
        self.columns = columns  # the tables' ALTERs
        self.vectors = vectors  # new mirrors get deletion vectors (land.deletion_vectors: delta/mirror_driver.py)
        self._highest: dict[tuple[str, str], Any] = {}  # see _key_high

    def apply(self, candidates: DataFrame, mirror: MirrorTable, batch_id: int) -> bool:
        """Per key the last candidate (mirror.py) wins: MERGEd into the mirror, or appended where nothing
        can match. Always applies."""
        from delta.tables import DeltaTable

        db, table, path, columns, pk = mirror.db, mirror.table, mirror.path, mirror.columns, mirror.pk
        if mirror.fills:  # images older than an ADD COLUMN (or RENAME) get its default
            candidates = candidates.withColumns(D.mirror_images([n for n, _ in columns], mirror.fills, image="",
                                                                seq=SEQ))
        latest = (candidates.withColumn("_binlake_order", F.struct(*ORDER))
                  .groupBy(*[F.col(quote(k)) for k in pk])
                  .agg(F.max_by(F.struct("*"), "_binlake_order").alias("s"))
                  .select("s.*"))
        surviving = latest.filter(f"NOT {DELETED}").select(*[quote(n) for n, _ in [*columns, *META]])
        if not mirror.exists:
            # A new mirror starts empty: the batch's surviving rows are plain inserts, no MERGE needed.
            # (A replay after a crash finds the table and MERGEs, or skips by txnVersion: same result.)
            self.delta.append(in_key_order(surviving, pk), path, batch_id, stats=key_stats(columns, pk),
                              properties={ENABLE_PROPERTY: "true"} if self.vectors else None,
                              max_records=MIRROR_FILE_ROWS)
            record_key(self.spark, path, pk)  # Spark's writer sets no properties but Delta's own
            return True
        assert mirror.known is not None
        self.columns.add_columns(path, mirror.known, columns, nested=False,
                                   defaults=[d for d in mirror.fills if d.column in mirror.added])
        ranges = key_ranges(candidates, columns, pk)
        growth = self._key_growth(path, db, table, columns, pk, ranges)
        if len(ranges) == len(pk) and (
                (growth is not None and growth.highest < growth.batch.low)
                or self.spark.read.format("delta").load(path).where(
                    " AND ".join(r.between() for r in ranges)).isEmpty()):
            # No mirror row has a key in the batch's key ranges (known from the mirror's largest key, or
            # answered by Delta from file statistics when keys only grow): nothing can match, so MERGE would
            # just insert the surviving rows. An append is that, without MERGE's fixed cost of seconds.
            self.delta.append(in_key_order(surviving, pk), path, batch_id, max_records=MIRROR_FILE_ROWS)
            log.debug("%s.%s: no mirror row in the batch's key ranges: appended, no MERGE", db, table)
            if growth is not None:
                self._highest[(db, table)] = growth.after()
            return True
        assign: dict[str, str | Column] = {quote(n): f"s.{quote(n)}" for n, _ in [*columns, *META]}
        on = " AND ".join([f"t.{quote(k)} = s.{quote(k)}" for k in pk]
                          + [r.between("t.") for r in ranges])
        with self.delta.batch_writes(batch_id):
            (DeltaTable.forPath(self.spark, path).alias("t").merge(latest.alias("s"), on)
             .whenMatchedDelete(condition=f"s.{DELETED}")
             .whenMatchedUpdate(condition=f"NOT s.{DELETED}", set=assign)
             .whenNotMatchedInsert(condition=f"NOT s.{DELETED}", values=assign)
             .execute())
        if growth is not None:
            self._highest[(db, table)] = growth.after()
        return True

    def forget(self, db: str, table: str) -> None:
        self._highest.pop((db, table), None)  # asked again if it is ever needed

    def _mirror_highest(self, path: str, db: str, table: str, column: str, number: Any) -> Any:
        """The largest key the mirror can hold: asked of the mirror once per process, then kept up to date
        by this job (an upper bound: deletes do not lower it)."""
        key = (db, table)
        if key not in self._highest:
            row = self.spark.read.format("delta").load(path).agg(F.max(quote(column)).cast("string")).first()
            found = row[0] if row is not None else None
            self._highest[key] = None if found is None else number(found)
        return self._highest[key]

    def _key_growth(self, path: str, db: str, table: str, columns: list[tuple[str, str]], pk: list[str],
                    ranges: list[KeyBounds]) -> KeyGrowth | None:
        """For a mirror keyed by one integer or decimal column: the largest key the mirror can hold and the
        batch's range of keys. The first is asked of the mirror once per process, then kept up to date here
        (an upper bound: deletes do not lower it), so that a batch of new keys -- the common case of an
        insert-mostly table -- needs no query of the mirror to skip the MERGE."""
        if len(pk) != 1 or len(ranges) != 1:
            return None
        number = _NUMBER.get(dict(columns)[pk[0]].split("(")[0])
        if number is None:
            return None
        highest = self._mirror_highest(path, db, table, pk[0], number)
        batch = KeyRange(number(ranges[0].text.low), number(ranges[0].text.high))
        return KeyGrowth(batch.low - 1 if highest is None else highest, batch)


class KeyGrowth(NamedTuple):
    """A mirror's largest key (an upper bound) and a batch's range of keys."""

    highest: Any
    batch: KeyRange

    def after(self) -> Any:
        """The mirror's largest key once the batch is in."""
        return max(self.highest, self.batch.high)


class KeyBounds(NamedTuple):
    """A key column's range in a batch, as text (hex for a binary key), rendered as SQL for the MERGE."""

    column: str
    dtype: str  # its Spark type
    text: KeyRange

    def literals(self) -> KeyRange:
        """The bounds as SQL literals."""
        return KeyRange(_literal(self.text.low, self.dtype), _literal(self.text.high, self.dtype))

    def between(self, alias: str = "") -> str:
        """The condition that the (``alias``-qualified) column lies in the range."""
        low, high = self.literals()
        return f"{alias}{quote(self.column)} BETWEEN {low} AND {high}"


def in_key_order(rows: DataFrame, pk: list[str]) -> DataFrame:
    """A batch's rows as a mirror's appended files hold them: cut into ranges of the key (Spark samples it) and in
    key order within each, so that each file holds a range of keys no other file of the batch does (a first load's
    files, like the driver's, then prune by their key statistics: a batch's updates, verify's chunks and the key
    index read the few files whose range holds their keys, not all of them)."""
    keys = [F.col(quote(k)) for k in pk]
    return rows.repartitionByRange(*keys).sortWithinPartitions(*keys)


def key_ranges(candidates: DataFrame, columns: list[tuple[str, str]], pk: list[str]) -> list[KeyBounds]:
    """Target-only bounds for the MERGE condition: each key column between the batch's smallest and
    largest key. A matching row must lie inside them, and Delta skips every mirror file whose key
    statistics (collected since the mirror's creation) lie outside: without them MERGE reads the whole
    mirror each batch, which grows with the table; with them a batch of new keys reads none of it.
    The bounds travel as text (hex for binary keys) so that no value is converted through Python.
    Returns the bounds of each bounded key column."""
    types = dict(columns)
    keys = [k for k in pk if types[k] not in ("float", "double")]  # NaN and -0.0 order oddly: no bounds
    bounds = []
    for k in keys:
        low, high = F.min(quote(k)), F.max(quote(k))
        text = F.hex if types[k] == "binary" else (lambda c: c.cast("string"))
        bounds += [text(low), text(high)]
    found = candidates.agg(*bounds).first() if bounds else None
    ranges = []
    for i, k in enumerate(keys if found is not None else ()):
        assert found is not None
        low, high = found[2 * i], found[2 * i + 1]
        if low is not None and high is not None:
            ranges.append(KeyBounds(k, types[k], KeyRange(low, high)))
    return ranges


def _literal(text: str, dtype: str) -> str:
    """A key bound as SQL: binary from hex, anything else its text cast back to the column's type."""
    if dtype == "binary":
        return f"X'{text}'"
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"CAST('{escaped}' AS {dtype})"
