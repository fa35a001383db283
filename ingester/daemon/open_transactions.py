"""Transactions Kafka left open: settled before the daemon reads its checkpoint.

A broker that cannot find a partition's leader while it completes a transaction (a single broker killed and
restarted at once, fenced by its controller for a few seconds: seen with Kafka 4.3) skips that partition's commit or
abort marker, as it would for a deleted topic, and records the transaction as complete. The partition's records of it
stay open: read_committed readers stop before them, and the next marker of the same producer on that partition decides
them with its own transaction. A daemon that then read its checkpoint would resume before a transaction its
coordinator had committed and publish it twice (its next commit commits both copies); records left open in a table's
topic would stay out of the lake until the table's next change.

``settle`` runs before the daemon's producer starts: it asks the coordinator for the outcome of the source's last
transaction and each partition under the topic prefix for a transaction of that producer still open, and gives those
partitions the outcome their coordinator recorded (an empty transaction of the same transactional id, committed or
aborted, writes the missing markers). One open from an earlier epoch, whose outcome the coordinator no longer holds,
stops with a line naming it."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

log = logging.getLogger("binlake.run")
_COORDINATOR_WAIT = 15.0  # seconds a coordinator that is starting (or a new cluster's) is waited for


class OpenTransaction(NamedTuple):
    """A partition where the producer's transaction has no marker: its first record's offset and the producer epoch."""

    topic: str
    partition: int
    start_offset: int
    epoch: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] from offset {self.start_offset}"


class UnknownOutcome(Exception):
    """A transaction left open whose outcome its coordinator no longer holds."""


class Outcome(NamedTuple):
    """What the coordinator holds of the transactional id's last transaction."""

    producer_id: int
    epoch: int
    state: str  # kafka-python's TransactionState value, e.g. "CompleteCommit"

    @property
    def under_way(self) -> bool:
        return self.state in ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def outcome(admin: Any, transactional_id: str) -> Outcome | None:
    """The coordinator's record of ``transactional_id`` (None: it has none, a new source)."""
    from kafka.errors import (
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        NotCoordinatorError,
        TransactionalIdNotFoundError,
    )

    deadline = time.monotonic() + _COORDINATOR_WAIT
    while True:
        try:
            described = admin.describe_transactions([transactional_id])[transactional_id]
            break
        except TransactionalIdNotFoundError:
            return None
        except (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError):
            if time.monotonic() > deadline:  # (a new cluster makes its transaction log on the first request)
                raise
            time.sleep(0.2)
    return Outcome(described.producer_id, described.producer_epoch, str(described.state.value))


def open_transactions(admin: Any, producer_id: int, prefix: str) -> list[OpenTransaction]:
    """The partitions of the topics under ``prefix`` where ``producer_id`` has a transaction open."""
    from kafka import TopicPartition

    topics = [t for t in admin.list_topics() if t.startswith(prefix + ".")]
    partitions = [TopicPartition(t["name"], p["partition_index"]) for t in admin.describe_topics(topics)
                  for p in t["partitions"]]
    found = []
    for tp, state in sorted(admin.describe_producers(partitions).items()):
        found += [OpenTransaction(tp.topic, tp.partition, p.current_transaction_start_offset, p.producer_epoch)
                  for p in state.active_producers
                  if p.producer_id == producer_id and p.current_transaction_start_offset >= 0]
    return found


def settle(bootstrap: str, prefix: str, transactional_id: str, options: Mapping[str, Any]) -> list[OpenTransaction]:
    """Give the transactions of ``transactional_id`` left open under ``prefix`` the outcome their coordinator recorded
    (returned: those settled). Raises UnknownOutcome for one whose outcome it no longer holds. The transaction under
    way, if any, is left to the producer's start (which completes or aborts it)."""
    from kafka import KafkaAdminClient
    from kafka.errors import AuthorizationError, IncompatibleBrokerVersion, UnsupportedVersionError

    admin = KafkaAdminClient(**options, bootstrap_servers=bootstrap)
    try:
        last = outcome(admin, transactional_id)
        found = [] if last is None else open_transactions(admin, last.producer_id, prefix)
    except (AuthorizationError, IncompatibleBrokerVersion, UnsupportedVersionError) as exc:
        # (the user may not describe transactions or producers, or the broker predates Kafka 2.8): as before
        log.warning("kafka %s: cannot look for transactions left open (%s: %s); resuming from the last committed "
                    "checkpoint", bootstrap, type(exc).__name__, exc)
        return []
    finally:
        admin.close()
    if last is None or not found:
        return []
    if last.under_way:
        found = [o for o in found if o.epoch != last.epoch]  # the transaction under way's own partitions
    unknown = [o for o in found if o.epoch != last.epoch or last.state not in ("CompleteCommit", "CompleteAbort")]
    if unknown:
        raise UnknownOutcome(f"a transaction of {transactional_id} is open in {unknown[0]} (producer "
                         f"{last.producer_id}, epoch {unknown[0].epoch}) and its coordinator no longer holds its "
                         f"outcome; end it with kafka-transactions.sh abort once its records are known to be in a "
                         f"later transaction")
    if not found:
        return []
    commit = last.state == "CompleteCommit"
    if commit:
        _commit(bootstrap, transactional_id, found, options)
    else:
        _abort(bootstrap, last.producer_id, found, options)
    log.warning("kafka %s: %s of the last transaction of %s had no %s marker (the broker skipped them, e.g. while it "
                "restarted): %s now, as its coordinator recorded", bootstrap, ", ".join(map(str, found)),
                transactional_id, "commit" if commit else "abort", "committed" if commit else "aborted")
    return found


def _commit(bootstrap: str, transactional_id: str, found: list[OpenTransaction], options: Mapping[str, Any]) -> None:
    """Commit markers on ``found``: a transaction of the same id joined by those partitions, with no record of its own
    (the producer's next epoch; its marker ends the open records of the earlier one)."""
    from kafka import KafkaProducer, TopicPartition

    producer = KafkaProducer(**options, bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             enable_idempotence=True, max_block_ms=15_000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for o in found:  # kafka-python adds them before its EndTxn (an abort would drop them unadded)
            producer._transaction_manager.maybe_add_partition_to_transaction(TopicPartition(o.topic, o.partition))
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)


def _abort(bootstrap: str, producer_id: int, found: list[OpenTransaction], options: Mapping[str, Any]) -> None:
    """Abort markers on ``found``, written by their leaders (Kafka's admin API for transactions left open, KIP-664)."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin._transactions import AbortTransactionSpec

    admin = KafkaAdminClient(**options, bootstrap_servers=bootstrap)
    try:
        for o in found:
            admin.abort_transaction(AbortTransactionSpec(TopicPartition(o.topic, o.partition), producer_id, o.epoch))
    finally:
        admin.close()
