"""Records: every row and statement of real binlogs survives encode -> decode with the codec alone."""

from __future__ import annotations

import orjson
import pytest

from ingester.codec import BinlogDecoder
from ingester.codec import events as E
from ingester.dump.jsonl import event_json
from ingester.records.builder import SCHEMA_TOPIC, Checkpoint, Record, RecordBuilder
from ingester.records.format import Sequence, decode_record, decode_value
from ingester.sources.binlog_file import binlog_frames
from tests.corpus import CORPUS

FILES = [
    "osheroff-mysql-binlog-connector-java/mysql-bin.compressed",
    "rust-mysql-common/transaction_compression.000001",
    "rust-mysql-common/binlog_transaction_with_GTID_TAG.000001",
    "rust-mysql-common/mariadb-bin.000001",
    "mariadb-operator-mariadb-poc/domain_id_0/mariadb-repl-bin.000005",
    "zendesk-maxwell/binlog.000004",
    "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32",
    "rust-mysql-common/json.binlog.000001",
    "apecloud-mysql-binlog-connector-rust/mysql-bin.000057",
]


def _build(path):
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(file=path.name if path.suffix[1:].isdigit() else "binlog.000001")
    out: list[Record | Checkpoint] = []
    expected: dict[tuple[int, int], dict] = {}
    for pos, raw in binlog_frames(path, dec):
        ev = dec.decode(raw, pos)
        expected[(pos, 0)] = orjson.loads(event_json(ev))
        if isinstance(ev, E.TransactionPayloadEvent):
            for sub, inner in enumerate(dec.payload_events(ev), start=1):
                expected[(pos, sub)] = orjson.loads(event_json(inner))
        out.extend(builder.feed(dec, raw, ev))
    return builder, out, expected


@pytest.mark.parametrize("name", FILES)
def test_records_decode_to_the_same_events(name) -> None:
    path = CORPUS / name
    _, out, expected = _build(path)
    records = [r for r in out if isinstance(r, Record)]
    assert records
    rows_events = [e for e in expected.values() if e["type"] in ("write_rows", "update_rows", "delete_rows")]
    assert len([r for r in records if r.topic != SCHEMA_TOPIC]) == len(rows_events)
    for record in records:
        seq = Sequence.decode(dict(record.headers)["binlake.seq"])
        (event,) = decode_record(record.value, "record", seq.position)
        got = orjson.loads(event_json(event))
        assert got == expected[(seq.position, seq.sub)]
        headers = dict(record.headers)
        if got["type"] in ("write_rows", "update_rows", "delete_rows"):
            assert record.topic == f"{got['database']}.{got['table']}"
            assert headers["binlake.table"].decode() == got["table"]
            assert decode_value(record.value).table_map is not None
        else:
            assert record.topic == SCHEMA_TOPIC and got["type"] == "query"
    seqs = [r.seq for r in records]
    assert seqs == sorted(seqs)


def test_checkpoints_are_transaction_boundaries_and_gtids_grow() -> None:
    path = CORPUS / "zendesk-maxwell" / "binlog.000004"
    builder, out, expected = _build(path)
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
