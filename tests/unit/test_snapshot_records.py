"""Snapshot entries of the record format, chunk queries, progress line and settings, without servers."""

from __future__ import annotations

import io

import orjson
import pytest

from ingester.codec import events as E
from ingester.codec.constants import ColumnType as T
from ingester.codec.errors import BinlogError
from ingester.codec.jsonb import JSON_NULL
from ingester.config import load_config
from ingester.daemon import table_reader as D
from ingester.daemon.progress import Progress
from ingester.dump.jsonl import event_json
from ingester.records import snapshot as S
from ingester.records.debezium.encoder import snapshot_marker
from ingester.records.format import Sequence, read_index, record_events
from tests.harness.records import json_null_record, json_snapshot_table, snapshot_record, snapshot_table


def test_snapshot_entries_decode_to_read_rows_events() -> None:
    headers, value = snapshot_record([[[1, "a", D._b64(b"\x00\xff")], [2, None, None]], [[3, "ç", D._b64(b"")]]])
    items = list(record_events(headers, value))
    assert [i.seq for i in items] == [Sequence(3, 99, 0), Sequence(3, 99, 1)]
    assert all(type(i.event) is E.SnapshotRowsEvent and i.event.kind == "read" for i in items)
    assert isinstance(items[0].event, E.WriteRowsEvent)  # consumers land them like inserted rows
    assert items[0].event.rows == [{"after": {"id": 1, "name": "a", "raw": b"\x00\xff"}},
                                   {"after": {"id": 2, "name": None, "raw": None}}]
    assert items[1].event.rows == [{"after": {"id": 3, "name": "ç", "raw": b""}}]
    tm = items[1].event.table_map  # the descriptor of the record's first entry applies to the next
    assert (tm.database, tm.table, tm.primary_key, tm.column_names) == ("db", "t", [(0, 0)], ["id", "name", "raw"])
    assert [(c.type, c.meta, c.collation) for c in tm.columns] == [(T.LONG, 0, None), (T.VARCHAR, 40, 45),
                                                                     (T.BLOB, 2, 63)]
    line = orjson.loads(event_json(items[0].event))
    assert (line["type"], line["database"], line["table"], line["rows"][0]["after"]["raw"]) == \
        ("read_rows", "db", "t", "AP8=")
    assert [e.type_code for e in read_index(headers["binlake.index"])] == [S.SNAPSHOT_ROWS] * 2


def test_snapshot_json_null_documents_stay_apart_from_sql_null() -> None:
    """The null document is {"$json": null} on the wire, as in JSONL, and JSON_NULL once decoded; SQL NULL
    is null; nulls inside a document stay null."""
    assert [D._json(t) for t in (b"null", b"[null]", b'{"a": null}')] == [{"$json": None}, [None], {"a": None}]
    headers, value = json_null_record()
    (item,) = record_events(headers, value)
    assert [row["after"]["j"] for row in item.event.rows] == [JSON_NULL, None, [None], "null"]
    line = orjson.loads(event_json(item.event))
    assert [row["after"]["j"] for row in line["rows"]] == [{"$json": None}, None, [None], "null"]


def test_snapshot_rows_shorter_than_the_descriptor_are_refused() -> None:
    for table, binary in ((snapshot_table(), (2,)), (json_snapshot_table(), ())):
        headers, value = snapshot_record([[[1]]], table=table, binary=binary)
        with pytest.raises(BinlogError, match="bad snapshot rows"):
            list(record_events(headers, value))


def test_snapshot_rows_are_a_zstd_frame_unless_asked_otherwise() -> None:
    rows = [[[i, "name " * 20, None] for i in range(100)]]
    headers, packed = snapshot_record(rows)
    _, plain = snapshot_record(rows, compress=False)
    assert packed[9] == S.FLAG_SNAPSHOT | S.FLAG_ZSTD and plain[9] == S.FLAG_SNAPSHOT
    assert len(packed) * 5 < len(plain)
    assert [i.event.rows for i in record_events(headers, packed)] == \
        [i.event.rows for i in record_events(headers, plain)]
    damaged = packed[:-8] + bytes(8)  # the frame's last bytes
    with pytest.raises(BinlogError, match="bad snapshot rows"):
        list(record_events(headers, damaged))


@pytest.mark.parametrize("cut", [12, 30, -3])
def test_damaged_snapshot_records_raise_the_codecs_error(cut) -> None:
    headers, value = snapshot_record([[[1, "a", None]]])
    with pytest.raises(BinlogError):
        list(record_events(headers, value[:cut]))


def test_snapshot_entry_without_a_descriptor_is_refused() -> None:
    headers, value = snapshot_record([[[1, "a", None]]])
    start = 9 + 1  # after the header and the entry's flags
    n = int.from_bytes(value[start : start + 4], "little")
    stripped = value[:start] + bytes(4) + value[start + 4 + n :]
    with pytest.raises(BinlogError, match="without a table descriptor"):
        list(record_events(headers, stripped))


def test_chunk_queries_continue_after_the_last_key() -> None:
    tm = snapshot_table()
    reader = D.TableReader("db.t", tm, ["`id`", "`name`", "`raw`"], [], [2], [0, 1], b"")
    assert reader.query(10, None) == ("SELECT `id`, `name`, `raw` FROM `db`.`t` ORDER BY `id`, `name` LIMIT 10", [])
    sql, params = reader.query(10, [5, "x"])
    assert sql.endswith("WHERE (`id` > %s) OR (`id` = %s AND `name` > %s) ORDER BY `id`, `name` LIMIT 10")
    assert params == [5, 5, "x"]
    ranged = D.TableReader("db.t", tm, ["`id`", "`name`", "`raw`"], [], [2], [0], b"")  # a key range's chunk
    assert ranged.query(10, [5], [90]) == (
        "SELECT `id`, `name`, `raw` FROM `db`.`t` WHERE (`id` > %s) AND `id` <= %s ORDER BY `id` LIMIT 10", [5, 90])
    assert ranged.query(10, None, [90])[0].endswith(" WHERE `id` <= %s ORDER BY `id` LIMIT 10")
    key = [b"\x00\x01", 7, "é"]
    assert D.load_key(orjson.loads(orjson.dumps(D.dump_key(key)))) == key


def test_progress_line_has_rows_estimate_rate_and_eta() -> None:
    progress = Progress(1000, 0, io.StringIO(), tty=True)
    line = progress.line(250, "db.t", progress.started + 5)
    assert line == "snapshot db.t: 250/1,000 rows (25%), 50 rows/s, ETA 0:15"
    assert "2,000/2,000 rows (100%)" in progress.line(2000, "db.t", progress.started + 5)  # estimates are rough
    progress.last -= 1  # a terminal gets one line, rewritten in place
    progress.update(300, "db.t")
    progress.last -= 1
    progress.update(400, "db.t")
    progress.finish()
    out = progress.stream.getvalue()
    assert out.startswith("\r\x1b[Ksnapshot db.t: 300/1,000 rows (30%)") and out.count("\r") == 2
    assert out.endswith("\n") and out.count("\n") == 1


def test_snapshot_setting(tmp_path) -> None:
    assert load_config(environ={}).snapshot == "never"
    assert load_config(environ={"BINLAKE_SNAPSHOT": "when-needed"}).snapshot == "when-needed"
    assert load_config(environ={"BINLAKE_SNAPSHOT_CHUNK_ROWS": "100"}).snapshot_chunk_rows == 100
    with pytest.raises(ValueError, match="'always' is not one of initial, never, when-needed"):
        load_config(environ={}, overrides={"snapshot": "always"})


def test_verify_entries_decode_to_verify_rows_events_with_their_chunk() -> None:
    chunk = {"run": "r1", "chunk": 3, "part": 0, "parts": 1, "low": [10], "high": [20], "excluded": [[12]]}
    descriptor = S.verify_descriptor(S.encode_descriptor(snapshot_table(), [2]), chunk)
    value = S.snapshot_value(descriptor, [orjson.dumps([[11, "a", None]]), orjson.dumps([[13, "b", None]])],
                             verify=True)
    index = b"".join(S.index_entry(Sequence(3, 99, k).encode(), 1_700_000_000_000_000) for k in range(2))
    items = list(record_events({"binlake.index": index}, value))
    assert all(type(i.event) is E.VerifyRowsEvent and i.event.kind == "verify" for i in items)
    assert [i.event.verify for i in items] == [chunk, chunk]  # the record's descriptor applies to the next entry
    assert items[1].event.rows == [{"after": {"id": 13, "name": "b", "raw": None}}]
    line = orjson.loads(event_json(items[0].event))
    assert (line["type"], line["verify"]["excluded"]) == ("verify_rows", [[12]])
    # Without their chunk, verify rows are refused (never taken for a snapshot's rows, which would be applied)
    bare = S.snapshot_value(S.encode_descriptor(snapshot_table(), [2]), [orjson.dumps([[11, "a", None]])], verify=True)
    with pytest.raises(BinlogError, match="verify rows without their chunk"):
        list(record_events({"binlake.index": index[:len(index) // 2]}, bare))


def test_snapshot_marks_give_debeziums_markers() -> None:
    """A snapshot entry's marks (its rows' place: the table's first and last rows, the snapshot's first and last
    tables) become Debezium's source.snapshot of each row; the entry after it in the record has none."""
    descriptor = S.marked_descriptor(S.encode_descriptor(snapshot_table(), [2]), True, True, False, True)
    value = S.snapshot_value(descriptor, [orjson.dumps([[11, "a", None], [12, "b", None]]),
                                          orjson.dumps([[13, "c", None]])])
    index = b"".join(S.index_entry(Sequence(3, 99, k).encode(), 1_700_000_000_000_000) for k in range(2))
    first, second = (i.event for i in record_events({"binlake.index": index}, value))
    assert first.marks == (True, True, False, True) and second.marks is None
    assert [snapshot_marker(first.marks, i, 1) for i in range(2)] == ["first_in_data_collection", "last"]
    # Debezium's order: the snapshot's last row, its first, a table's last, a table's first
    assert [snapshot_marker((True, True, True, False), i, 2) for i in range(3)] == [
        "first", "true", "last_in_data_collection"]
    assert snapshot_marker((True, True, True, True), 0, 0) == "last"
    assert snapshot_marker((True, True, False, False), 0, 0) == "last_in_data_collection"
    assert snapshot_marker((False, False, True, True), 0, 0) == "true"


def test_held_bytes_counts_compressed_rows_at_their_size_once_read() -> None:
    """binlake's Kafka source bounds a batch by the bytes its records hold once read: a snapshot or verify record's
    zstd frames count at the JSON's size (from the frame's header), anything else at its length."""
    from ingester.records.snapshot import held_bytes, snapshot_value

    rows = orjson.dumps([[i, f"row {i} of a table whose text compresses well", "0.25"] for i in range(5000)])
    compressed = snapshot_value(b'{"t": 1}', [rows, rows])
    assert len(compressed) * 5 < 2 * len(rows)  # what a bound on the record's length saw
    header, entry = 9, 1 + 4 + 4  # BLK, version, format description's length; an entry's flags and two lengths
    assert held_bytes(compressed) == header + 2 * entry + len(b'{"t": 1}') + 2 * len(rows)
    plain = snapshot_value(b'{"t": 1}', [rows], compress=False)
    assert held_bytes(plain) == len(plain)
    assert held_bytes(b"BLK\x02\x00\x03\x00\x00\x00FDE...") == 15  # binlog events: their length
    assert held_bytes(b'{"payload": {}}') == 15  # a Debezium JSON value
