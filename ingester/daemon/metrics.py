"""Prometheus metrics and health endpoints of the daemon (prometheus-client).

``/metrics`` for Prometheus, ``/healthz`` (the loop made progress recently) and ``/readyz``
(connected to the source and Kafka). Bound to 127.0.0.1 unless configured otherwise.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.events = Counter("binlake_events", "Binlog events read", registry=r)
        self.bytes = Counter("binlake_bytes", "Binlog bytes read", registry=r)
        self.records = Counter("binlake_records", "Records published to Kafka", registry=r)
        self.transactions = Counter("binlake_transactions", "Binlog transactions committed to Kafka", registry=r)
        self.reconnects = Counter("binlake_reconnects", "Reconnections after a broken stream", registry=r)
        self.lag = Gauge("binlake_lag_seconds", "Now minus the newest event or heartbeat timestamp", registry=r)
        self.position = Gauge("binlake_committed_position", "Last committed binlog position", ["file"], registry=r)
        self.commit_latency = Histogram("binlake_kafka_commit_seconds", "Kafka transaction queued-to-committed time",
                                        registry=r, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self.snapshot_rows = Counter("binlake_snapshot_rows", "Rows read by the snapshot and published", registry=r)
        self.snapshot_tables_remaining = Gauge("binlake_snapshot_tables_remaining",
                                               "Tables the snapshot has not finished", registry=r)
        self.snapshot_rows_estimated = Gauge("binlake_snapshot_rows_estimated",
                                             "Rows of the snapshot's tables (information_schema estimate)", registry=r)
        self.snapshot_tables_done = Counter("binlake_snapshot_tables_done", "Tables the snapshot finished", registry=r)
        self.resnapshot_rows = Counter("binlake_resnapshot_rows", "Rows read by re-snapshots and published", registry=r)
        self.verify_rows = Counter("binlake_verify_rows", "Rows read by verify chunks and published to be compared",
                                   registry=r)
        self.resnapshot_rows_estimated = Gauge("binlake_resnapshot_rows_estimated",
                                               "Rows of the table being re-snapshotted (estimate)", registry=r)
        self.resnapshot_tables_remaining = Gauge("binlake_resnapshot_tables_remaining",
                                                 "Tables the re-snapshots have not finished", registry=r)
        self.resnapshot_tables_done = Counter("binlake_resnapshot_tables_done", "Tables re-snapshotted", registry=r)
        self.source_connected = False
        self.kafka_connected = False
        self.last_progress = time.monotonic()

    def progress(self, events: int, size: int, newest_timestamp: int) -> None:
        """Events and bytes read since the last call (the daemon reports in batches: per-event
        updates would cost more than routing the event)."""
        self.events.inc(events)
        self.bytes.inc(size)
        if newest_timestamp:
            self.lag.set(max(0.0, time.time() - newest_timestamp))
        self.last_progress = time.monotonic()

    def serve(self, port: int, host: str = "127.0.0.1", stale_after: float = 60.0) -> ThreadingHTTPServer:
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._reply(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
                elif self.path == "/healthz":
                    alive = time.monotonic() - metrics.last_progress < stale_after
                    self._reply(200 if alive else 503, b"ok\n" if alive else b"stalled\n")
                elif self.path == "/readyz":
                    ready = metrics.source_connected and metrics.kafka_connected
                    self._reply(200 if ready else 503, b"ready\n" if ready else b"not ready\n")
                else:
                    self._reply(404, b"not found\n")

            def _reply(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # quiet: no access log
                pass

        server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=server.serve_forever, name="binlake-metrics", daemon=True).start()
        return server
