"""filters.columns on snapshot rows: the initial snapshot and an on-demand re-snapshot publish each masked
column exactly as the binlog path publishes it for the same row (which tests/integration/test_mask_kafka.py
checks against the server's SELECT), and no secret value reaches any Kafka record."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time

import orjson
import pytest
from kafka import KafkaConsumer

from ingester.cli.consume import committed_record_events
from ingester.cli.main import main
from ingester.codec import events as E

pytestmark = pytest.mark.integration
KEY = "Sm4MaskKey"
RULES = {"sm.t.vc": "hash", "sm.t.vb": "hash", "sm.t.n": "hash", "sm.t.c": "mask", "sm.t.tx": "exclude",
         "sm.t.d": "exclude", "sm.t.dt": "mask"}
# Every value written to a masked column: none of these bytes may appear in Kafka.
# (n's values are 7700000000 + i: nine digits of them, where seven also occur in a microsecond timestamp by chance)
SECRETS = (b"Zq8Sec", b"770000000", b"12345.6", b"2031-07-17")


def _rows(bootstrap: str, prefix: str) -> dict[str, list[tuple[int, dict]]]:
    """Rows of sm.t by event kind, in sequence order: (id, row) pairs."""
    out: dict[str, list[tuple[int, dict]]] = collections.defaultdict(list)
    for item in committed_record_events(bootstrap, prefix):
        if isinstance(item.event, E.RowsEvent) and item.event.database == "sm":
            out[item.event.kind] += [(r["after"]["id"], r["after"]) for r in item.event.rows]
    return out


def test_snapshot_and_resnapshot_rows_are_masked_like_binlog_rows(make_mariadb, kafka, tmp_path,
                                                                  monkeypatch) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE sm CHARACTER SET utf8mb4")
    server.execute("CREATE DATABASE binlake")
    server.execute("CREATE TABLE sm.t (id INT PRIMARY KEY, vc VARCHAR(64), vb VARBINARY(64), n BIGINT NOT NULL,"
                   " c CHAR(10), tx TEXT, d DECIMAL(10,2) NOT NULL, dt DATETIME NOT NULL, keep VARCHAR(20))")
    with server.connect("sm") as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", [
            (i, f"Zq8SecVc{i}", f"Zq8SecVb{i}".encode(), 7700000000 + i, "Zq8SecC", f"Zq8SecTx{i}" * 3,
             "12345.67", f"2031-07-17 10:00:{i:02d}", f"keep{i}") for i in range(1, 21)]
            + [(21, None, None, -7700000021, None, None, "-12345.60", "2031-07-17 00:00:00", None)])
        conn.commit()
    config = tmp_path / "binlake.yaml"
    config.write_text(orjson.dumps({"filters": {"columns": RULES}, "snapshot_signal_table": "binlake.signal"}).decode())
    monkeypatch.setenv("BINLAKE_MASK_KEY", KEY)
    common = ["--config", str(config), "--source", server.url, "--kafka", kafka.bootstrap]
    # The binlog path: the inserts streamed from the start of the binlog.
    assert main(["run", *common, "--topic-prefix", "smbin", "--server-id", "5454", "--exit-at-end"]) == 0
    # The snapshot path, then a re-snapshot of the table while the daemon streams.
    assert main(["run", *common, "--topic-prefix", "smsnap", "--server-id", "5454", "--exit-at-end",
                 "--snapshot", "initial"]) == 0
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-m", "ingester.cli.main", "run", *common, "--topic-prefix", "smsnap",
                             "--server-id", "5455"], env=env, stderr=subprocess.DEVNULL)
    try:
        assert main(["snapshot", "--source", server.url, "--signal-table", "binlake.signal", "--tables", "sm.t"]) == 0
        deadline = time.monotonic() + 60
        while len(_rows(kafka.bootstrap, "smsnap")["read"]) < 42:
            assert time.monotonic() < deadline and proc.poll() is None, "the re-snapshot did not finish"
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0

    binlog = dict(_rows(kafka.bootstrap, "smbin")["write"])
    reads = _rows(kafka.bootstrap, "smsnap")["read"]
    assert len(binlog) == 21 and len(reads) == 42  # the snapshot's rows, then the re-snapshot's
    for pk, row in reads:
        assert row == binlog[pk], (pk, row, binlog[pk])
    sample = binlog[1]
    assert sample["tx"] is None and sample["c"] == "****" and sample["keep"] == "keep1"  # the rules took effect
    assert sample["vc"] != "Zq8SecVc1" and sample["n"] != 7700000001 and sample["d"] == "0.00"

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000, isolation_level="read_committed")
    topics = [t for t in consumer.topics() if t.startswith(("smbin.", "smsnap."))]
    consumer.subscribe(topics)
    records = 0
    for msg in consumer:
        records += 1
        data = (msg.key or b"") + (msg.value or b"") + b"".join(k.encode() + v for k, v in msg.headers or ())
        assert not [s for s in SECRETS if s in data], f"{msg.topic}@{msg.offset} holds a masked value"
    consumer.close()
    assert records
