"""Every column type through a real MariaDB binlog: our decoded rows, replayed, must equal the
server's own SELECT of each table, and our row counts must equal mariadb-binlog --verbose's.

Expected values come from the server (CAST to text, HEX of bytes, ...), never from our decoder.
"""

from __future__ import annotations

import base64
import collections
import io

import orjson
import pytest

from ingester.cli.dump import dump_file
from ingester.codec import charset_notices
from ingester.dump import native
from tests.harness import zoo
from tests.harness.binlogs import verbose_counts
from tests.harness.columnar import assert_columnar_equals_dicts, assert_land_images_equal_reference

pytestmark = pytest.mark.integration


def _dump(files, fmt: str) -> bytes:
    out = io.BytesIO()
    for f in files:
        dump_file(str(f), out, fmt)
    return out.getvalue()


@pytest.mark.parametrize("options", [
    {},
    {"options": {"log_bin_compress": "ON", "log_bin_compress_min_len": 10}},
    {"binlog_row_image": "MINIMAL"},
    {"binlog_row_image": "NOBLOB", "binlog_checksum": "NONE"},
], ids=["plain", "compressed-events", "minimal-image", "noblob-image-no-checksum"])
def test_type_zoo_replays_to_the_servers_select(make_mariadb, monkeypatch, options) -> None:
    server = make_mariadb(**options)
    db = "zoo"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    zoo.create(conn)
    server.flush_logs()
    files = server.binlog_files()[:-1]
    # The land job's columnar decoder and images agree with the row dicts checked below.
    compared = sum((assert_columnar_equals_dicts(f) for f in files), collections.Counter())
    assert sum(assert_land_images_equal_reference(f) for f in files) == sum(compared.values()) > 20
    if "options" in options:
        assert set(compared) & {166, 167, 168, 169, 170, 171}  # MariaDB compressed rows events
    jsonl = _dump(files, "jsonl")
    with monkeypatch.context() as m:  # the native emitter renders exactly what the Python reference does
        m.setattr(native, "native", None)
        assert _dump(files, "jsonl") == jsonl
    replayed = zoo.replay(jsonl, db)
    for name, cols in zoo.TABLES.items():
        expected = zoo.server_state(conn, name)
        got = replayed[name]
        assert sorted(got) == sorted(expected), name
        for pk, row in expected.items():
            for col, sqltype in cols:
                ours = zoo.canonical(col, sqltype, got[pk][col], True)
                theirs = zoo.canonical(col, sqltype, row[col], False)
                assert ours == theirs, f"{name}.{col} id={pk}: ours {got[pk][col]!r}, server {row[col]!r}"
    # Row counts per table and operation agree with mariadb-binlog --verbose.
    ours_counts: collections.Counter = collections.Counter()
    for line in jsonl.splitlines():
        ev = orjson.loads(line)
        if ev.get("database") == db and "rows" in ev:
            ours_counts[(ev["type"].split("_")[0].replace("write", "insert"), ev["table"])] += len(ev["rows"])
    assert ours_counts == verbose_counts(files, db)
    assert sum(ours_counts.values()) > 20


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL", "NO_LOG"])
def test_type_zoo_through_kafka_equals_the_servers_select_on_every_row_metadata(make_mariadb, kafka, capfdbinary,
                                                                              metadata) -> None:
    """``binlake run`` then ``binlake consume``: with FULL row metadata the TABLE_MAPs say everything; with
    MINIMAL (charsets and signedness, no names or labels) and NO_LOG (MariaDB's default: nothing) the schema
    history adds what they lack, so BINARY/VARBINARY/BLOBs stay bytes and text decodes in its charset."""
    from ingester.cli.main import main

    server = make_mariadb(binlog_row_metadata=metadata)
    db = "zoo"
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    zoo.create(conn, rows=False)
    prefix = f"zoo{metadata.lower().replace('_', '')}"
    run = ["run", "--source", server.url, "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--server-id", "4646",
           "--exit-at-end"]
    assert main(run) == 0  # the schema history (MINIMAL, NO_LOG) is captured here: it streams from this point
    zoo.write(conn)
    assert main(run) == 0
    assert main(["consume", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--from-beginning",
                 "--exit-at-end"]) == 0
    out, err = capfdbinary.readouterr()
    assert b"no character set known" not in err
    zoo.assert_replay_equals_select(zoo.replay(out, db), conn)


@pytest.mark.parametrize("metadata", ["MINIMAL", "NO_LOG"])
def test_bare_files_without_full_metadata_decode_alike_in_c_and_python(make_mariadb, monkeypatch, caplog,
                                                                       metadata) -> None:
    """``binlake dump`` of the files alone (no schema history): the C emitter and column walker agree with the
    Python reference; on NO_LOG the strings whose charset nobody gives keep the server's bytes (base64),
    and the log (stderr) says so once per table."""
    server = make_mariadb(binlog_row_metadata=metadata)
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    conn = server.connect("zoo")
    zoo.create(conn)
    server.flush_logs()
    files = server.binlog_files()[:-1]
    compared = sum((assert_columnar_equals_dicts(f) for f in files), collections.Counter())
    assert sum(assert_land_images_equal_reference(f) for f in files) == sum(compared.values()) > 20
    caplog.clear()
    monkeypatch.setattr(charset_notices, "_noticed", set())  # said once per table and process: this process anew
    jsonl = _dump(files, "jsonl")
    err = caplog.text
    with monkeypatch.context() as m:
        m.setattr(native, "native", None)
        assert _dump(files, "jsonl") == jsonl
    strs = {}  # the last image of each strs row, by @1 (its id)
    for line in jsonl.splitlines():
        ev = orjson.loads(line)
        if ev.get("table") == "strs" and "rows" in ev:
            strs.update({row["after"]["@1"]: row["after"] for row in ev["rows"] if "after" in row})
    with conn.cursor() as cur:
        cur.execute("SELECT vc, HEX(vb) FROM strs WHERE id = 1")
        vc, vb = cur.fetchone()
    # strs: id, c, vc, vl, vb, ... (positions: @3 is vc, @5 is vb)
    if metadata == "NO_LOG":
        assert base64.b64decode(strs[1]["@3"]) == vc.encode() and err.count("`zoo`.`strs`: no character set") == 1
    else:  # MINIMAL logs charsets: text is text, binary is bytes
        assert strs[1]["@3"] == vc and "no character set" not in err
    assert base64.b64decode(strs[1]["@5"]).hex().upper() == vb
