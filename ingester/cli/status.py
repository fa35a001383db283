"""``binlake status``: where the source, the daemon and the land job are, from what they leave behind.

Read from the servers themselves (their binlog position and GTIDs), the daemon's committed checkpoint (the
offsets topic), the topics' end offsets and the land job's Spark checkpoint: neither the daemon nor the
land job needs to run. Each part that cannot be read says why and the rest is still shown.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import Config, load_config
from .land import add_lake_arguments, land_overrides, store_settings, verify_results


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="the source's, the daemon's and the land job's positions and lags")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (see docs/CONFIGURATION.md)")
    p.add_argument("--source", metavar="URL", help="mysql://USER[:PASSWORD]@HOST:PORT")
    p.add_argument("--source-hosts", metavar="HOST:PORT,...", help="the other servers of source.hosts")
    p.add_argument("--kafka", metavar="HOST:PORT", help="Kafka bootstrap server")
    p.add_argument("--topic-prefix", metavar="P")
    add_lake_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.set_defaults(run=run)


@dataclass
class ServerStatus:
    server: str
    file: str | None = None
    position: int | None = None
    gtids: str | None = None
    error: str | None = None


@dataclass
class DaemonStatus:
    source_id: str
    file: str | None = None
    position: int | None = None
    gtids: str | None = None
    streamed_from: str | None = None
    committed_at: float | None = None  # unix seconds of the checkpoint's commit
    behind_bytes: int | None = None  # binlog bytes the server has after the checkpoint
    lag_s: float | None = None  # 0 when caught up; else seconds since the last commit
    # XA transactions prepared and not resolved at the checkpoint: the checkpoint's "prepared" entries, with "xid"
    prepared: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


@dataclass
class TableStatus:
    table: str
    topic: str
    end_offset: int
    landed_offset: int | None = None
    behind_records: int | None = None
    lag_s: float | None = None  # how long the oldest record not landed yet has waited (0: caught up)
    verify: VerifyStatus | None = None  # the table's last `binlake verify` run, as far as it has landed
    ended: str | None = None  # the lake's table ended: "dropped at <position>", "renamed to db.t at <position>"
    # parked (docs/LAND.md, "Parked tables"): its mirror's rewrite runs beside the batches, its records wait for it
    parked: str | None = None  # "rewriting (alter `d`.`t` at 1:420:0: ALTER TABLE ...)", "rewritten", "catching up"
    parked_since: float | None = None  # unix seconds


@dataclass
class VerifyStatus:
    run: str
    checked_at: float  # unix seconds of its newest chunk's result
    chunks: int
    differ: int  # chunks that differ
    complete: bool  # its last chunk has landed
    first_difference: str | None = None  # the first differing chunk's key range


@dataclass
class LandStatus:
    checkpoint: str | None
    batch: int | None = None
    batch_at: float | None = None
    error: str | None = None


@dataclass
class Status:
    servers: list[ServerStatus] = field(default_factory=list)
    daemon: DaemonStatus | None = None
    land: LandStatus | None = None
    tables: list[TableStatus] = field(default_factory=list)
    kafka_error: str | None = None


def _servers(cfg: Config) -> tuple[list[ServerStatus], dict[str, list[tuple[str, int]]]]:
    """Each server's binlog position now, and its binlog files' sizes (for the daemon's distance)."""
    from ..sources.position import binlog_sizes, current_position
    from ..sources.replication import SourceURL

    out, sizes = [], {}
    for url in cfg.source_candidates():
        src = SourceURL.parse(url)
        status = ServerStatus(f"{src.host}:{src.port}")
        out.append(status)
        try:
            with SourceURL.parse(cfg.source_url(url)).connect(connect_timeout=5) as conn, conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                status.file, status.position, status.gtids = current_position(cur, "MariaDB" in cur.fetchone()[0])
                sizes[status.server] = binlog_sizes(cur)
        except Exception as exc:  # one server down (or no binlog): the others are still shown
            status.error = str(exc)
    return out, sizes


def collect(cfg: Config) -> Status:
    from ..daemon.kafka_io import offsets_topic, read_compacted_records
    from ..daemon.runner import transactional_id
    from ..sources.position import bytes_after

    status = Status()
    status.servers, distances = _servers(cfg)
    source_id = transactional_id(cfg)
    daemon = status.daemon = DaemonStatus(source_id)
    security = cfg.kafka.client_options()
    try:
        found = read_compacted_records(cfg.kafka.bootstrap, offsets_topic(cfg.kafka.topic_prefix), security)
    except Exception as exc:  # no broker: the servers' part is still worth showing
        status.kafka_error = f"kafka {cfg.kafka.bootstrap}: {exc}"
        return status
    if source_id.encode() not in found:
        daemon.error = f"no checkpoint yet in {offsets_topic(cfg.kafka.topic_prefix)} (the daemon has not committed)"
    else:
        value, ts = found[source_id.encode()]
        cp = json.loads(value)
        daemon.file, daemon.position, daemon.gtids = cp.get("file"), cp.get("position"), cp.get("gtid_set")
        daemon.streamed_from = cp.get("source") or status.servers[0].server
        daemon.prepared = [{"xid": xid, **entry} for xid, entry in cp.get("prepared", {}).items()]
        daemon.committed_at = ts / 1000
        logs = distances.get(daemon.streamed_from)
        if logs is not None and daemon.file and daemon.position is not None:
            daemon.behind_bytes = bytes_after(logs, daemon.file, int(daemon.position))
            if daemon.behind_bytes is not None:
                daemon.lag_s = 0.0 if daemon.behind_bytes == 0 else max(0.0, time.time() - daemon.committed_at)
    _land(cfg, status)
    return status


def _land(cfg: Config, status: Status) -> None:
    from streaming_job.source.source_formats import topic_pattern

    ends = _end_offsets(cfg, topic_pattern(cfg.kafka.topic_prefix, cfg.land.source_format))
    landed = None
    if cfg.land.checkpoint:
        land = status.land = LandStatus(cfg.land.checkpoint)
        try:
            landed = _read_landed(cfg)
        except Exception as exc:  # an unreadable checkpoint: the topics' part still shows
            land.error = f"cannot read {cfg.land.checkpoint}: {exc}"
        else:
            if landed is None:
                land.error = "no micro-batch committed yet"
            else:
                land.batch, land.batch_at = landed.batch, landed.time_ms / 1000
    waiting: dict[tuple[str, int], int] = {}
    prefix = cfg.kafka.topic_prefix + "."
    for topic in sorted(ends):
        parts = ends[topic]
        table = TableStatus(topic[len(prefix):], topic, sum(parts.values()))
        if landed is not None:
            done = landed.offsets.get(topic, {})
            table.landed_offset = sum(done.get(p, 0) for p in parts)
            table.behind_records = max(0, table.end_offset - table.landed_offset)
            for p, end in parts.items():
                if done.get(p, 0) < end:
                    waiting[(topic, p)] = done.get(p, 0)
        status.tables.append(table)
    if waiting:
        oldest: dict[str, int] = {}  # topic -> its oldest record not landed (ms)
        for (topic, _), ts in _timestamps(cfg, waiting).items():
            oldest[topic] = min(ts, oldest.get(topic, ts))
        now = time.time()
        for table in status.tables:
            table.lag_s = max(0.0, now - oldest[table.topic] / 1000) if table.topic in oldest else 0.0
    elif landed is not None:
        for table in status.tables:
            table.lag_s = 0.0
    if cfg.land.checkpoint:
        try:
            parked = _parked(cfg)
        except Exception as exc:  # the rest still shows
            status.land = status.land or LandStatus(cfg.land.checkpoint)
            status.land.error = f"cannot read the parked tables in {cfg.land.checkpoint}: {exc}"
        else:
            for table in status.tables:
                if table.table in parked:
                    table.parked, table.parked_since = parked[table.table]
    if cfg.land.lake:
        readers: list[tuple[str, Any, str]] = [("the verify results", _verified, "verify"),
                                                ("the tables", lambda c: _ended(c, status.tables), "ended")]
        for what, read, attribute in readers:
            try:
                found = read(cfg)
            except Exception as exc:  # the rest still shows
                status.land = status.land or LandStatus(cfg.land.checkpoint)
                status.land.error = f"cannot read {what} in {cfg.land.lake}: {exc}"
                continue
            for table in status.tables:
                setattr(table, attribute, found.get(table.table))


def _ended(cfg: Config, tables: list[TableStatus]) -> dict[str, str]:
    """The tables whose lake tables ended (dropped, renamed away), by ``db.table``: table_statements.py."""
    from streaming_job.format.lake_state import delta_properties, ended_tables, iceberg_properties
    from streaming_job.lake.files import LakeFiles

    from .land import _results_format

    lake, store = cfg.land.lake or "", store_settings(cfg)
    names = [(t.table.split(".", 1)[0], t.table.split(".", 1)[1]) for t in tables if "." in t.table]
    if _results_format(cfg.land.format, lake) == "iceberg":
        from streaming_job.iceberg.catalog import IcebergCatalog

        read = iceberg_properties(IcebergCatalog(lake, cfg.land.iceberg_catalog, store, cfg.land.checkpoint).open())
    else:
        files = LakeFiles.of(lake, store)
        if files is None:
            return {}
        read = delta_properties(files, lake)
    return {f"{db}.{table}": what for (db, table), what in ended_tables(names, read).items()}


def _parked(cfg: Config) -> dict[str, tuple[str, float]]:
    """The parked tables by ``db.table``: what their park is doing, and since when
    (streaming_job/statements/parking.py)."""
    from streaming_job.lake.files import LakeFiles
    from streaming_job.statements.parking import read_parks

    files = LakeFiles.of(cfg.land.checkpoint or "", store_settings(cfg))
    if files is None:
        return {}
    return {f"{t.db}.{t.table}": (park.describe(), park.since) for park in read_parks(files, cfg.land.checkpoint or "")
            for t in park.tables}


def _verified(cfg: Config) -> dict[str, VerifyStatus]:
    """Per table, its last verify run's results in the lake (<lake>/_verify, or an Iceberg lake's
    _binlake.verify)."""
    last: dict[str, list[dict[str, Any]]] = {}
    for r in verify_results(cfg).read():  # oldest first: the last run seen is the newest
        runs = last.setdefault(r["table"], [])
        if runs and runs[-1]["run"] != r["run"]:
            runs.clear()
        runs.append(r)
    out = {}
    for table, results in last.items():
        differ = [r for r in results if not r["match"]]
        first = f"({differ[0]['low'] or 'start'} .. {differ[0]['high'] or 'end'}]" if differ else None
        out[table] = VerifyStatus(results[-1]["run"], results[-1]["checked_ts"].timestamp(), len(results),
                                  len(differ), any(r["high"] is None for r in results), first)
    return out


def _read_landed(cfg: Config) -> Any:
    from streaming_job.lake.files import LakeFiles
    from streaming_job.source.progress import read_landed

    files = LakeFiles.of(cfg.land.checkpoint or "", store_settings(cfg))
    if files is None:
        raise ValueError("binlake status reads local and s3a:// checkpoints")
    return read_landed(files, cfg.land.checkpoint or "")


def _consumer(cfg: Config) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**cfg.kafka.client_options(), bootstrap_servers=cfg.kafka.bootstrap,
                         isolation_level="read_committed", enable_auto_commit=False, group_id=None)


def _end_offsets(cfg: Config, pattern: str) -> dict[str, dict[int, int]]:
    import re

    from kafka import TopicPartition

    consumer = _consumer(cfg)
    try:
        topics = [t for t in consumer.topics() if re.fullmatch(pattern, t)]
        parts = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()]
        out: dict[str, dict[int, int]] = {}
        for tp, end in consumer.end_offsets(parts).items():
            out.setdefault(tp.topic, {})[tp.partition] = int(end)
        return out
    finally:
        consumer.close()


def _timestamps(cfg: Config, waiting: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The timestamp (ms) of the first record not landed yet, per topic partition."""
    from kafka import TopicPartition

    consumer = _consumer(cfg)
    try:
        parts = {TopicPartition(t, p): offset for (t, p), offset in waiting.items()}
        consumer.assign(list(parts))
        for tp, offset in parts.items():
            consumer.seek(tp, offset)
        found: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + 10
        while len(found) < len(parts) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500, max_records=500).items():
                if records and (tp.topic, tp.partition) not in found:
                    found[(tp.topic, tp.partition)] = records[0].timestamp
                    consumer.pause(tp)
        return found
    finally:
        consumer.close()


def _ago(ts: float | None) -> str:
    return "-" if ts is None else f"{max(0.0, time.time() - ts):.1f} s ago"


def render(status: Status) -> str:
    lines = []
    for s in status.servers:
        lines.append(f"source {s.server}: " + (f"unreachable: {s.error}" if s.error else
                                               f"binlog {s.file}:{s.position}, GTIDs {s.gtids or 'none'}"))
    d = status.daemon
    if status.kafka_error:
        lines.append(status.kafka_error)
    elif d is not None:
        if d.error:
            lines.append(f"daemon {d.source_id}: {d.error}")
        else:
            lag = ("caught up" if d.behind_bytes == 0 else
                   f"{d.behind_bytes:,} binlog bytes behind, lag {d.lag_s:.1f} s" if d.behind_bytes is not None else
                   "its position is not on that server (purged, or another server's)")
            lines.append(f"daemon {d.source_id}: committed {d.file}:{d.position} (GTIDs {d.gtids or 'none'}) from "
                         f"{d.streamed_from} {_ago(d.committed_at)}: {lag}")
            for x in d.prepared:  # held back until their outcome (docs/FORMAT.md, "XA transactions")
                lines.append(f"  XA transaction {x['xid']} prepared {_ago(x.get('ts', 0) / 1e6)} (GTID "
                             f"{x.get('gtid') or 'none'}), not resolved: its changes of "
                             f"{', '.join(x.get('tables', ())) or 'no captured table'} held back")
    land = status.land
    if land is not None:
        lines.append(f"land {land.checkpoint}: " + (land.error or f"micro-batch {land.batch}, {_ago(land.batch_at)}"))
    if status.tables:
        width = max(len(t.table) for t in status.tables)
        lines.append(f"  {'table':<{width}}  {'topic end':>10}  {'landed':>10}  {'behind':>8}  {'lag':>8}  last verify")
        for t in status.tables:
            lines.append(f"  {t.table:<{width}}  {t.end_offset:>10}  {_num(t.landed_offset):>10}  "
                         f"{_num(t.behind_records):>8}  {'-' if t.lag_s is None else f'{t.lag_s:.1f} s':>8}  "
                         f"{_verify_text(t.verify)}{f' (ended: {t.ended})' if t.ended else ''}"
                         f"{f' (parked {_ago(t.parked_since)}: {t.parked})' if t.parked else ''}")
    return "\n".join(lines)


def _verify_text(v: VerifyStatus | None) -> str:
    if v is None:
        return "-"
    state = (f"{v.differ} of {v.chunks} chunks differ, first {v.first_difference}" if v.differ else
             f"{v.chunks} chunks match" if v.complete else f"{v.chunks} chunks match so far")
    return f"run {v.run} {_ago(v.checked_at)}: {state}"


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def run(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config, land_overrides(args))
    except ValueError as exc:
        print(f"binlake: error: {exc}", file=sys.stderr)
        return 2
    status = collect(cfg)
    print(json.dumps(asdict(status), indent=2) if args.json else render(status))
    return 0
