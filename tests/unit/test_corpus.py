"""The codec against real binlogs written by real servers (facts from the corpus MANIFEST)."""

from __future__ import annotations

import collections
import gzip

import pytest

from ingester.codec import BinlogDecoder, BinlogError
from ingester.codec import events as E
from ingester.sources.binlog_file import binlog_frames, read_binlog_file
from tests.corpus import BROKEN, CORPUS, manifest

ENTRIES = manifest()
# The "a_drop" 5.1 tree numbered events differently; MANIFEST counts use the raw type codes.
PRE_GA_51 = {16: 19, 17: 20, 18: 21, 19: 22, 20: 16, 21: 17, 22: 18}


def test_manifest_lists_the_whole_corpus() -> None:
    assert len(ENTRIES) == 89
    assert all(e.path.exists() for e in ENTRIES)


def _outer_events(path):
    dec = BinlogDecoder(str(path))
    out = []
    for pos, raw in binlog_frames(path, dec):
        evs = list(dec.events(raw, pos))
        out.append((evs[0], raw, evs[1:]))
    return out


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.path.name not in BROKEN],
                         ids=lambda e: str(e.path.relative_to(CORPUS)))
def test_every_event_of_every_file_decodes(entry) -> None:
    events = _outer_events(entry.path)
    assert len(events) == entry.events
    seen = collections.Counter(ev.type_code for ev, _, _ in events)
    expected = entry.types
    if "a_drop" in entry.server_version:
        expected = {PRE_GA_51.get(code, code): n for code, n in expected.items()}
    assert dict(seen) == expected
    fde = events[0][0]
    assert isinstance(fde, E.FormatDescriptionEvent)
    assert fde.server_version == entry.server_version
    assert fde.checksum_algorithm == {"CRC32": 1, "off": 0, "n/a": None}[entry.checksum]
    assert bool(fde.flags & 1) == entry.in_use
    for ev, raw, inner in events:
        assert ev.event_size == len(raw)
        assert all(iev.in_payload for iev in inner)


@pytest.mark.parametrize("name,position", sorted(BROKEN.items()))
def test_deliberately_broken_files_fail_with_file_and_position(name, position) -> None:
    path = CORPUS / "rust-mysql-common" / name
    with pytest.raises(BinlogError) as info:
        list(read_binlog_file(path))
    assert info.value.position == position
    assert str(info.value).startswith(f"{path} at byte {position}: ")
    assert "\n" not in str(info.value)


def _file(name: str):
    return list(read_binlog_file(CORPUS / "rust-mysql-common" / name))


def _rows(events):
    return [r for ev in events if isinstance(ev, E.RowsEvent) for r in ev.row_dicts()]


def test_crc32_mismatch_names_the_position(tmp_path) -> None:
    data = bytearray((CORPUS / "osheroff-mysql-binlog-connector-java" / "mysql-bin.checksum-crc32").read_bytes())
    data[500] ^= 0x01
    bad = tmp_path / "bad.000001"
    bad.write_bytes(data)
    with pytest.raises(BinlogError, match=r"bad\.000001 at byte \d+: CRC32 mismatch") as info:
        list(read_binlog_file(bad))
    assert info.value.position <= 500
    assert len(list(read_binlog_file(bad, verify_checksums=False))) > 0


def test_sakila_gz_has_1462_events_and_all_rows() -> None:
    events = list(read_binlog_file(CORPUS / "osheroff-mysql-binlog-connector-java" / "mysql-bin.sakila.gz"))
    assert len(events) == 1462
    # sakila-data.sql has 16044 payment rows, 1000 films, 200 actors ...: check a known total
    per_table = collections.Counter()
    for ev in events:
        if isinstance(ev, E.RowsEvent):
            per_table[ev.table] += len(ev.rows)
    assert per_table["actor"] == 200
    assert per_table["film"] == 1000
    assert per_table["payment"] == 16049
    assert per_table["rental"] == 16044
    assert gzip  # the reader opens .gz itself


def test_json_opaque_values_mysql_9() -> None:
    values = [r["after"]["a"] for r in _rows(_file("json-opaque.binlog"))]
    from decimal import Decimal

    assert values == [
        {"a": "base64:type15:VQ=="},
        {"b": "2012-03-18"},
        {"c": "2012-03-18 11:30:45.000000"},
        {"c": "87:31:46.654321"},
        {"d": Decimal("123.456")},
        {"e": Decimal("9.00")},
        {"e": [0, 1, True, False]},
        {"e": None},
    ]


def test_vector_values_mysql_9() -> None:
    import struct

    events = _file("vector.binlog")
    maps = {ev.table_map.table: ev.table_map for ev in events if isinstance(ev, E.TableMapEvent)}
    dims = {name: [c.vector_dimensions for c in tm.columns if c.vector_dimensions is not None]
            for name, tm in maps.items()}
    assert dims["foo"] == [3]
    assert dims["bar"] == [2, 4]
    foo = [r["after"] for ev in events if isinstance(ev, E.WriteRowsEvent) and ev.table == "foo"
           for r in ev.row_dicts()]
    v1 = next(r["vector_column"] for r in foo if r["id"] == 1)
    v2 = next(r["vector_column"] for r in foo if r["id"] == 2)
    assert v1 == list(struct.unpack("<3f", bytes([205, 204, 140, 63, 205, 204, 12, 64, 51, 51, 83, 64])))
    assert v2 == list(struct.unpack("<3f", bytes([0, 0, 128, 63, 0, 0, 128, 191, 0, 0, 0, 0])))


def test_mariadb_full_row_metadata() -> None:
    events = _file("mariadb-bin.000001")
    tm = next(ev.table_map for ev in events if isinstance(ev, E.TableMapEvent))
    assert (tm.database, tm.table) == ("toddy_test", "outbox")
    assert tm.column_names == ["id", "topic", "event_type", "event", "created"]
    assert tm.primary_key == [(0, 0)]
    assert all(c.collation is not None for c in tm.columns if c.type in (15, 252, 254))


def test_bit_columns() -> None:
    rows = _rows(_file("mysql_type_bit.000001"))
    assert [list(r["after"].values()) for r in rows] == [[0b100, "foo", 0b100000]]


def test_transaction_compression_inner_events() -> None:
    events = _file("transaction_compression.000001")
    inner = [ev for ev in events if ev.in_payload]
    assert [type(ev) for ev in inner] == [E.QueryEvent, E.TableMapEvent, E.WriteRowsEvent, E.XidEvent]
    payload = next(ev for ev in events if isinstance(ev, E.TransactionPayloadEvent))
    assert payload.compression_type == 0
    assert payload.uncompressed_size == sum(ev.event_size for ev in inner)


def test_minimal_row_metadata_unsigned_and_collation() -> None:
    events = _file("minimal_row_metadata.000001")
    # The MANIFEST (after rust_mysql_common's test) counts columns from 0: its @2 and @4 are our @3, @5.
    tm = next(ev.table_map for ev in events if isinstance(ev, E.TableMapEvent))
    assert tm.columns[2].collation == 255  # utf8mb4_0900_ai_ci
    assert tm.columns[1].collation == 63  # the BLOB
    assert [c.unsigned for c in tm.columns] == [False, None, None, False, True]
    row = _rows(events)[0]["after"]
    assert row["@5"] == 3230202323


def test_negative_time_with_large_hours() -> None:
    row = _rows(_file("time_issue.000001"))[0]["after"]
    assert "-507:48:27" in [v for v in row.values() if isinstance(v, str)]  # -(21 days 03:48:27)


def test_tagged_gtids_mysql_9() -> None:
    events = _file("binlog_transaction_with_GTID_TAG.000001")
    prev = next(ev for ev in events if isinstance(ev, E.PreviousGtidsEvent))
    assert prev.gtid_set == ("55778904-0299-11f1-b1b8-4ef0c4956feb:1-13,"
                             "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:1-2")
    gtid = next(ev for ev in events if isinstance(ev, E.GtidTaggedEvent))
    assert (gtid.tag, gtid.gno) == ("mytag", 3)
    assert gtid.gtid == "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
    assert gtid.immediate_server_version == 90600


def test_previous_gtids_untagged() -> None:
    prev = next(ev for ev in _file("binlog_transaction_previous_GTID_no_tag.000001")
                if isinstance(ev, E.PreviousGtidsEvent))
    assert prev.gtid_set == "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"


def test_aurora_padding_is_surfaced_as_unknown() -> None:
    events = list(read_binlog_file(CORPUS / "osheroff-mysql-binlog-connector-java" / "mysql-bin.aurora-padding"))
    unknown = events[3]
    assert isinstance(unknown, E.UnknownEvent)
    assert (unknown.type_code, unknown.position, unknown.event_size) == (100, 281, 928)
    assert unknown.to_dict()["type"] == "unknown"
    assert isinstance(events[4], E.QueryEvent) and events[4].query == "BEGIN"
    assert events[4].position == 1209


def test_binlog_transaction_headers_mysql_5_0() -> None:
    events = _file("binlog_transaction.000001")
    assert len(events) == 20
    pos = 4
    for ev in events:
        assert ev.position == pos
        assert ev.log_pos == pos + ev.event_size
        pos = ev.log_pos


def _verbose_sections() -> dict[str, list[str]]:
    text = (CORPUS / "rust-mysql-common" / "expected" / "mysql-server"
            / "binlog_row_mysqlbinlog_verbose.result").read_text()
    sections: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("Verbose statements from : "):
            name = line.split(": ", 1)[1].strip()
            sections[name] = []
        elif name and line.startswith("###"):
            sections[name].append(line)
    return sections


@pytest.mark.parametrize("name", ["write-partial-row.binlog", "write-full-row.binlog",
                                  "update-partial-row.binlog", "update-full-row.binlog"])
def test_text_rows_match_mysqlbinlog_verbose(name) -> None:
    """Our text dump's pseudo-SQL equals what the MySQL test suite recorded from mysqlbinlog -v."""
    import io
    import re

    from ingester.cli.dump import dump_file

    out = io.BytesIO()
    dump_file(str(CORPUS / "rust-mysql-common" / name), out, "text")
    ours = [re.sub(r" /\* .* \*/$", "", line).replace("`", "")
            for line in out.getvalue().decode().splitlines() if line.startswith("###")]
    assert ours == _verbose_sections()[name]


def _replay(paths) -> dict[str, dict]:
    """Apply row events to per-table dicts keyed by the whole row, as a replica would."""
    tables: dict[str, list] = collections.defaultdict(list)
    for path in paths:
        for ev in read_binlog_file(path):
            if not isinstance(ev, E.RowsEvent):
                continue
            rows = tables[ev.table]
            for row in ev.row_dicts():
                if "before" in row:
                    rows.remove(row["before"])
                if "after" in row:
                    rows.append(row["after"])
    return tables


def _expected_tables(result: str, section: str) -> list[tuple[int, str]]:
    text = (CORPUS / "rust-mysql-common" / "expected" / result).read_text()
    block = text[text.index(section):]
    block = block[block.index("SELECT * FROM t1 ORDER BY a;"):block.index("SELECT * FROM t2")]
    return [(int(a), b) for a, b in (line.split("\t") for line in block.splitlines()[2:] if line)]


@pytest.mark.parametrize("files,result,section", [
    (["ver_5_1_23.001"], "mysql-server/binlog_old_versions.result", "(version 5.1.23)"),
    (["ver_5_1-wl2325_r.001"], "mysql-server/binlog_old_versions.result", "alcatel tree"),
    (["ver_trunk_row_v2.001"], "mariadb-server/binlog_old_versions.result", "v2 row events"),
])
def test_old_versions_row_events_replay_to_the_servers_table(files, result, section) -> None:
    """Rows events of 5.1-era binlogs give the rows the server test suite found after replay.

    The rest of t1 came from statements (user variable, RAND seeds, LAST_INSERT_ID); those
    events are checked to carry the values that produced the expected rows.
    """
    paths = [CORPUS / "rust-mysql-common" / f for f in files]
    # No charset metadata in these binlogs: the codec keeps the text column's bytes (the suite's are ASCII).
    t1 = {(r["@1"], r["@2"].decode("ascii")) for r in _replay(paths)["t1"]}
    expected = set(_expected_tables(result, section))
    assert t1 == {(1, "one")}
    statement_rows = expected - t1
    stmt_events = [ev for f in files for ev in read_binlog_file(CORPUS / "rust-mysql-common"
                                                                   / f.replace("_r.", "_s."))]
    user_var = next(ev for ev in stmt_events if isinstance(ev, E.UserVarEvent))
    rand = next(ev for ev in stmt_events if isinstance(ev, E.RandEvent))
    intvar = next(ev for ev in stmt_events if isinstance(ev, E.IntvarEvent))
    random_value = round(((rand.seed1 * 3 + rand.seed2) % 0x3FFFFFFF) / 0x3FFFFFFF * 1_000_000)
    assert statement_rows == {
        (3, "last stm in trx: next event should be xid"),
        (int(user_var.value if user_var.value_type == "int" else 0), "four"),
        (random_value, "random"),
        (intvar.value, "last_insert_id"),
    }
    blocks = b"".join(ev.block for ev in stmt_events if isinstance(ev, E.AppendBlockEvent))
    assert blocks.count(b"\n") == 17920  # SELECT COUNT(*) FROM t3 after LOAD DATA
