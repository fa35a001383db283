"""The competitor of bench/run_big_tables.py: what a team writes instead of `binlake land` -- Spark Structured
Streaming reading Debezium's JSON change events of one table (here `binlake run` with `kafka.format:
debezium-json`, what a Debezium MySQL/MariaDB connector publishes) with Spark's Kafka source, and a foreachBatch
that MERGEs each micro-batch's last change per key into a Delta table with deletion vectors (Delta's own
merge-on-read), or with ``--format iceberg`` Spark's MERGE INTO an Iceberg table in merge-on-read mode (position
deletes: ``write.merge.mode`` and the update and delete modes ``merge-on-read``, format version 2) named
``binlake.DB.TABLE`` in the lake's catalog (``--lake``: as binlake's own Iceberg lake on a local path, Iceberg's
Hadoop catalog on it).

    python bench/merge_job.py --kafka HOST:PORT --topic PREFIX.DB.TABLE --table PATH --checkpoint PATH
    python bench/merge_job.py --format iceberg --lake PATH --kafka HOST:PORT --topic PREFIX.DB.TABLE --checkpoint PATH

The bench's table: ``id`` BIGINT (the key), ``w`` TINYINT, ``v`` BIGINT, ``note`` VARCHAR. Each batch prints
"batch N: X records in, Y row changes landed in Zs" (the line binlake land prints, which the bench waits on)."""

from __future__ import annotations

import argparse
import sys
import time

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

ROW = "struct<id: bigint, w: int, v: bigint, note: string>"
EVENT = f"struct<payload: struct<before: {ROW}, after: {ROW}, op: string>>"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--table", help="the Delta table's path")
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta")
    parser.add_argument("--lake", help="format iceberg: the lake whose catalog holds the table")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--trigger", default="1 second")
    args = parser.parse_args()

    from delta.tables import DeltaTable

    from streaming_job.land.job import build_session  # (its jars: Delta and Spark's Kafka source, cached)

    iceberg = None
    if args.format == "iceberg":
        from streaming_job.iceberg.catalog import IcebergCatalog

        iceberg = IcebergCatalog(args.lake).spark_conf()
    spark = build_session("local[2]", 2, "merge-job", iceberg=iceberg)
    name = "binlake." + ".".join(args.topic.split(".")[-2:])
    columns = ("id", "w", "v", "note")

    def land(batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        records = batch.count()
        changes = (batch.where("value IS NOT NULL")  # tombstones
                   .select("partition", "offset", F.from_json(F.col("value").cast("string"), EVENT).alias("e"))
                   .select("partition", "offset", "e.payload.op", "e.payload.after.*",
                           F.col("e.payload.before.id").alias("before_id"))
                   .withColumn("key", F.coalesce("id", "before_id")))
        last = (changes.withColumn("n", F.row_number().over(
                    Window.partitionBy("key").orderBy(F.desc("partition"), F.desc("offset"))))
                .where("n = 1").drop("n").cache())
        rows = last.count()
        if iceberg is not None:
            merge_iceberg(last)
        elif not DeltaTable.isDeltaTable(spark, args.table):
            (last.where("op != 'd'").select("id", "w", "v", "note").write.format("delta")
             .option("delta.enableDeletionVectors", "true").save(args.table))
        else:
            (DeltaTable.forPath(spark, args.table).alias("t").merge(last.alias("s"), "t.id = s.key")
             .whenMatchedDelete("s.op = 'd'")
             .whenMatchedUpdate("s.op != 'd'", {c: f"s.{c}" for c in columns})
             .whenNotMatchedInsert("s.op != 'd'", {c: f"s.{c}" for c in columns})
             .execute())
        last.unpersist()
        print(f"batch {batch_id}: {records} records in, {rows} row changes landed in "
              f"{time.monotonic() - started:.2f}s", file=sys.stderr, flush=True)

    def merge_iceberg(last: DataFrame) -> None:
        if not spark.catalog.tableExists(name):
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
            spark.sql(f"CREATE TABLE {name} (id BIGINT NOT NULL, w INT, v BIGINT, note STRING) USING iceberg "
                      "TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read', "
                      "'write.update.mode'='merge-on-read', 'write.delete.mode'='merge-on-read')")
            last.where("op != 'd'").select(*columns).writeTo(name).append()
            return
        last.createOrReplaceTempView("batch")  # (in the batch's session: foreachBatch's own)
        last.sparkSession.sql(f"MERGE INTO {name} t USING batch s ON t.id = s.key "
                  "WHEN MATCHED AND s.op = 'd' THEN DELETE "
                  f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in columns)} "
                  f"WHEN NOT MATCHED AND s.op != 'd' THEN INSERT ({', '.join(columns)}) "
                  f"VALUES ({', '.join(f's.{c}' for c in columns)})")

    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.kafka)
             .option("subscribe", args.topic).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed").load()
             .writeStream.foreachBatch(land).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=args.trigger).start())
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
