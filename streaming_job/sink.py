"""foreachBatch: one micro-batch of Kafka records -> Delta change logs, mirrors, quarantine.

Exactly once: every Delta write of batch N carries (txnAppId, txnVersion=N), so a batch replayed
after a crash skips the writes that already committed. Mirrors apply the batch's changes in source
order (seq, row index): per primary key the last change wins, an update that moves the key deletes
the old key, deletes delete.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingester.codec.events import QueryEvent
from ingester.records.format import record_events

from . import defaults as D
from .decode import ERROR, HEADERS, RAW, RECORD_DDL, decode_partition, quote, reassemble, typed_ddl, typed_partition
from .lake_types import widens

log = logging.getLogger("binlake.land")
QUARANTINE_TABLE = "_quarantine"
_DDL = re.compile(r"\s*(/\*.*?\*/\s*)*(ALTER|CREATE|RENAME|DROP|TRUNCATE)\b", re.IGNORECASE | re.DOTALL)
_STATS_COLUMNS = "spark.databricks.delta.properties.defaults.dataSkippingStatsColumns"
_CHANGE_LOG_STATS = ["seq", "commit_ts", "kafka_offset"]
_META = [("_binlake_seq", "binary"), ("_binlake_commit_ts", "timestamp")]


class LandError(RuntimeError):
    """Stops the query: an undecodable record (without --quarantine) or an unsafe schema change."""


@dataclass
class BatchStats:
    rows: int = 0
    newest_commit_ts: float | None = None  # seconds since the epoch
    seconds: float = 0.0


@dataclass
class _Schema:
    """One table schema's share of a batch: where it starts, how many rows, the newest commit."""

    schema: str
    first_seq: bytes = b""
    first_position: str = ""
    n: int = 0
    newest: int = 0
    partial: bool = False

    def add(self, seq: bytes, position: str, n: int, newest: int, partial: bool) -> None:
        if not self.first_seq or seq < self.first_seq:
            self.first_seq, self.first_position = seq, position
        self.n += n
        self.newest = max(self.newest, newest)
        self.partial = self.partial or partial

    @property
    def meta(self) -> dict[str, Any]:
        return orjson.loads(self.schema)


@dataclass
class Lander:
    spark: SparkSession
    lake: str
    checkpoint: str
    quarantine: bool = False
    bootstrap: str = ""  # Kafka, for records read again: chunks cut by maxOffsetsPerTrigger, DDL statements
    topic_prefix: str = ""
    app_id: str = ""
    last: BatchStats = field(default_factory=BatchStats)
    error: LandError | None = None
    _columns: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    _mirrors: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)  # columns once MERGEd
    # per table of the batch: column -> first sequence with it, and the columns older images lack (ADD COLUMN)
    _appear: dict[tuple[str, str], tuple[dict[str, bytes], set[str]]] = field(default_factory=dict)
    _added: D.AddedColumns = field(default_factory=D.AddedColumns)  # ADD COLUMN statements read so far
    _schema_next: int = 0  # the schema topic's next offset to read

    def __post_init__(self) -> None:
        if not self.app_id:  # stable per checkpoint: the query's identity for Delta's idempotent writes
            digest = hashlib.sha256(str(Path(self.checkpoint).absolute()).encode()).hexdigest()[:16]
            self.app_id = f"binlake-land-{digest}"

    def path(self, db: str, table: str) -> str:
        return str(Path(self.lake) / db / table)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self.process(batch, batch_id)
        except LandError as exc:
            self.error = exc
            raise

    def process(self, batch: DataFrame, batch_id: int) -> None:
        start = time.monotonic()
        decoded = batch.mapInArrow(decode_partition, RECORD_DDL).persist()
        try:
            # One job decodes (and caches) the batch; the driver gets everything but the row data.
            info = decoded.drop("data").collect()
            rows = decoded.filter("kind = 'row'")
            meta = [r for r in info if r.kind == "row"]
            orphans = [(r.topic, r.partition, r.offset, bytes(r.headers), bytes(r.raw)) for r in info
                       if r.kind == "chunk"]
            errors = [(r.topic, r.partition, r.offset, r.error, bytes(r.raw), bytes(r.headers)) for r in info
                      if r.kind == "error"]
            if orphans:
                log.info("batch %d: %d chunk pieces reassembled across partition splits", batch_id, len(orphans))
                extra, carried = reassemble(orphans, self._fetch)
                if carried:
                    first = min(carried)
                    log.info("batch %d: %d chunks of a record cut by maxOffsetsPerTrigger carried over to the next "
                             "batch, from %s[%d]@%d", batch_id, len(carried), *first)
                errors += [(r[1], r[2], r[3], r[ERROR], r[RAW], r[HEADERS]) for r in extra if r[0] == "error"]
                good = [r for r in extra if r[0] == "row"]
                if good:
                    extra_df = self.spark.createDataFrame(good, RECORD_DDL)
                    rows = rows.unionByName(extra_df)
                    meta += extra_df.drop("data").collect()
            if errors:
                self._undecodable(errors, batch_id)
            log.debug("batch %d: decoded in %.1fs", batch_id, time.monotonic() - start)
            stats = self._land(rows, meta, batch_id)
        finally:
            decoded.unpersist()
        stats.seconds = time.monotonic() - start
        self.last = stats

    def _fetch(self, topic: str, partition: int, start: int, end: int) -> list[tuple[int, dict[str, bytes], bytes]]:
        """Records [start, end) of one partition, read again from Kafka (committed ones only)."""
        rows = self._kafka(topic, {str(partition): start}, {str(partition): end}, partition).select(
            "offset", "headers", "value").collect()
        return [(r.offset, {h.key: bytes(h.value) for h in r.headers or ()}, bytes(r.value)) for r in rows]

    def _kafka(self, topic: str, start: dict[str, int] | str, end: dict[str, int] | str,
               partition: int | None = None) -> DataFrame:
        """A batch read of one topic (or partition) between offsets, as the stream reads it."""
        reader = (self.spark.read.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
                  .option("kafka.isolation.level", "read_committed").option("includeHeaders", "true")
                  .option("startingOffsets", start if isinstance(start, str) else orjson.dumps({topic: start}).decode())
                  .option("endingOffsets", end if isinstance(end, str) else orjson.dumps({topic: end}).decode()))
        if partition is None:
            return reader.option("subscribe", topic).load()
        return reader.option("assign", orjson.dumps({topic: [partition]}).decode()).load()

    def _undecodable(self, errors: list[tuple[str, int, int, str, bytes, bytes]], batch_id: int) -> None:
        topic, partition, offset, message, _, _ = min(errors)
        if not self.quarantine:
            raise LandError(f"undecodable record at {topic}[{partition}]@{offset}: {message} "
                            f"({len(errors)} in this batch; --quarantine lands them in {QUARANTINE_TABLE})")
        log.warning("quarantined %d undecodable records, first %s[%s]@%s: %s", len(errors), topic, partition,
                    offset, message)
        df = self.spark.createDataFrame(
            [(t, p, o, m, raw, {k: v for k, v in pickle.loads(h).items()}) for t, p, o, m, raw, h in errors],
            "topic string, partition int, offset bigint, error string, value binary, headers map<string,binary>",
        ).withColumn("batch_id", F.lit(batch_id)).withColumn("ingest_ts", F.current_timestamp())
        self._append(df, str(Path(self.lake) / QUARANTINE_TABLE), batch_id)

    def _append(self, df: DataFrame, path: str, batch_id: int, partition_by: str | None = None,
                stats: list[str] | None = None) -> None:
        """An idempotent append; ``stats``: the table is new, collect file statistics of these columns only
        (statistics of every column of wide row images cost a third of the write, and skip nothing)."""
        writer = (df.write.format("delta").mode("append").option("txnAppId", self.app_id)
                  .option("txnVersion", batch_id))
        if partition_by:
            writer = writer.partitionBy(partition_by)
        if stats is None:
            writer.save(path)
            return
        conf = self.spark.conf
        conf.set(_STATS_COLUMNS, ",".join(quote(c) for c in stats))
        try:
            writer.save(path)
        finally:
            conf.unset(_STATS_COLUMNS)

    def _land(self, rows: DataFrame, meta: list[Any], batch_id: int) -> BatchStats:
        stats = BatchStats()
        groups: dict[tuple[str, str, str], _Schema] = {}
        for r in meta:
            g = groups.setdefault((r.db, r.tbl, r.schema), _Schema(r.schema))
            g.add(bytes(r.first_seq), r.first_position, r.rows, r.newest, r.partial)
        tables: dict[tuple[str, str], list[_Schema]] = {}
        for (db, table, _), g in sorted(groups.items(), key=lambda kv: kv[1].first_seq):
            tables.setdefault((db, table), []).append(g)
        for (db, table), schemas in sorted(tables.items()):
            lake = self._lake_columns(db, table)
            columns, pk = self._evolve(db, table, lake, schemas)
            # minPartitions may have made many small partitions: as many tasks as cores is enough here
            subset = rows.filter((F.col("db") == db) & (F.col("tbl") == table)).coalesce(
                self.spark.sparkContext.defaultParallelism)
            changes = (subset.mapInArrow(typed_partition(columns), typed_ddl(columns))
                       .withColumn("commit_date", F.to_date("commit_ts"))
                       .withColumn("ingest_ts", F.current_timestamp()))
            changes = changes.persist()  # the change log and the mirror both read it
            changes_path = self.path(db, table + "__changes")
            if lake:
                self._add_columns(changes_path, lake, columns, nested=True)
            t = time.monotonic()
            self._append(changes, changes_path, batch_id, partition_by="commit_date",
                         stats=None if lake else _CHANGE_LOG_STATS)
            log.debug("%s.%s: change log %.1fs", db, table, time.monotonic() - t)
            if pk:
                if any(g.partial for g in schemas):
                    raise LandError(f"`{db}`.`{table}`: partial row images (binlog_row_image MINIMAL or NOBLOB) "
                                    f"from {min(g.first_position for g in schemas)}: the mirror needs FULL images; "
                                    "set binlog_row_image=FULL")
                t = time.monotonic()
                self._merge(changes, db, table, columns, pk, batch_id)
                log.debug("%s.%s: MERGE %.1fs", db, table, time.monotonic() - t)
            changes.unpersist()
            self._columns[(db, table)] = columns
            stats.rows += sum(g.n for g in schemas)
            newest = max(g.newest for g in schemas) / 1e6
            stats.newest_commit_ts = max(stats.newest_commit_ts or 0.0, newest)
        return stats

    # --- schema -------------------------------------------------------------------------------

    def _lake_columns(self, db: str, table: str) -> list[tuple[str, str]]:
        key = (db, table)
        if key not in self._columns:
            path = self.path(db, table + "__changes")
            columns: list[tuple[str, str]] = []
            if _is_delta(path):
                after = self.spark.read.format("delta").load(path).schema["after"].dataType
                columns = [(f.name, f.dataType.simpleString()) for f in after.fields]
            self._columns[key] = columns
        return self._columns[key]

    def _evolve(self, db: str, table: str, lake: list[tuple[str, str]],
                schemas: list[_Schema]) -> tuple[list[tuple[str, str]], list[str]]:
        """The union of the lake's columns and this batch's table maps, in source order. New columns are
        added; a type that widens (or narrows into the lake's type) is kept wide; anything else stops."""
        columns = list(lake)
        pk: list[str] = []
        first: dict[str, bytes] = {}  # column -> the first sequence of an image with it
        for g in schemas:  # in source order
            meta = g.meta
            pk = meta["pk"]
            for name, _ in meta["columns"]:
                first.setdefault(name, g.first_seq)
            index = {n: i for i, (n, _) in enumerate(columns)}
            for name, dtype in meta["columns"]:
                if name not in index:
                    index[name] = len(columns)
                    columns.append((name, dtype))
                    continue
                old = columns[index[name]][1]
                if widens(dtype, old):
                    continue
                if widens(old, dtype):
                    columns[index[name]] = (name, dtype)
                    continue
                raise LandError(f"`{db}`.`{table}`: column `{name}` changed from {old} to {dtype} at binlog position "
                                f"{g.first_position} (file:position:index), {self._ddl_before(db, table, g)}; "
                                "not a safe widening, so the query stops: land the table anew from that point "
                                "under a new lake path")
        # Columns that the batch's older images lack: added (or dropped and added again) in the batch
        self._appear[(db, table)] = (first, {n for n, seq in first.items() if seq > schemas[0].first_seq})
        return columns, pk

    def _defaults(self, db: str, table: str, columns: list[tuple[str, str]], added: list[str]) -> list[D.Default]:
        """The defaults the mirror needs: of the columns ``added`` to it now, and of the columns that images
        of this batch lack because they are older than the ADD COLUMN (docs/LAND.md, "Schema changes")."""
        first, older = self._appear.get((db, table), ({}, set()))
        wanted = [n for n, _ in columns if n in added or n in older]
        if not wanted:
            return []
        self._read_statements()
        types = dict(columns)
        out = []
        for name in wanted:
            try:
                d = self._added.default(db, table, name, types, first.get(name))
            except D.Uncomputable as exc:
                log.warning("`%s`.`%s`: the mirror's column `%s` stays null in rows written before it was added "
                            "(or renamed): only the server can compute their value: %s. `binlake snapshot --tables "
                            "%s.%s` reads the rows again", db, table, name, exc, db, table)
                continue
            if d is not None:
                out.append(d)
        return out

    def _read_statements(self) -> None:
        """The schema topic's statements since the last read (committed ones), for their ADD COLUMNs."""
        topic = f"{self.topic_prefix}._schema"
        try:
            records = self._kafka(topic, {"0": self._schema_next}, "latest").select(
                "offset", "headers", "value").collect()
        except Exception as exc:
            raise LandError(f"ADD COLUMN statements could not be read from {topic}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0]}") from exc
        for r in sorted(records, key=lambda r: r.offset):
            headers = {h.key: bytes(h.value) for h in r.headers or ()}
            for item in record_events(headers, bytes(r.value), f"{topic}[0]@{r.offset}"):
                if isinstance(item.event, QueryEvent):
                    self._added.feed(item.seq.encode(), item.event)
            self._schema_next = r.offset + 1

    def _ddl_before(self, db: str, table: str, group: _Schema) -> str:
        """The last statement on the schema topic before ``group``'s first row that names the table: for
        the error message only, so the topic is read just then."""
        topic = f"{self.topic_prefix}._schema"
        mentions = re.compile(r"(?<![\w$])`?" + re.escape(table) + r"`?(?![\w$])", re.IGNORECASE)
        found = None
        try:
            records = self._kafka(topic, "earliest", "latest").select("offset", "headers", "value").collect()
            for r in records:
                headers = {h.key: bytes(h.value) for h in r.headers or ()}
                for item in record_events(headers, bytes(r.value), f"{topic}[0]@{r.offset}"):
                    ev = item.event
                    if (item.seq.encode() < group.first_seq and isinstance(ev, QueryEvent)
                            and _DDL.match(ev.query) and mentions.search(ev.query)
                            and (ev.database == db or re.search(re.escape(db), ev.query, re.IGNORECASE))):
                        found = (str(item.seq), ev.query)
        except Exception as exc:  # the message must still come out
            return f"the DDL statement could not be read from {topic}: {type(exc).__name__}: {exc}"
        if found is None:
            return f"no DDL statement naming the table before it on {topic}"
        return f"after the DDL statement at {found[0]}: {' '.join(found[1].split())}"

    def _add_columns(self, path: str, lake: list[tuple[str, str]], columns: list[tuple[str, str]],
                     nested: bool, defaults: list[D.Default] | None = None) -> None:
        """ALTER a table from the lake's columns to the union: added columns, widened types (type widening).
        ``defaults``: of added mirror columns, for the rows already there."""
        current = dict(lake)
        prefixes = ("before.", "after.") if nested else ("",)
        added = [(n, t) for n, t in columns if n not in current]
        if added:
            if any(t == "timestamp_ntz" for _, t in added):  # Delta adds this feature only to new tables itself
                self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES "
                               "('delta.feature.timestampNtz' = 'supported')")
            if defaults:
                D.mark_pending(self.spark, path, defaults)
            specs = ", ".join(f"{p}{quote(n)} {t}" for p in prefixes for n, t in added)
            self.spark.sql(f"ALTER TABLE delta.{quote(path)} ADD COLUMNS ({specs})")
            if defaults:
                D.give_existing_rows(self.spark, path, defaults)
        for name, dtype in columns:
            if name in current and current[name] != dtype and widens(current[name], dtype):
                for p in prefixes:
                    self.spark.sql(f"ALTER TABLE delta.{quote(path)} ALTER COLUMN {p}{quote(name)} TYPE {dtype}")

    # --- mirror -------------------------------------------------------------------------------

    def _merge(self, changes: DataFrame, db: str, table: str, columns: list[tuple[str, str]], pk: list[str],
               batch_id: int) -> None:
        from delta.tables import DeltaTable

        path = self.path(db, table)
        known = self._mirrors.get((db, table))
        exists = known is not None or _is_delta(path)
        if known is None and exists:
            # The mirror's own schema: a crash may have come between the change log's ALTER and this one,
            # or between adding columns and giving their defaults to the rows there.
            pending = D.pending(self.spark, path)
            if pending:
                D.give_existing_rows(self.spark, path, pending)
            known = [(f.name, f.dataType.simpleString()) for f in DeltaTable.forPath(self.spark, path).toDF().schema
                     if not f.name.startswith("_binlake_")]
        added = [n for n, _ in columns if n not in dict(known or [])] if exists else []
        fills = self._defaults(db, table, columns, added)
        order = F.struct(F.col("seq"), F.col("row_index"), F.col("_sub"))
        image = D.mirror_images([n for n, _ in columns], fills)
        upserts = changes.filter("after IS NOT NULL").select(
            *image, F.lit(False).alias("_deleted"), "seq", "row_index", F.lit(1).alias("_sub"), "commit_ts")
        key_moved = " OR ".join(f"NOT (before.{quote(k)} <=> after.{quote(k)})" for k in pk)
        deletes = changes.filter(f"before IS NOT NULL AND (after IS NULL OR {key_moved})").select(
            *[F.col(f"before.{quote(n)}").alias(n) if n in pk else F.lit(None).cast(t).alias(n) for n, t in columns],
            F.lit(True).alias("_deleted"), "seq", "row_index", F.lit(0).alias("_sub"), "commit_ts")
        latest = (upserts.unionByName(deletes)
                  .withColumn("_order", order)
                  .groupBy(*[F.col(quote(k)) for k in pk])
                  .agg(F.max_by(F.struct("*"), "_order").alias("s"))
                  .select("s.*")
                  .withColumnRenamed("seq", "_binlake_seq")
                  .withColumnRenamed("commit_ts", "_binlake_commit_ts"))
        surviving = latest.filter("NOT _deleted").select(*[quote(n) for n, _ in [*columns, *_META]])
        if not exists:
            # A new mirror starts empty: the batch's surviving rows are plain inserts, no MERGE needed.
            # (A replay after a crash finds the table and MERGEs, or skips by txnVersion: same result.)
            self._append(surviving, path, batch_id, stats=[*pk, "_binlake_seq"])
            self._mirrors[(db, table)] = columns
            return
        assert known is not None
        self._add_columns(path, known, columns, nested=False, defaults=[d for d in fills if d.column in added])
        ranges = self._key_ranges(changes, columns, pk)
        if len(ranges) == len(pk) and self.spark.read.format("delta").load(path).where(
                " AND ".join(f"{c} BETWEEN {low} AND {high}" for c, low, high in ranges)).isEmpty():
            # No mirror row has a key in the batch's key ranges (Delta answers from file statistics when keys
            # only grow): nothing can match, so MERGE would just insert the surviving rows. An append is that,
            # without MERGE's fixed cost of several seconds per batch.
            self._append(surviving, path, batch_id)
            log.debug("%s.%s: no mirror row in the batch's key ranges: appended, no MERGE", db, table)
            self._mirrors[(db, table)] = columns
            return
        assign = {quote(n): f"s.{quote(n)}" for n, _ in [*columns, *_META]}
        on = " AND ".join([f"t.{quote(k)} = s.{quote(k)}" for k in pk]
                          + [f"t.{c} BETWEEN {low} AND {high}" for c, low, high in ranges])
        conf = self.spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            (DeltaTable.forPath(self.spark, path).alias("t").merge(latest.alias("s"), on)
             .whenMatchedDelete(condition="s._deleted")
             .whenMatchedUpdate(condition="NOT s._deleted", set=assign)
             .whenNotMatchedInsert(condition="NOT s._deleted", values=assign)
             .execute())
        finally:
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
        self._mirrors[(db, table)] = columns

    def _key_ranges(self, changes: DataFrame, columns: list[tuple[str, str]],
                    pk: list[str]) -> list[tuple[str, str, str]]:
        """Target-only bounds for the MERGE condition: each key column between the batch's smallest and
        largest key. A matching row must lie inside them, and Delta skips every mirror file whose key
        statistics (collected since the mirror's creation) lie outside: without them MERGE reads the whole
        mirror each batch, which grows with the table; with them a batch of new keys reads none of it.
        The bounds travel as text (hex for binary keys) so that no value is converted through Python.
        Returns (quoted key column, low literal, high literal) per bounded key column."""
        types = dict(columns)
        keys = [k for k in pk if types[k] not in ("float", "double")]  # NaN and -0.0 order oddly: no bounds
        bounds = []
        for k in keys:
            low = F.least(F.min(f"before.{quote(k)}"), F.min(f"after.{quote(k)}"))
            high = F.greatest(F.max(f"before.{quote(k)}"), F.max(f"after.{quote(k)}"))
            text = F.hex if types[k] == "binary" else (lambda c: c.cast("string"))
            bounds += [text(low), text(high)]
        found = changes.agg(*bounds).first() if bounds else None
        ranges = []
        for i, k in enumerate(keys):
            low, high = found[2 * i], found[2 * i + 1]
            if low is not None and high is not None:
                ranges.append((quote(k), _literal(low, types[k]), _literal(high, types[k])))
        return ranges


def _literal(text: str, dtype: str) -> str:
    """A key bound as SQL: binary from hex, anything else its text cast back to the column's type."""
    if dtype == "binary":
        return f"X'{text}'"
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"CAST('{escaped}' AS {dtype})"


def _is_delta(path: str) -> bool:
    from delta.tables import DeltaTable
    from pyspark.sql import SparkSession

    return DeltaTable.isDeltaTable(SparkSession.getActiveSession(), path)
