"""``binlake run``: the replication daemon (binlog stream -> Kafka, exactly once)."""

from __future__ import annotations

import argparse
import gc
import json
import logging
from typing import Any

from ..config import load_config
from .logs import setup_logging


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="stream a server's binlog into Kafka, exactly once")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/CONFIGURATION.md)")
    p.add_argument("--source", metavar="URL", help="mysql://USER[:PASSWORD]@HOST:PORT")
    p.add_argument("--source-hosts", metavar="HOST:PORT,...",
                   help="servers to fail over to (same GTID history, same user); resumes by GTIDs")
    p.add_argument("--kafka", metavar="HOST:PORT", help="Kafka bootstrap server")
    p.add_argument("--topic-prefix", metavar="P")
    p.add_argument("--server-id", type=int, help="our replica server_id")
    p.add_argument("--exit-at-end", action="store_true", default=None,
                   help="stop once caught up (non-blocking dump), for batch catch-up and tests")
    p.add_argument("--metrics-port", type=int, help="serve /metrics, /healthz and /readyz (127.0.0.1)")
    p.add_argument("--log-format", choices=("text", "json"))
    p.add_argument("--verbose", action="store_true", default=None,
                   help="the Kafka client's own log lines here too, not only in the log file")
    p.add_argument("--snapshot", choices=("initial", "never", "when-needed"),
                   help="read the selected tables first (initial: without a checkpoint; when-needed: also when "
                        "the checkpoint's binlog is purged)")
    p.set_defaults(run=run)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if getattr(args, "source", None):
        out.setdefault("source", {})["url"] = args.source
    if getattr(args, "source_hosts", None):
        out.setdefault("source", {})["hosts"] = [h.strip() for h in args.source_hosts.split(",") if h.strip()]
    if getattr(args, "server_id", None):
        out.setdefault("source", {})["server_id"] = args.server_id
    if getattr(args, "kafka", None):
        out.setdefault("kafka", {})["bootstrap"] = args.kafka
    if getattr(args, "topic_prefix", None):
        out.setdefault("kafka", {})["topic_prefix"] = args.topic_prefix
    if getattr(args, "exit_at_end", None):
        out["exit_at_end"] = True
    if getattr(args, "metrics_port", None) is not None:
        out["metrics_port"] = args.metrics_port
    if getattr(args, "snapshot", None):
        out["snapshot"] = args.snapshot
    if getattr(args, "log_format", None):
        out["log_format"] = args.log_format
    if getattr(args, "verbose", None):
        out["verbose"] = True
    return out


def run(args: argparse.Namespace) -> int:
    from ..daemon.runner import Runner

    gc.freeze()  # what start-up made (modules, classes, functions) left out of the cycle collector's scans for good

    cfg = load_config(args.config, overrides(args))
    setup_logging(cfg, "run")
    logging.getLogger("binlake.run").info("configuration: %s", json.dumps(cfg.redacted()))
    stats = Runner(cfg).run()
    logging.getLogger("binlake.run").info("stopped: %s", json.dumps(stats))
    return 0

