"""The Debezium formats hold no more than a few records of a huge binlog transaction: change events go out as the
records come (with transaction metadata: at each complete record, the records closed together), and the messages
are those of the whole Kafka transaction encoded at its commit, in the same order."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from ingester.codec import BinlogDecoder
from ingester.records.builder import Record, RecordBuilder
from ingester.records.debezium.encoder import DebeziumJson, DebeziumOptions
from ingester.sources.binlog_file import binlog_frames
from tests.harness.binlogs import two_table_binlog

_RECORD_BYTES = 4096


def _stream(path: Any, encoder: DebeziumJson, together: bool) -> tuple[list[Any], list[int], list[Record]]:
    """The binlog through the daemon's record builder into the encoder, one Kafka transaction committed at the
    end: the messages, the encoder's held bytes after each record (and last the messages of the commit), and the
    records."""
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(file=path.name, max_record_bytes=_RECORD_BYTES, together=together)
    messages: list[Any] = []
    held: list[int] = []
    records: list[Record] = []
    for pos, raw in binlog_frames(path, dec):
        for record in builder.feed(dec, raw, pos):
            records.append(record)
            messages += encoder.messages(record)
            held.append(encoder.held_bytes)
    for record in builder.flush():
        records.append(record)
        messages += encoder.messages(record)
    at_commit = list(encoder.before_commit())
    held.append(len(at_commit))  # what came only at the commit: nothing without transaction metadata, else its END
    return messages + at_commit, held, records


def _encoder(transactions: bool) -> DebeziumJson:
    return DebeziumJson(DebeziumOptions("p", transactions=transactions), lambda n: "mysql-bin.000001", _RECORD_BYTES,
                        clock=lambda: 1_700_000_000_000_000_000)


def _at_commit(records: list[Record], transactions: bool) -> list[Any]:
    """The reference: every record held until the commit, then encoded in one go."""
    encoder = _encoder(transactions)
    held = [dataclasses.replace(r, complete=False) for r in records]
    assert not [m for r in held for m in encoder.messages(r)]
    return list(encoder.before_commit())


@pytest.mark.parametrize("transactions", [False, True], ids=["plain", "transaction-metadata"])
def test_a_huge_transaction_is_published_as_it_comes(tmp_path, transactions) -> None:
    events = 400  # 8,000 rows: about 40 records of 4 KiB
    path = two_table_binlog(tmp_path, events)
    messages, held, records = _stream(path, _encoder(transactions), together=transactions)
    assert len(records) > 30
    # held back: nothing without transaction metadata; with it, no more than the open records closed together
    # (one of each table), never the transaction's
    assert max(held) <= (0 if not transactions else 2 * _RECORD_BYTES)
    assert held[-1] == (0 if not transactions else 1)
    changes = [m for m in messages if m.topic in ("p.db.t", "p.db.u")]
    assert len([m for m in changes if m.value is not None]) == events * 20 + 4
    if transactions:  # binlog order across tables, BEGIN and END around each transaction: as encoded at the commit
        assert messages == _at_commit(records, transactions)
        statuses = [orjson.loads(m.value)["payload"]["status"] for m in messages if m.topic == "p.transaction"]
        assert statuses and statuses == ["BEGIN", "END"] * (len(statuses) // 2)
    else:  # a table's events in binlog order (Kafka orders nothing across topics)
        for topic, rows in (("p.db.t", events * 20 + 1), ("p.db.u", 3)):
            ids = [orjson.loads(m.value)["payload"]["after"]["id"] for m in changes if m.topic == topic]
            assert ids == sorted(ids) and len(ids) == rows


def test_without_closing_together_a_small_open_record_holds_back_the_transaction(tmp_path) -> None:
    """Why the builder closes records together for transaction metadata: u's open record (its first event comes
    first) would hold back every record of t until the commit."""
    path = two_table_binlog(tmp_path, 400)
    messages, held, records = _stream(path, _encoder(True), together=False)
    assert max(held) > 25 * _RECORD_BYTES
    assert messages == _at_commit(records, True)
