"""The native JSONL emitter against the Python reference: same bytes out, same errors, no crashes.

Every comparison dumps the same file twice, once with the extension and once with it switched off
(as BINLAKE_PURE_PYTHON=1 does), and compares the output and the error, if any.
"""

from __future__ import annotations

import functools
import io
import os
import re
import struct
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingester.cli import dump
from ingester.dump import native
from tests.corpus import manifest
from tests.harness.binlogs import MYSQL_FDE, binlog_event, format_description, synthetic_binlog

NATIVE = native.native
_SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]  # fixtures: only tmp_path and monkeypatch


def _dump(path: Path, monkeypatch: pytest.MonkeyPatch, use_native: bool, verify: bool = True,
          jobs: int = 1) -> tuple[bytes, str | None]:
    """Output and error (type and message) of `binlake dump --format jsonl`, natively or not."""
    out = io.BytesIO()
    with monkeypatch.context() as m:
        m.setattr(native, "native", NATIVE if use_native else None)
        if jobs > 1:
            m.setattr(dump, "_PARALLEL_MIN_FILE", 0)
            m.setattr(dump, "_SEGMENT", 1)
        try:
            dump.dump_file(str(path), out, "jsonl", verify=verify, jobs=jobs)
        except Exception as exc:  # compared, not judged: both paths must fail alike
            return out.getvalue(), f"{type(exc).__name__}: {exc}"
    return out.getvalue(), None


def _same(path: Path, monkeypatch: pytest.MonkeyPatch, verify: bool = True, jobs: int = 1) -> tuple[bytes, str | None]:
    ours = _dump(path, monkeypatch, True, verify, jobs)
    reference = _dump(path, monkeypatch, False, verify, jobs)
    assert ours[1] == reference[1]
    assert ours[0] == reference[0]
    return reference


def test_extension_is_built() -> None:
    """bootstrap builds it; only BINLAKE_PURE_PYTHON may switch it off."""
    assert (NATIVE is None) == bool(os.environ.get("BINLAKE_PURE_PYTHON"))


@pytest.mark.parametrize("entry", manifest(), ids=lambda e: f"{e.path.parent.name}/{e.path.name}")
def test_corpus_files_render_identically(entry, monkeypatch) -> None:
    out, _error = _same(entry.path, monkeypatch)
    _same(entry.path, monkeypatch, verify=False)
    if len(out) > 10_000:
        _same(entry.path, monkeypatch, jobs=2)


@functools.cache
def _corpus_bytes() -> list[tuple[str, bytes]]:
    return [(e.path.name, e.path.read_bytes()) for e in manifest()
            if e.path.suffix != ".gz" and e.path.stat().st_size < 400_000]


@settings(max_examples=150, deadline=None, suppress_health_check=_SLOW)
@given(st.data())
def test_mutated_corpus_files_render_identically(tmp_path, monkeypatch, data) -> None:
    name, raw = data.draw(st.sampled_from(_corpus_bytes()))
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(4, len(buf) - 1))
        if data.draw(st.booleans()):
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        else:
            buf[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del buf[data.draw(st.integers(4, len(buf))):]
    path = tmp_path / name
    path.write_bytes(buf)
    _out, error = _same(path, monkeypatch, verify=False)
    assert error is None or error.startswith(f"BinlogError: {path} at byte ")
    _same(path, monkeypatch)


# ---------------------------------------------------------------- synthetic tables of every column type


@settings(max_examples=400, deadline=None, suppress_health_check=_SLOW)
@given(st.data())
def test_synthetic_rows_of_every_column_type_render_identically(tmp_path, monkeypatch, data) -> None:
    path = tmp_path / "synthetic-bin.000001"
    path.write_bytes(synthetic_binlog(data))
    _same(path, monkeypatch)


def test_undecodable_names_render_as_replacement_characters(tmp_path, monkeypatch) -> None:
    fde = format_description(MYSQL_FDE)
    crc = fde[-5] == 1
    table_map = b"\x2a\0\0\0\0\0\x01\0" + b"\x02db\0" + b"\x02t\xff\0" + b"\x01\x03" + b"\x00" + b"\x00"
    rows = b"\x2a\0\0\0\0\0\x01\0\x02\0" + b"\x01\x01" + b"\x00" + (7).to_bytes(4, "little")
    raw = bytearray(b"\xfebin" + fde)
    for code, body in ((19, table_map), (30, rows)):
        raw += binlog_event(code, body, len(raw), crc)
    path = tmp_path / "names-bin.000001"
    path.write_bytes(raw)
    out, error = _same(path, monkeypatch)
    assert error is None
    assert out.count('"table":"t\ufffd"'.encode()) == 2
    assert b'"rows":[{"after":{"@1":7}}]' in out


def test_json_null_document_and_sql_null_render_apart(tmp_path, monkeypatch) -> None:
    """docs/JSONL.md: a JSON column holding the null document is {"$json": null}, SQL NULL is null, and nulls
    inside a document stay null. The binary JSON is written by hand from MySQL's format (the literal type
    0x04 with value 0x00 is null; an empty value is read as the null literal)."""
    fde = format_description(MYSQL_FDE)
    crc = fde[-5] == 1
    names = b"\x04\x05" + b"\x02id" + b"\x01j"  # COLUMN_NAME
    table_map = b"\x2a\0\0\0\0\0\x01\0" + b"\x02db\0" + b"\x01t\0" + b"\x02\x03\xf5" + b"\x01\x04" + b"\x02" + names
    documents = [
        bytes.fromhex("04 00"),  # null
        None,  # SQL NULL
        b"",  # empty: null
        bytes.fromhex("02 0100 0700 04 0000"),  # [null]
        bytes.fromhex("00 0100 0c00 0b00 0100 04 0000 61"),  # {"a": null}
        bytes.fromhex("0c 04 6e756c6c"),  # the string "null"
    ]
    rows = b"".join(b"\x02" + struct.pack("<i", i) if doc is None else  # null bitmap, id, 4-byte length, JSON
                    b"\x00" + struct.pack("<i", i) + struct.pack("<I", len(doc)) + doc
                    for i, doc in enumerate(documents, 1))
    raw = bytearray(b"\xfebin" + fde)
    for code, body in ((19, table_map), (30, b"\x2a\0\0\0\0\0\x01\0\x02\0" + b"\x02\x03" + rows)):
        raw += binlog_event(code, body, len(raw), crc)
    path = tmp_path / "json-null-bin.000001"
    path.write_bytes(raw)
    out, error = _same(path, monkeypatch)
    assert error is None
    line = orjson.loads(out.splitlines()[-1])
    assert [row["after"]["j"] for row in line["rows"]] == [{"$json": None}, None, {"$json": None}, [None],
                                                           {"a": None}, "null"]
    text = io.BytesIO()
    dump.dump_file(str(path), text, "text")
    # as mysqlbinlog -v prints them (a JSON string prints as any string: the text format is not typed)
    assert re.findall(r"@2=(.*) /\* j \*/", text.getvalue().decode())[:5] == \
        ["'null'", "NULL", "'null'", "'[null]'", """'{"a":null}'"""]
