"""Records: every row and statement of real binlogs survives encode -> decode with the codec alone."""

from __future__ import annotations

import orjson
import pytest

from ingester.codec.errors import BinlogError
from ingester.dump.jsonl import event_json
from ingester.records.builder import SCHEMA_TOPIC, Checkpoint, Record
from ingester.records.format import ChunkAssembler, read_index, record_events
from ingester.records.statement import TableStatementEvent, is_statement_record
from tests.corpus import CORPUS
from tests.harness.records import CORPUS_FILES as FILES
from tests.harness.records import build_records


@pytest.mark.parametrize("max_record_bytes", [900_000, 1])
@pytest.mark.parametrize("name", FILES)
def test_records_decode_to_the_same_events(name, max_record_bytes) -> None:
    """Every rows event and statement comes back exactly once, decoded by the codec alone, whether
    records hold many events or one."""
    path = CORPUS / name
    _, out, expected = build_records(path, max_record_bytes)
    records = [r for r in out if isinstance(r, Record)]
    assert records
    rows_events = [e for e in expected.values() if e["type"] in ("write_rows", "update_rows", "delete_rows")]
    seen, statements = [], []
    for record in records:
        headers = dict(record.headers)
        items = list(record_events(headers, record.value, "record"))
        assert [i.seq for i in items] == [e.seq for e in read_index(headers["binlake.index"])]
        assert int(headers["binlake.count"]) == len(items) and headers["binlake.seq"] == items[0].seq.encode()
        if max_record_bytes == 1:
            assert len(items) == 1
        for item in items:
            got = orjson.loads(event_json(item.event))
            if isinstance(item.event, TableStatementEvent):  # what a statement did to a table, in its topic
                statement = expected[(item.seq.position, item.seq.sub)]
                assert statement["type"] == "query" and statement["query"] == got["statement"]
                assert record.topic == f"{got['database']}.{got['table']}"
                statements.append(item.seq)
                continue
            assert got == expected[(item.seq.position, item.seq.sub)]
            if got["type"] in ("write_rows", "update_rows", "delete_rows"):
                assert record.topic == f"{got['database']}.{got['table']}"
                assert headers["binlake.table"].decode() == got["table"]
            else:
                assert record.topic == SCHEMA_TOPIC and got["type"] == "query"
            seen.append(item.seq)
    assert len(seen) == len(set(seen))
    assert set(statements) <= set(seen)  # at their statements' sequences
    assert len([s for s, r in zip(seen, _topics(records), strict=True) if r != SCHEMA_TOPIC]) == len(rows_events)
    per_topic: dict[str, list] = {}
    for record in records:
        per_topic.setdefault(record.topic, []).append(record.seq)
    assert all(seqs == sorted(seqs) for seqs in per_topic.values())


def _topics(records):
    for record in records:
        if is_statement_record(record.value):
            continue
        yield from [record.topic] * int(dict(record.headers)["binlake.count"])


def test_damaged_records_fail_with_the_offset() -> None:
    _, out, _ = build_records(CORPUS / "zendesk-maxwell" / "binlog.000004")
    record = next(r for r in out if isinstance(r, Record) and r.topic != SCHEMA_TOPIC
                  and not is_statement_record(r.value))
    headers = dict(record.headers)
    with pytest.raises(BinlogError, match=r"^rec at byte \d+: record's event of \d+ bytes runs past its end"):
        list(record_events(headers, record.value[:-3], "rec"))
    with pytest.raises(BinlogError, match="record format version 9"):
        list(record_events(headers, record.value[:3] + b"\x09" + record.value[4:], "rec"))
    with pytest.raises(BinlogError, match="CRC32 mismatch"):
        list(record_events(headers, record.value[:-1] + bytes([record.value[-1] ^ 1]), "rec"))


def test_chunks_reassemble_in_order_and_refuse_gaps() -> None:
    chunks = ChunkAssembler()
    assert chunks.feed("p", {"binlake.chunk": b"0/3"}, b"ab") is None
    assert chunks.feed("q", {}, b"other partition") == b"other partition"
    assert chunks.feed("p", {"binlake.chunk": b"1/3"}, b"cd") is None
    assert chunks.feed("p", {"binlake.chunk": b"2/3"}, b"e") == b"abcde"
    assert not chunks.pending
    chunks.feed("p", {"binlake.chunk": b"0/2"}, b"x")
    with pytest.raises(BinlogError, match="chunk 0/2 follows 1 chunks"):
        chunks.feed("p", {"binlake.chunk": b"0/2"}, b"x", "t[0]", 7)


def test_checkpoints_are_transaction_boundaries_and_gtids_grow() -> None:
    path = CORPUS / "zendesk-maxwell" / "binlog.000004"
    builder, out, expected = build_records(path)
    starts = {pos for (pos, sub), e in expected.items() if sub == 0}
    end = max(e["log_pos"] for e in expected.values())
    checkpoints = [c for c in out if isinstance(c, Checkpoint)]
    gtid_starts = {pos for (pos, _), e in expected.items() if e["type"] == "gtid"}
    for c in checkpoints:
        assert c.position in starts or c.position == end
        inside = [p for p in gtid_starts if p < c.position]
        # never between a GTID event and its transaction's end
        assert not any(p < c.position < q for p in inside for q in [_txn_end(expected, p)])
    assert builder.gtid_set.count(":") >= 1
    gtids = [e for e in expected.values() if e["type"] == "gtid"]
    last = gtids[-1]
    assert f"{last['uuid']}:" in builder.gtid_set


def _txn_end(expected, gtid_pos):
    events = sorted((pos, e) for (pos, sub), e in expected.items() if sub == 0 and pos > gtid_pos)
    for _pos, e in events:
        if e["type"] == "xid" or (e["type"] == "query" and e["query"] not in ("BEGIN",)):
            return e["log_pos"]
    return float("inf")


@pytest.mark.parametrize("name", [f for f in FILES if "mariadb" not in f])
def test_every_gtid_transaction_ends_in_the_executed_set(name) -> None:
    """DDL after a MySQL GTID has no BEGIN/COMMIT: it is a whole transaction, and its GTID is executed."""
    from ingester.records.gtid import MysqlGtidSet

    builder, _, expected = build_records(CORPUS / name)
    gtids = MysqlGtidSet()
    for event in expected.values():
        if event["type"] in ("gtid", "gtid_tagged") and event.get("gno"):
            gtids.add(f"{event['uuid']}:{event['tag']}" if event.get("tag") else event["uuid"], event["gno"])
    assert not builder.in_transaction
    assert str(MysqlGtidSet.parse(builder.gtid_set)) == str(gtids)


@pytest.mark.parametrize(("statement", "withheld"), [
    (b"CREATE USER 'a'@'%' IDENTIFIED BY 'pw'", True),
    (b"/* comment */ GRANT ALL ON *.* TO a IDENTIFIED BY 'pw'", True),
    (b"alter user a identified by 'pw'", True),
    (b"SET PASSWORD FOR a = PASSWORD('pw')", True),
    (b"CREATE OR REPLACE USER a", True),
    (b"CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (PASSWORD 'pw')", True),
    (b"REVOKE SELECT ON d.t FROM a", True),
    (b"CREATE TABLE users (id INT)", False),
    (b"ALTER TABLE grants ADD COLUMN password VARCHAR(10)", False),
    (b"DROP TABLE user", False),
])
def test_account_statements_are_withheld_from_the_schema_topic(statement, withheld) -> None:
    """MariaDB binlogs account statements with their passwords in plain text: they are not published."""
    from ingester.records.builder import _CREDENTIALS

    assert bool(_CREDENTIALS.match(statement)) is withheld
