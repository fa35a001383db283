"""`binlake dump`: output formats, parallel decoding, and one-line errors that keep prior output."""

from __future__ import annotations

import io

import orjson
import pytest

from ingester.cli import dump
from ingester.cli.main import main
from tests.corpus import CORPUS

MARIADB = CORPUS / "mariadb-operator-mariadb-poc" / "domain_id_0" / "mariadb-repl-bin.000005"
MYSQL = CORPUS / "zendesk-maxwell" / "binlog.000004"


@pytest.mark.parametrize("path", [MARIADB, MYSQL], ids=["mariadb", "mysql"])
@pytest.mark.parametrize("fmt", ["jsonl", "text"])
def test_parallel_output_equals_sequential(monkeypatch, path, fmt) -> None:
    sequential = io.BytesIO()
    dump.dump_file(str(path), sequential, fmt, jobs=1)
    monkeypatch.setattr(dump, "_PARALLEL_MIN_FILE", 0)
    monkeypatch.setattr(dump, "_SEGMENT", 1)
    parallel = io.BytesIO()
    dump.dump_file(str(path), parallel, fmt, jobs=2)
    assert parallel.getvalue() == sequential.getvalue()
    assert len(sequential.getvalue()) > 1000


@pytest.mark.parametrize("jobs", [1, 2])
def test_damaged_file_keeps_earlier_output_and_names_position(tmp_path, monkeypatch, capsys, jobs) -> None:
    monkeypatch.setattr(dump, "_PARALLEL_MIN_FILE", 0)
    monkeypatch.setattr(dump, "_SEGMENT", 1)
    data = bytearray(MARIADB.read_bytes())
    events = [orjson.loads(line) for line in _jsonl(MARIADB)]
    victim = events[len(events) // 2]
    data[victim["position"] + 20] ^= 0xFF
    bad = tmp_path / "bad-bin.000001"
    bad.write_bytes(data)
    code = main(["dump", "--format", "jsonl", "--jobs", str(jobs), str(bad)])
    out, err = capsys.readouterr()
    assert code == 2
    assert err == f"binlake: error: {bad} at byte {victim['position']}: CRC32 mismatch: " + err.split("mismatch: ")[1]
    assert err.count("\n") == 1
    written = [orjson.loads(line) for line in out.splitlines()]
    assert written == events[: len(written)]
    assert written[-1]["position"] < victim["position"] <= written[-1]["log_pos"]


def _jsonl(path) -> list[bytes]:
    out = io.BytesIO()
    dump.dump_file(str(path), out, "jsonl", jobs=1)
    return out.getvalue().splitlines()


def test_not_a_binlog(tmp_path, capsys) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    assert main(["dump", str(f)]) == 2
    expected = f"binlake: error: {f} at byte 0: not a binlog file (missing the fe 62 69 6e magic)\n"
    assert capsys.readouterr().err == expected


def test_missing_file(capsys) -> None:
    assert main(["dump", "/nonexistent/binlog.000001"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("binlake: error: /nonexistent/binlog.000001") and err.count("\n") == 1


def test_start_and_stop_position(capsys) -> None:
    events = [orjson.loads(line) for line in _jsonl(MYSQL)]
    start, stop = events[5]["position"], events[9]["position"]
    assert main(["dump", "--format", "jsonl", "--start-position", str(start), "--stop-position", str(stop),
                 str(MYSQL)]) == 0
    got = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert got == events[5:9]


def test_every_jsonl_object_has_the_common_fields() -> None:
    for path in (MARIADB, MYSQL, CORPUS / "rust-mysql-common" / "transaction_compression.000001"):
        for line in _jsonl(path):
            ev = orjson.loads(line)
            assert {"type", "type_code", "position", "log_pos", "timestamp", "server_id", "flags"} <= ev.keys()


@pytest.mark.parametrize("jobs", [1, 2])
def test_strings_of_unknown_charset_are_kept_as_bytes_and_said_once_per_table(monkeypatch, caplog, jobs) -> None:
    """A 5.1 binlog has no charset metadata and dump no schema: the text column's bytes come out whole
    (base64), and one line per table says why (the log, stderr), however many workers decode the file."""
    import base64

    from ingester.codec import charset_notices

    monkeypatch.setattr(charset_notices, "_noticed", set())
    monkeypatch.setattr(dump, "_PARALLEL_MIN_FILE", 0)
    monkeypatch.setattr(dump, "_SEGMENT", 1)  # a segment per transaction: each worker meets the table
    out = io.BytesIO()
    dump.dump_file(str(CORPUS / "rust-mysql-common" / "ver_5_1_23.001"), out, "jsonl", jobs=jobs)
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    values = {base64.b64decode(r["after"]["@2"]) for ev in lines if ev.get("table") == "t1" and "rows" in ev
              for r in ev["rows"] if "after" in r}
    assert b"one" in values  # the server test suite's row (binlog_old_versions.result)
    said = [r.getMessage() for r in caplog.records if "no character set known" in r.getMessage()]
    assert said == ["`test`.`t1`: no character set known for @2 (the binlog has no charset metadata, "
                    "binlog_row_metadata is not FULL, and no schema history applies): their values are kept as "
                    "bytes (base64 in JSONL)"]
