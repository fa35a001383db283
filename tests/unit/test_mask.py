"""Column masking: rewritten rows events of real binlogs decode, with the codec alone, to the same rows except
the masked column, whose value is the documented replacement (docs/MASKING.md)."""

from __future__ import annotations

import hashlib
import hmac
from decimal import Decimal

import pytest

from ingester.codec import BinlogDecoder, BinlogError
from ingester.codec import events as E
from ingester.codec.constants import ColumnType as T
from ingester.codec.rows import JsonDiff
from ingester.column_rules import ColumnRules
from ingester.records.builder import Record, RecordBuilder
from ingester.records.format import record_events
from ingester.records.mask import Rewriter
from ingester.sources.binlog_file import binlog_frames
from tests.corpus import CORPUS

KEY = b"k3y"
FILES = [  # every column type the corpus has, FULL and MINIMAL metadata, v1 and v2, CRC32 and none
    "rust-mysql-common/mariadb-bin.000001",
    "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32",
    "rust-mysql-common/json.binlog.000001",
    "zendesk-maxwell/binlog.000004",
    "apecloud-mysql-binlog-connector-rust/mysql-bin.000057",
    "osheroff-mysql-binlog-connector-java/mysql-bin.compressed",
    "rust-mysql-common/transaction_compression.000001",
    "alibaba-canal/mysql-bin.000001",
    "rust-mysql-common/mysql_type_bit.000001",
    "rust-mysql-common/time_issue.000001",
    "rusuly-MySqlCdc/mysql-bin.000001",
    "rust-us-mysql-cdc-rs/5.7/31_update_rows_v2/log.bin",
]
_STRINGS = {T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
            T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED}
_INTEGERS = {T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG}
_ZEROS = (0, "", b"", "0000-00-00", "0000-00-00 00:00:00", "00:00:00")


def _is_zero(col, value) -> bool:
    """The documented zero of a NOT NULL column's type (temporal: the zero date/time; ENUM: '')."""
    if col.type == T.NEWDECIMAL:
        return Decimal(value) == 0
    if isinstance(value, str) and col.type not in _STRINGS:
        return value.replace("0", "").strip("-: .") == ""
    return value in _ZEROS


def _rows_events(path):
    """(decoder, raw, position, decoded event) of every rows event, TRANSACTION_PAYLOAD's inner ones too."""
    dec = BinlogDecoder(str(path))
    for pos, raw in binlog_frames(path, dec):
        ev = dec.decode(raw, pos)
        if isinstance(ev, E.TransactionPayloadEvent):
            for inner in dec.payload_raw_events(ev):
                iev = dec.decode(inner, pos, in_payload=True)
                if isinstance(iev, E.RowsEvent):
                    yield dec, inner, pos, iev, True
        elif isinstance(ev, E.RowsEvent) and raw[4] >= 23:
            yield dec, raw, pos, ev, False


def _plain(value):
    """A comparable value (a partial JSON update by its diff bytes)."""
    return ("diff", value.diff) if type(value) is JsonDiff else value


def _images(ev):
    return [image for row in ev.rows for image in row.values()]


def _expected(col, action, value):
    """The documented replacement of ``value`` (None: NULL), computed from the original value."""
    if action == "hash" and col.type in _STRINGS:
        data = value if isinstance(value, bytes) else value.encode("utf-8")
        if col.type == T.STRING and isinstance(value, bytes):
            data = data.rstrip(b"\0")  # BINARY(n): the server logs it without its zero padding
        digest = hmac.new(KEY, data, hashlib.sha256).hexdigest()
        limit = col.max_length if col.type in (T.VARCHAR, T.VAR_STRING, T.STRING) else 64
        return digest[:limit]
    if action == "mask" and col.type in _STRINGS:
        return "****"[:col.max_length if col.type in (T.VARCHAR, T.VAR_STRING, T.STRING) else 4]
    if col.nullable:
        return None
    return "zero"


def _same_text(got, want) -> bool:
    if isinstance(got, bytes):
        got = got.rstrip(b"\0").decode("ascii")  # BINARY(n) pads with zero bytes
    return got == want


@pytest.mark.parametrize("name", FILES)
def test_rewrite_changes_exactly_the_masked_column(name) -> None:
    checked: dict[str, int] = {}
    seen: dict[tuple, int] = {}
    for dec, raw, pos, ev, in_payload in _rows_events(CORPUS / name):
        tm = ev.table_map
        key = (tm.database, tm.table, raw[4])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 3:  # a few events of each table and kind: every column of each
            continue
        present = set(ev.columns_before) | set(ev.columns_after)
        for index in sorted(present):
            col = tm.columns[index]
            for action in ("exclude", "hash", "mask"):
                try:
                    rewriter = Rewriter(tm, {index: action}, KEY)
                except BinlogError as exc:
                    assert "filters.columns" in str(exc)
                    assert (action == "hash" and col.type not in _STRINGS | _INTEGERS) or not col.nullable
                    continue
                crc = dec.checksum == 1 and not in_payload
                new = rewriter.rewrite(raw, dec.post_header_lengths.get(raw[4], 0), crc, pos, name)
                assert new[4] in (23, 24, 25, 30, 31, 32, 39)  # compressed events come out plain
                got = dec.decode(new, pos, in_payload=in_payload)  # size field and CRC32 verified here
                assert type(got) is type(ev) and len(got.rows) == len(ev.rows)
                for before, after in zip(_images(ev), _images(got), strict=True):
                    assert before.keys() == after.keys()
                    for column, value in before.items():
                        if column != col.name:
                            assert _plain(after[column]) == _plain(value), (name, column)
                        elif value is None:
                            assert after[column] is None
                        elif action == "hash" and col.type in _INTEGERS:
                            width = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}[col.type]
                            raw_value = (value % (1 << 8 * width)).to_bytes(width, "little")
                            want = hmac.new(KEY, raw_value, hashlib.sha256).digest()[:width]
                            assert after[column] % (1 << 8 * width) == int.from_bytes(want, "little")
                        else:
                            want = _expected(col, action, value)
                            if want == "zero":
                                assert _is_zero(col, after[column]), (col, after[column])
                            elif want is None or not isinstance(value, str) or value.isascii():
                                assert (want is None and after[column] is None) or _same_text(after[column], want)
                checked[T(col.type).name] = checked.get(T(col.type).name, 0) + 1
    assert checked, name


def test_builder_publishes_masked_rows_and_never_the_values(tmp_path) -> None:
    """Through RecordBuilder (the daemon's path): the masked column's bytes are in no record."""
    path = CORPUS / "rust-mysql-common/mariadb-bin.000001"
    target = ("toddy_test", "outbox", "event")  # a BLOB holding JSON documents
    secrets = {image["event"] for _, _, _, ev, _ in _rows_events(path) if ev.table_map.table == "outbox"
               for image in _images(ev) if image["event"]}
    assert target and secrets
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(masks=ColumnRules({".".join(target): "hash"}, KEY))
    records: list[Record] = []
    for pos, raw in binlog_frames(path, dec):
        records += builder.feed(dec, raw, pos)
    records += builder.flush()
    blob = b"".join(r.value for r in records)
    assert not [s for s in secrets if s in blob]
    decoded = [item.event for r in records for item in record_events(dict(r.headers), r.value, "r")
               if isinstance(item.event, E.RowsEvent) and item.event.table_map.table == target[1]]
    hashes = {hmac.new(KEY, v, hashlib.sha256).hexdigest().encode() for v in secrets}
    assert decoded and {image["event"] for ev in decoded for image in _images(ev)} == hashes


def test_a_rule_the_column_cannot_take_stops_with_the_binlog_and_position() -> None:
    """hash on a TIMESTAMP: refused at the table's TABLE_MAP, naming the binlog file and its byte."""
    path = CORPUS / "rust-mysql-common/mariadb-bin.000001"
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(masks=ColumnRules({"toddy_test.outbox.created": "hash"}, KEY))
    builder.file = path.name  # as the stream's first ROTATE sets it in the daemon
    with pytest.raises(BinlogError) as caught:
        for pos, raw in binlog_frames(path, dec):
            builder.feed(dec, raw, pos)
    assert caught.value.position is not None and caught.value.source == path.name
    assert str(caught.value).startswith(f"{path.name} at byte {caught.value.position}: filters.columns: "
                                        "toddy_test.outbox.created: cannot hash a column of type TIMESTAMP2")


def test_rules_are_checked() -> None:
    with pytest.raises(ValueError, match="not one of"):
        ColumnRules({"a.b.c": "drop"})
    with pytest.raises(ValueError, match=r"db\.table\.column"):
        ColumnRules({"a.b": "mask"})
    with pytest.raises(ValueError, match="needs a key"):
        ColumnRules({"a.b.c": "hash"})
    assert "k3y" not in repr(ColumnRules({"a.b.c": "hash"}, KEY))


def test_config_reads_rules_and_key_and_hides_the_key() -> None:
    from ingester.config import load_config

    cfg = load_config(None, environ={"BINLAKE_MASK_KEY": "Zq7MaskKey",
                                     "BINLAKE_FILTERS_COLUMNS": "shop.c.email=hash, shop.c.card=mask"})
    rules = cfg.filters.column_rules()
    assert rules is not None and rules.rules == {"shop.c.email": "hash", "shop.c.card": "mask"}
    assert rules.key == b"Zq7MaskKey"
    assert "Zq7MaskKey" not in repr(cfg) + repr(cfg.redacted()) + repr(rules)
    # Snapshots apply the rules too (tests/integration/test_snapshot_mask.py), so they go together.
    assert load_config(None, {"snapshot": "initial"}, environ={"BINLAKE_FILTERS_COLUMNS": "a.b.c=mask"}).snapshot
    with pytest.raises(ValueError, match="needs a key"):
        load_config(None, {"filters": {"columns": {"a.b.c": "hash"}}}, environ={})
