"""What the snapshot may use of the running daemon (runner.Runner implements it): its configuration,
metrics and counters, whether a stop was asked for, where the last commit got to, and the one way to
publish a record. The snapshot depends on this interface, not on the runner, so runner -> snapshot is the
only direction between them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import Config
    from ..records.builder import Record
    from ..records.outbound import BinlogNames
    from .kafka_io import Publisher
    from .metrics import Metrics


class Daemon(Protocol):
    cfg: Config
    metrics: Metrics
    stats: dict[str, int]
    stop_requested: bool
    schema_history: bool
    committed: dict[str, Any] | None  # the last checkpoint Kafka has committed (set on the publisher's thread)
    binlog_names: BinlogNames  # file names by sequence file number, for formats that name them

    def send(self, publisher: Publisher, record: Record) -> None:
        """Publish a record in the open Kafka transaction (signal-table records are taken, not published)."""
