"""Table statement records made by hand (records/statement.py) for tests of the land side's statements that need
a statement the daemon does not publish by itself (a damaged or unknown one, a statement of a table the daemon
never mapped). Statements the daemon publishes are tested through the daemon."""

from __future__ import annotations

from kafka import KafkaProducer

from ingester.records.format import Sequence
from ingester.records.statement import TableStatement, index_entry, statement_value


def publish_statement(bootstrap: str, prefix: str, statement: TableStatement, seq: Sequence,
                      commit_ts: int = 1_700_000_000_000_000) -> None:
    """One table statement entry as a record of its own on its table's topic (not transactional)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        db, table = statement.database, statement.table
        producer.send(f"{prefix}.{db}.{table}", statement_value([statement]), key=f"{db}.{table}".encode(),
                      headers=[("binlake.v", b"2"), ("binlake.seq", seq.encode()), ("binlake.count", b"1"),
                               ("binlake.db", db.encode()), ("binlake.table", table.encode()),
                               ("binlake.commit_ts", str(commit_ts).encode()),
                               ("binlake.index", index_entry(seq.encode(), commit_ts))]).get(timeout=30)
    finally:
        producer.close()
