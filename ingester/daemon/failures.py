"""What a failure of the daemon's loop means: fatal (a purged binlog, bad credentials, missing privileges: no retry
helps), or retried from the last checkpoint (the source's broken connections, the Kafka client's or broker's errors,
with back-pressure)."""

from __future__ import annotations

from ..sources.replication import ReplicationError


class BinlogGone(ReplicationError):
    """The binlog to resume from is not on the server (purged): no retry helps, a snapshot does."""

    fatal = True


# Kafka retries wait at most this long: an attempt costs one connection, and a longer wait would add to the
# lag once the broker is back (the source is not read meanwhile: back-pressure)
KAFKA_RETRY_MAX = 5.0


def kafka_failure(exc: Exception) -> bool:
    """Errors of the Kafka client or broker: retried with back-pressure, never fatal on their own."""
    from kafka.errors import KafkaError as ClientError

    from .kafka_io import KafkaError
    from .producers import ProducerError

    return isinstance(exc, (ClientError, KafkaError, ProducerError, TimeoutError, ConnectionError))


def fatal(exc: ReplicationError) -> bool:
    """Errors a reconnect cannot fix: purged binlogs, bad credentials, missing privileges (SELECT too)."""
    if getattr(exc, "fatal", False):  # e.g. a table the snapshot cannot read
        return True
    return exc.code in _FATAL_CODES


BINLOG_GONE = 1236  # the server's error: the requested binlog position is not on it
_FATAL_CODES = frozenset((BINLOG_GONE, 1045, 1044, 1227, 1698, 1047, 1142, 1143))
