"""The competitor of bench/run_big_tables.py: what a team writes instead of `binlake land` -- Spark Structured
Streaming reading Debezium's JSON change events of one table (here `binlake run` with `kafka.format:
debezium-json`, what a Debezium MySQL/MariaDB connector publishes) with Spark's Kafka source, and a foreachBatch
that MERGEs each micro-batch's last change per key into a Delta table with deletion vectors (Delta's own
merge-on-read).

    python bench/merge_job.py --kafka HOST:PORT --topic PREFIX.DB.TABLE --table PATH --checkpoint PATH

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
    parser.add_argument("--table", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--trigger", default="1 second")
    args = parser.parse_args()

    from delta.tables import DeltaTable

    from streaming_job.land.job import build_session  # (its jars: Delta and Spark's Kafka source, cached)

    spark = build_session("local[2]", 2, "merge-job")

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
        if not DeltaTable.isDeltaTable(spark, args.table):
            (last.where("op != 'd'").select("id", "w", "v", "note").write.format("delta")
             .option("delta.enableDeletionVectors", "true").save(args.table))
        else:
            (DeltaTable.forPath(spark, args.table).alias("t").merge(last.alias("s"), "t.id = s.key")
             .whenMatchedDelete("s.op = 'd'")
             .whenMatchedUpdate("s.op != 'd'", {c: f"s.{c}" for c in ("id", "w", "v", "note")})
             .whenNotMatchedInsert("s.op != 'd'", {c: f"s.{c}" for c in ("id", "w", "v", "note")})
             .execute())
        last.unpersist()
        print(f"batch {batch_id}: {records} records in, {rows} row changes landed in "
              f"{time.monotonic() - started:.2f}s", file=sys.stderr, flush=True)

    query = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.kafka)
             .option("subscribe", args.topic).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed").load()
             .writeStream.foreachBatch(land).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime=args.trigger).start())
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
