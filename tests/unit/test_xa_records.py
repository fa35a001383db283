"""XA transactions in the record builder (ingester/records/xa.py) over binlogs written by hand as MySQL 8.0 and
MariaDB 10.11 write them (tests/harness/xa_binlogs.py): a prepared transaction's rows are published only at its
XA COMMIT, re-sequenced there, never after its XA ROLLBACK, whatever comes between and across a restart from a
checkpoint; one phase is a plain commit; an outcome of an xid never seen prepared is said."""

from __future__ import annotations

import json
import logging

import pytest

from ingester.records.builder import Checkpoint, Record, RecordBuilder
from ingester.records.format import Sequence, read_index
from ingester.records.xa import (
    PREPARED_TOPIC,
    Prepared,
    XaTransactions,
    from_prepared_topic,
    resequenced,
    statement_xid,
    xid_text,
)
from tests.harness.xa_binlogs import Fed, XaBinlog, feed

SERVERS = pytest.mark.parametrize("maria", [False, True], ids=["mysql", "mariadb"])


def _ids(fed: Fed, topic: str = "db.t") -> list[int]:
    return [row[0] for row in fed.rows(topic)]


def _persisting(store: list[Record]):
    """A daemon's commit (runner.commit_pending): the prepared transactions not yet in _prepared go there (into
    ``store``), offsets counted from 0, and the checkpoint lists the pending ones."""

    def commit(builder: RecordBuilder, checkpoint: Checkpoint) -> list[Record]:
        sent = []
        for prepared, records in builder.xa.persist():
            prepared.offset = len(store)
            store.extend(records)
            sent += records
        checkpoint.prepared = builder.xa.checkpoint()
        return sent

    return commit


def _reader(store: list[Record]):
    """Reads prepared transactions' records back from ``store`` as the daemon reads _prepared."""

    def load(wanted: list[Prepared]) -> dict[str, list[Record]]:
        found: dict[str, list[Record]] = {}
        keys = {(p.xid, str(p.seq)) for p in wanted}
        for record in store[min(p.offset or 0 for p in wanted):]:
            xid, prepare, original = from_prepared_topic(record.headers, record.value)
            if (xid, prepare) in keys:
                found.setdefault(xid, []).append(original)
        return found

    return load


@SERVERS
def test_a_prepared_transaction_is_published_at_its_commit_resequenced_there(maria) -> None:
    binlog = (XaBinlog(maria).plain({b"t": [1]}).prepare("x1", {b"t": [2], b"u": [3]}).plain({b"t": [4]})
              .outcome("x1").plain({b"t": [5]}))
    fed = feed(binlog)
    assert _ids(fed) == [1, 4, 2, 5] and _ids(fed, "db.u") == [3]
    commit = binlog.at("commit x1")
    rows = {row[0]: row for topic in ("db.t", "db.u") for row in fed.rows(topic)}
    # the k-th event of the transaction (binlog order, across its tables) at the commit's position, sub-index k
    assert rows[2][1] == (0, commit, 1) and rows[3][1] == (0, commit, 2)
    gtid = "0-7-4" if maria else "3e11fa47-71ca-11e1-9e33-c80aa9429562:4"  # the XA COMMIT's transaction
    assert rows[2][2] == rows[3][2] == gtid
    if not maria:  # MySQL's original commit time of the XA COMMIT's GTID
        assert rows[2][3] == rows[3][3] == 1_700_000_000_000_004
    sequences = [row[1] for row in fed.rows()]
    assert sequences == sorted(sequences)  # a topic's events in sequence order
    for r in fed.records():  # the headers say the same
        index = read_index(dict(r.headers)["binlake.index"])
        assert dict(r.headers)["binlake.seq"] == index[0].seq.encode() == r.seq.encode()
        assert dict(r.headers)["binlake.commit_ts"] == str(index[-1].commit_ts).encode()
    # checkpoints after the prepare are past it, and name it until its commit
    checkpoints = [c for c in fed.out if isinstance(c, Checkpoint)]
    assert [c.position for c in checkpoints] == sorted(c.position for c in checkpoints)
    assert fed.builder.xa.pending == {} and fed.builder.xa.capture is None


@SERVERS
def test_a_rolled_back_transaction_is_never_published(maria) -> None:
    binlog = XaBinlog(maria).prepare("x2", {b"t": [3]}).plain({b"t": [4]}).outcome("x2", commit=False)
    fed = feed(binlog)
    assert _ids(fed) == [4]
    assert fed.builder.xa.pending == {}


@SERVERS
def test_one_phase_is_a_plain_commit(maria) -> None:
    binlog = XaBinlog(maria).plain({b"t": [1]}).prepare("x3,b3,7", {b"t": [4]}, one_phase=True).plain({b"t": [5]})
    fed = feed(binlog)
    plain = feed(XaBinlog(maria).plain({b"t": [1]}).plain({b"t": [4]}).plain({b"t": [5]}))
    assert _ids(fed) == [1, 4, 5]
    if maria:  # MariaDB logs it as an ordinary transaction
        assert fed.rows() == plain.rows()
    else:  # as it streamed: its own sequence and GTID
        assert fed.rows()[1][2] == "3e11fa47-71ca-11e1-9e33-c80aa9429562:2"
        assert fed.rows()[1][1][2] == 0
    assert fed.builder.xa.pending == {}


@SERVERS
def test_interleaved_prepares_and_outcomes(maria) -> None:
    binlog = (XaBinlog(maria).prepare("a", {b"t": [10, 11]}).prepare("b", {b"t": [20], b"u": [21]})
              .plain({b"t": [1]}).outcome("b").plain({b"u": [2]}).prepare("c", {b"t": [30]})
              .outcome("a", commit=False).outcome("c").prepare("a", {b"t": [40]}).outcome("a").plain({b"t": [3]}))
    fed = feed(binlog, commit=_persisting([]))
    assert _ids(fed) == [1, 20, 30, 40, 3] and _ids(fed, "db.u") == [21, 2]
    # an xid used again after its rollback is another transaction
    assert fed.rows()[3][1][1] == binlog.raw()[binlog.positions["commit a"] + 1][1]
    pending = [sorted(c.prepared or {}) for c in fed.out if isinstance(c, Checkpoint)]
    names = {xid_text(1, n.encode(), b""): n for n in "abc"}
    assert [[names[x] for x in p] for p in pending] == [  # after the format description, then each transaction
        [], ["a"], ["a", "b"], ["a", "b"], ["a"], ["a"], ["a", "c"], ["c"], [], ["a"], [], []]


@SERVERS
def test_a_restart_resumes_the_pending_transactions_from_the_checkpoint(maria) -> None:
    """The daemon stops after the prepares (its last checkpoint lists them, their records in _prepared); a new
    builder resumed from that checkpoint (JSON, as Kafka holds it) reads them back when their outcomes come, and
    publishes what an uninterrupted run publishes."""
    binlog = (XaBinlog(maria).prepare("a", {b"t": [10, 11], b"u": [12]}).prepare("b", {b"t": [20]})
              .plain({b"t": [1]}).outcome("b", commit=False).outcome("a").plain({b"t": [2]}))
    whole = feed(binlog)
    store: list[Record] = []
    stop = binlog.index("prepare b") + 1
    first = feed(binlog, last=stop, commit=_persisting(store))
    assert _ids(first) == [] and {r.topic for r in store} == {PREPARED_TOPIC}
    committed = json.loads(json.dumps(first.out[-1].prepared))  # type: ignore[union-attr]
    assert sorted(committed) == [xid_text(1, b"a", b""), xid_text(1, b"b", b"")]
    assert committed[xid_text(1, b"a", b"")]["records"] == 2 and committed[xid_text(1, b"a", b"")]["offset"] == 0

    builder = RecordBuilder(file="binlog.000001")
    builder.xa.resume(committed)
    loads = []
    builder.xa.load = lambda wanted: loads.append([p.xid for p in wanted]) or _reader(store)(wanted)
    second = feed(binlog, builder, first=stop)
    assert loads == [[xid_text(1, b"a", b"")]]  # once, at its commit; b's rollback needs nothing read
    assert second.rows() == whole.rows() and second.rows("db.u") == whole.rows("db.u")
    for mine, theirs in zip(second.records(), whole.records(), strict=True):
        assert (mine.topic, mine.value, mine.headers, mine.seq) == (theirs.topic, theirs.value, theirs.headers,
                                                                   theirs.seq)


@SERVERS
def test_records_beyond_the_memory_budget_are_read_back(maria) -> None:
    binlog = (XaBinlog(maria).prepare("a", {b"t": [1]}).plain({b"t": [2]}).prepare("b", {b"t": [3]})
              .plain({b"t": [4]}).outcome("a").outcome("b"))
    store: list[Record] = []
    builder = RecordBuilder(file="binlog.000001")
    builder.xa.memory_bytes = 0  # only what is not in _prepared yet stays in memory
    loads = []
    builder.xa.load = lambda wanted: loads.append(sorted(p.xid for p in wanted)) or _reader(store)(wanted)
    fed = feed(binlog, builder, commit=_persisting(store))
    assert _ids(fed) == [2, 4, 1, 3] and _ids(fed) == _ids(feed(binlog))
    # both in one read; b again at its commit, the budget having dropped it at the commit between
    assert loads == [[xid_text(1, b"a", b""), xid_text(1, b"b", b"")], [xid_text(1, b"b", b"")]]


@SERVERS
def test_an_outcome_of_an_xid_never_seen_prepared_is_said(maria, caplog) -> None:
    binlog = XaBinlog(maria).prepare("old", {b"t": [1]}).outcome("old").outcome("gone", commit=False)
    start = binlog.index("prepare old") + 1  # the daemon started after the prepare (e.g. a snapshot's point)
    with caplog.at_level(logging.INFO, logger="binlake.xa"):
        fed = feed(binlog, first=start)
    assert _ids(fed) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert xid_text(1, b"old", b"") in warnings[0] and f"binlog.000001:{binlog.at('commit old')}" in warnings[0]
    assert "binlake snapshot --tables" in warnings[0]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(xid_text(1, b"gone", b"") in m and "nothing" in m for m in infos)


@SERVERS
def test_the_native_router_leaves_an_xa_body_to_python(maria) -> None:
    """While a body streams, ``route`` declines (its events must reach the capture, not the open records)."""
    binlog = XaBinlog(maria).prepare("x", {b"t": [1]})
    builder = RecordBuilder(file="binlog.000001")
    events = binlog.raw()
    body = 2 if maria else 3  # after the GTID (MariaDB's names the xid) / after XA START
    feed(binlog, builder, last=body)
    assert builder.xa.capture is not None
    from ingester.codec import BinlogDecoder

    dec = BinlogDecoder("x")
    dec.decode(events[0][0], 4)
    assert builder.route(dec, b"\x00" * 64, 0, 1, False) is None


def test_xids_of_statements_and_events_are_the_same_keys() -> None:
    assert statement_xid(b"XA START X'7831',X'',1") == ("START", "X'7831',X'',1", False)
    assert statement_xid(b"xa commit 'x1'") == ("COMMIT", "X'7831',X'',1", False)
    assert statement_xid(b"XA COMMIT 'x3','b3',7 ONE PHASE") == ("COMMIT", xid_text(7, b"x3", b"b3"), True)
    assert statement_xid(b"XA ROLLBACK X'0102',X'FF',1") == ("ROLLBACK", xid_text(1, b"\x01\x02", b"\xff"), False)
    assert statement_xid(b"XA BEGIN 0x0102, 'it''s', 0x10") == ("START", xid_text(16, b"\x01\x02", b"it's"), False)
    assert statement_xid(b"XA END 'a\\\\b'") == ("END", xid_text(1, b"a\\b", b""), False)
    assert statement_xid(b"COMMIT") is None and statement_xid(b"XA RECOVER") is None


def test_resequencing_orders_the_events_of_every_table_as_the_binlog_did() -> None:
    binlog = XaBinlog().prepare("x", {b"t": [1], b"u": [2]})
    fed = feed(binlog)
    records = fed.builder.xa.pending[xid_text(1, b"x", b"")].records
    assert records is not None
    at = Sequence(9, 500, 3)
    out = resequenced(list(reversed(records)), at, b"g:1", 77)  # the records' order does not matter
    by_topic = {r.topic: read_index(dict(r.headers)["binlake.index"]) for r in out}
    assert [e.seq for e in by_topic["db.t"]] == [Sequence(9, 500, 4)]
    assert [e.seq for e in by_topic["db.u"]] == [Sequence(9, 500, 5)]
    assert {(e.gtid, e.commit_ts) for entries in by_topic.values() for e in entries} == {("g:1", 77)}
    assert [r.value for r in out] == [r.value for r in reversed(records)]  # the server's bytes stay


def test_checkpoint_entries_round_trip() -> None:
    prepared = Prepared("X'61',X'',1", Sequence(3, 700, 0), "0-1-5", 123, None, 2, 900, ["d.a", "d.b"], True, 41)
    again = Prepared.from_json(prepared.xid, json.loads(json.dumps(prepared.to_json())))
    assert again == prepared
    xa = XaTransactions(RecordBuilder().xa.records)
    xa.resume({prepared.xid: prepared.to_json()})
    assert xa.checkpoint() == {prepared.xid: prepared.to_json()}
    xa.resume(None)
    assert xa.checkpoint() is None


@SERVERS
def test_the_debezium_formats_publish_released_rows_at_the_commit(maria) -> None:
    """debezium-json and debezium-avro render what the builder releases: a committed XA transaction's rows at its XA
    COMMIT (source.pos, its GTID as source.gtid and transaction id, END counting them), a rolled-back one's not at
    all; Avro's events read back as the JSON ones."""
    from ingester.records.debezium.encoder import DebeziumAvro, DebeziumJson, DebeziumOptions
    from ingester.records.outbound import BinlogNames
    from tests.harness.avro import Registry, same

    binlog = (XaBinlog(maria).prepare("a", {b"t": [1], b"u": [2]}).prepare("b", {b"t": [3]}).plain({b"t": [4]})
              .outcome("b", commit=False).outcome("a"))
    fed = feed(binlog, RecordBuilder(file="binlog.000001", together=True))  # transaction metadata: across tables
    names = BinlogNames()
    names.saw(0, "binlog.000001")
    options = DebeziumOptions("p", transactions=True)
    registry = Registry()
    out = {}
    for layout, encoder in (("json", DebeziumJson(options, names, 900_000, clock=lambda: 0)),
                            ("avro", DebeziumAvro(options, registry, names, 900_000, clock=lambda: 0))):
        messages = [m for r in fed.records() for m in encoder.messages(r)] + list(encoder.before_commit())
        decode = (lambda v: json.loads(v)["payload"]) if layout == "json" else registry.decode
        out[layout] = [(m.topic, decode(m.value)) for m in messages if m.value is not None]
    gtid = "0-7-5" if maria else "3e11fa47-71ca-11e1-9e33-c80aa9429562:5"  # the XA COMMIT's transaction
    rows = [(topic, e["after"]["id"], e["source"]["gtid"], e["source"]["pos"], e["transaction"]["id"])
            for topic, e in out["json"] if topic.startswith("p.db.")]
    assert rows == [("p.db.t", 4, rows[0][2], rows[0][3], rows[0][2]),
                    ("p.db.t", 1, gtid, binlog.at("commit a"), gtid), ("p.db.u", 2, gtid, binlog.at("commit a"), gtid)]
    ends = [e for topic, e in out["json"] if topic == "p.transaction" and e["status"] == "END"]
    assert [(e["id"], e["event_count"]) for e in ends] == [(rows[0][2], 1), (gtid, 2)]
    assert len(out["avro"]) == len(out["json"])
    for (topic, avro), (_, connect) in zip(out["avro"], out["json"], strict=True):
        assert same(avro, connect), topic


def test_prepared_records_are_no_tables_records() -> None:
    """`binlake land` (either source format) and `binlake consume` leave <prefix>._prepared out."""
    import re

    from streaming_job.source.source_formats import topic_pattern

    for name in ("binlake", "debezium-json"):
        pattern = re.compile(topic_pattern("p", name))
        assert pattern.fullmatch("p.db.t") and not pattern.fullmatch(f"p.{PREPARED_TOPIC}"), name


def test_after_a_failover_the_outcome_on_the_new_server_releases_by_xid() -> None:
    """Failover across source.hosts: the new server's binlog (its own positions, sequences shifted by the file offset)
    resolves the checkpoint's prepared transactions by their xids."""
    old = XaBinlog(True).prepare("a", {b"t": [1]}).prepare("b", {b"u": [2]})
    store: list[Record] = []
    first = feed(old, commit=_persisting(store))
    committed = json.loads(json.dumps(first.out[-1].prepared))  # type: ignore[union-attr]
    new = XaBinlog(True).plain({b"t": [7]}).outcome("b").outcome("a", commit=False)  # another file, positions
    builder = RecordBuilder(file="binlog.000001", file_offset=100)
    builder._records.file_number = 100  # (what the stream's first ROTATE sets: file number + offset)
    builder.xa.resume(committed)
    builder.xa.load = _reader(store)
    second = feed(new, builder)
    assert _ids(second) == [7]
    assert second.rows("db.u") == [(2, (100, new.at("commit b"), 1), "0-7-2", 1_700_000_000_000_000)]
    assert builder.xa.pending == {}
