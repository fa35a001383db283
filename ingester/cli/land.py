"""``binlake land``: the Spark job that lands the daemon's topics in Delta Lake (local mode by default)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from ..config import Config, load_config
from ..registry_client import RegistryClient
from ..sources.errors import ReplicationError
from .logs import setup_logging
from .run import overrides


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/CONFIGURATION.md)")
    p.add_argument("--kafka", metavar="HOST:PORT", help="Kafka bootstrap server")
    p.add_argument("--topic-prefix", metavar="P")
    add_lake_arguments(p)
    p.add_argument("--trigger", metavar="1s|available-now", help="micro-batch interval, or land what is there")
    p.add_argument("--quarantine", action="store_true", default=None,
                   help="land undecodable records in <lake>/_quarantine instead of stopping")
    p.add_argument("--min-partitions", type=int, metavar="N", help="Kafka source minPartitions")
    p.add_argument("--kafka-source", choices=("auto", "binlake", "spark"),
                   help="the stream's Kafka source (default auto: binlake's for many topic partitions)")
    p.add_argument("--source-format", choices=("binlake", "debezium-json", "debezium-avro"),
                   help="what the topics hold: binlake's records (default) or Debezium's change events, in Kafka "
                        "Connect's JSON (with schemas) or in Avro with a schema registry (docs/DEBEZIUM.md)")
    p.add_argument("--schema-registry-url", metavar="URL",
                   help="debezium-avro: the registry's Confluent-compatible API (debezium.schema_registry_url; "
                        "credentials: debezium.schema_registry_username/password_file)")
    p.add_argument("--max-batch-bytes", type=int, metavar="BYTES",
                   help="a micro-batch reads about this many bytes of Kafka records at most (default 64 MiB; 0: all)")
    p.add_argument("--max-offsets-per-trigger", type=int, metavar="N",
                   help="bound each micro-batch in records instead (Spark's Kafka source)")
    p.add_argument("--driver-rows", type=int, metavar="N",
                   help="a table's batch of at most N row changes is reduced for its mirror by the driver")
    p.add_argument("--compact-files", type=int, metavar="N",
                   help="compact a table's small files once it has N of them (default: Delta 32, Iceberg 4)")
    p.add_argument("--small-file-bytes", type=int, metavar="BYTES", help="a small file's bound (default 8 MiB)")
    p.add_argument("--compact-bytes", type=int, metavar="BYTES",
                   help="the most bytes of small files one compaction rewrites (default 256 MiB)")
    p.add_argument("--key-memory", type=int, metavar="BYTES",
                   help="the most bytes of mirror files' keys the driver keeps between batches (default 512 MiB)")
    p.add_argument("--deletion-vectors", choices=("auto", "always", "never"),
                   help="updates and deletes of a mirror's rows marked by position instead of file rewrites: "
                        "deletion vectors (format delta), position delete files (format iceberg) (default auto: "
                        "once a batch would rewrite more than 128 MiB of a mirror)")
    p.add_argument("--iceberg-snapshot-retention", metavar="DURATION",
                   help="format iceberg: snapshots older than this are expired (default 1h)")
    p.add_argument("--master", metavar="URL", help="Spark master (default local[2])")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on 127.0.0.1")
    p.add_argument("--log-format", choices=("text", "json"))
    p.add_argument("--verbose", action="store_true", default=None,
                   help="Spark's and the Kafka client's own log lines here too, not only in the log files")


def add_lake_arguments(p: argparse.ArgumentParser) -> None:
    """Where a lake and its checkpoint are: ``land``'s and ``status``'s."""
    p.add_argument("--lake", metavar="PATH", help="root of the Delta tables")
    p.add_argument("--checkpoint", metavar="PATH", help="Spark checkpoint location (the query's progress)")
    p.add_argument("--s3-endpoint", metavar="URL", help="the object store of an s3a:// lake (default: AWS)")
    p.add_argument("--s3-path-style", action="store_true", default=None,
                   help="address the store's buckets by path (S3-compatible stores)")
    p.add_argument("--format", choices=("delta", "iceberg"),
                   help="the lake's table format: Delta Lake (default) or Apache Iceberg (docs/LAND.md, \"Iceberg\")")
    p.add_argument("--iceberg-catalog", metavar="URL",
                   help="format iceberg: the catalog database as a SQLAlchemy URL, or a REST catalog's http(s):// "
                        "URL (default: Iceberg's Hadoop catalog on a local lake's path, or an earlier lake's SQLite "
                        "catalog in it; a lake on S3: SQLite in the local checkpoint)")


def store_settings(cfg: Config) -> Any:
    """The object store of an s3a:// lake, from land.s3_*."""
    from streaming_job.lake.object_store import ObjectStoreSettings

    return ObjectStoreSettings(cfg.land.s3_endpoint, cfg.land.s3_path_style, cfg.land.s3_region,
                               cfg.land.s3_credentials_file)


def verify_results(cfg: Config) -> Any:
    """The lake's ``binlake verify`` results as its format (land.format) keeps them
    (streaming_job/format/verify_results.py): a Delta table in the lake, or an Iceberg table in the lake's catalog."""
    from streaming_job.format.verify_results import DeltaResults
    from streaming_job.iceberg.catalog import IcebergCatalog
    from streaming_job.iceberg.verify import IcebergResults
    from streaming_job.lake.files import LakeFiles
    from streaming_job.runtime.errors import LandError

    lake, store = cfg.land.lake or "", store_settings(cfg)

    def delta() -> Any:
        files = LakeFiles.of(lake, store)
        if files is None:
            raise ReplicationError(f"the verify results of {lake}: binlake reads local and s3a:// lakes only")
        return DeltaResults(files, lake)

    def iceberg() -> Any:
        try:
            return IcebergResults(IcebergCatalog(lake, cfg.land.iceberg_catalog, store, cfg.land.checkpoint))
        except LandError as exc:
            raise ReplicationError(str(exc)) from None

    return {"delta": delta, "iceberg": iceberg}[_results_format(cfg.land.format, lake)]()


def _results_format(configured: str, lake: str) -> str:
    """The format whose results a local lake holds: as configured, but an Iceberg lake read without
    ``--format iceberg`` (no Delta results in it; an Iceberg catalog, results table, or Hadoop catalog's table
    there) is read as one."""
    from pathlib import Path

    from streaming_job.lake.paths import scheme

    root = Path(lake)
    if configured != "delta" or scheme(lake) or (root / "_verify" / "_delta_log").exists():
        return configured
    marks = (root / "_iceberg_catalog.db", root / "_binlake" / "verify" / "metadata", root / "_verify" / "metadata")
    if any(p.exists() for p in marks) or next(root.glob("*/*/metadata/version-hint.text"), None) is not None:
        logging.getLogger("binlake").info("%s is an Iceberg lake: its verify results are read as Iceberg's", lake)
        return "iceberg"
    return configured


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("land", help="land the topics in Delta Lake: change logs and mirror tables (Spark)")
    add_arguments(p)
    p.set_defaults(run=run)


def land_overrides(args: argparse.Namespace) -> dict[str, Any]:
    out = overrides(args)
    names = ("lake", "checkpoint", "trigger", "quarantine", "min_partitions", "max_offsets_per_trigger",
             "max_batch_bytes", "master", "driver_rows", "kafka_source", "source_format", "s3_endpoint",
             "s3_path_style", "format", "iceberg_catalog", "compact_files", "small_file_bytes", "compact_bytes",
             "key_memory", "iceberg_snapshot_retention", "deletion_vectors")
    land = {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}
    if land:
        out["land"] = land
    if getattr(args, "schema_registry_url", None) is not None:
        out.setdefault("debezium", {})["schema_registry_url"] = args.schema_registry_url
    return out


def settings(cfg: Config, master: str | None) -> Any:
    from streaming_job.land.job import LandSettings

    dbz = cfg.debezium
    registry = None
    if cfg.land.source_format == "debezium-avro" and dbz.schema_registry_url:
        registry = RegistryClient(dbz.schema_registry_url, *dbz.registry_credentials(), dbz.schema_registry_ca)
    return LandSettings(cfg.kafka.bootstrap, cfg.kafka.topic_prefix, cfg.land, master=master,
                        store=store_settings(cfg), metrics_port=cfg.metrics_port, metrics_host=cfg.metrics_host,
                        registry=registry)


def run(args: argparse.Namespace, master_from_config: bool = True) -> int:
    """Run the job; one-line errors (exit 2) for configuration mistakes and for what stops the query."""
    try:
        cfg = load_config(args.config, land_overrides(args))
        log_file = setup_logging(cfg, "land")
        if os.environ.get("BINLAKE_DEBUG"):
            logging.getLogger("binlake.land").setLevel(logging.DEBUG)  # per-step timings of each batch
        logging.getLogger("binlake.land").info("configuration: %s", json.dumps(cfg.redacted()))
        from streaming_job.land.job import run as run_job
        from streaming_job.runtime.errors import LandError

        try:
            job = settings(cfg, cfg.land.master if master_from_config else None)  # LandError without a lake
            if log_file is not None:
                job.jvm_log = str(log_file.with_name("land-spark.log"))
                logging.getLogger("binlake.land").info("Spark's and the Kafka client's own lines: %s and %s "
                                                       "(--verbose: here)", job.jvm_log, log_file)
            return run_job(job)
        except LandError as exc:
            print(f"binlake: error: {exc}", file=sys.stderr)
            return 2
    except ValueError as exc:
        print(f"binlake: error: {exc}", file=sys.stderr)
        return 2
