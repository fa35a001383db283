"""GTID set arithmetic, checked against sets the servers wrote themselves."""

from __future__ import annotations

from ingester.codec import events as E
from ingester.records.gtid import MariadbGtidState, MysqlGtidSet
from ingester.sources.binlog_file import read_binlog_file
from tests.corpus import CORPUS


def test_parse_and_print_round_trip() -> None:
    text = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7:9-10,55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:1-2"
    assert str(MysqlGtidSet.parse(text)) == text
    assert str(MysqlGtidSet.parse("a-b:1-3:4-6")) == "a-b:1-6"


def test_adding_gtids_merges_intervals() -> None:
    s = MysqlGtidSet()
    for gno in (1, 2, 3, 5, 4, 10, 9, 3):
        s.add("u", gno)
    assert str(s) == "u:1-5:9-10"


def test_previous_gtids_plus_file_gtids_continue_the_servers_set() -> None:
    """A server's PREVIOUS_GTIDS plus the GTIDs in its file give the next file's PREVIOUS_GTIDS:
    here, the tagged 9.6 file's own set, extended by its one tagged transaction."""
    events = list(read_binlog_file(CORPUS / "rust-mysql-common" / "binlog_transaction_with_GTID_TAG.000001"))
    prev = next(e for e in events if isinstance(e, E.PreviousGtidsEvent))
    s = MysqlGtidSet.parse(prev.gtid_set)
    for e in events:
        if isinstance(e, E.GtidEvent) and not isinstance(e, E.AnonymousGtidEvent):
            s.add(f"{e.uuid}:{e.tag}" if e.tag else e.uuid, e.gno)
    assert str(s) == "55778904-0299-11f1-b1b8-4ef0c4956feb:1-13,55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:1-3"


def test_mariadb_state() -> None:
    s = MariadbGtidState.parse("0-1-100,1-2-5")
    s.add(0, 1, 101)
    assert str(s) == "0-1-101,1-2-5"


def _previous_gtids_body(name: str) -> tuple[str, bytes]:
    from ingester.codec import BinlogDecoder
    from ingester.sources.binlog_file import binlog_frames

    path = CORPUS / "rust-mysql-common" / name
    dec = BinlogDecoder(str(path))
    for pos, raw in binlog_frames(path, dec):
        ev = dec.decode(raw, pos)
        if isinstance(ev, E.PreviousGtidsEvent):
            return ev.gtid_set, bytes(raw[19:-4])  # body without header and CRC
    raise AssertionError("no PREVIOUS_GTIDS")


def test_encoding_is_the_servers_own_bytes() -> None:
    """COM_BINLOG_DUMP_GTID's set has PREVIOUS_GTIDS' layout: servers wrote these bytes themselves."""
    for name in ("binlog_transaction_with_GTID_TAG.000001", "binlog_transaction_previous_GTID_no_tag.000001",
                 "binlog_56_gtid_reserved_word.000001"):
        text, body = _previous_gtids_body(name)
        assert MysqlGtidSet.parse(text).encode() == body, name
