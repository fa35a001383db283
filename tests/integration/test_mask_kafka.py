"""filters.columns on the real MariaDB (compressed binlog events) and Kafka: values written to masked columns
appear in no Kafka record's bytes, masked columns hold the documented replacement computed from the server's
SELECT, and every other column equals the server's SELECT (the type-zoo tables)."""

from __future__ import annotations

import fnmatch
import hashlib
import hmac

import orjson
import pytest
from kafka import KafkaConsumer

from ingester.cli.main import main
from tests.harness import zoo

pytestmark = pytest.mark.integration
KEY = "Zq7MaskKey"
SECRET = b"Zq7Sec"  # every value written to a masked column below starts with it
RULES = {"zoo.strs.vc": "hash", "zoo.strs.vcc": "hash", "zoo.strs.c": "mask", "zoo.strs.tx": "mask",
         "zoo.strs.bb": "exclude", "zoo.ints.i": "exclude", "zoo.nums.d*": "mask", "zoo.times.t3": "mask",
         "zoo.geo.p": "exclude", "zoo.strs.cu": "mask"}


def _hash(value: str | None) -> str | None:
    return None if value is None else hmac.new(KEY.encode(), value.encode(), hashlib.sha256).hexdigest()


@pytest.mark.parametrize("settings", [
    {},
    {"options": {"log_bin_compress": "ON", "log_bin_compress_min_len": 10}},
    {"binlog_row_metadata": "MINIMAL"},  # column names from the schema history
    {"binlog_row_metadata": "NO_LOG"},  # charsets too (the mask of the ucs2 column is ucs2)
], ids=["plain", "compressed-events", "minimal-metadata", "no-log-metadata"])
def test_masked_values_never_reach_kafka(make_mariadb, kafka, tmp_path, monkeypatch, capsys, settings) -> None:
    server = make_mariadb(**settings)
    prefix = "mask-" + "-".join(map(str, settings)) if settings else "mask-plain"
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    conn = server.connect("zoo")
    config = tmp_path / "binlake.yaml"
    config.write_text(orjson.dumps({"filters": {"columns": RULES}}).decode())
    monkeypatch.setenv("BINLAKE_MASK_KEY", KEY)
    run = ["run", "--config", str(config), "--source", server.url, "--kafka", kafka.bootstrap,
           "--topic-prefix", prefix, "--server-id", "4243", "--exit-at-end"]
    if "binlog_row_metadata" in settings:  # the history starts here and follows the CREATEs
        assert main(run) == 0
    zoo.create(conn)
    with conn.cursor() as cur:
        for pk in (900, 901):
            cur.execute("INSERT INTO strs (id, vc, vcc, c, tx, bb, vb) VALUES (%s, %s, REPEAT(%s, 20), %s, %s, %s, "
                        "'keep')", (pk, f"Zq7SecVc{pk}", "Zq7SecVcc", "Zq7SecC", f"Zq7SecTx{pk}", b"Zq7SecBb"))
        cur.execute("UPDATE strs SET vc = 'Zq7SecVcNew', tx = 'Zq7SecTxNew' WHERE id = 900")
        cur.execute("DELETE FROM strs WHERE id = 901")
    assert main(run) == 0
    err = capsys.readouterr().err
    assert KEY not in err

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000, isolation_level="read_committed")
    topics = [t for t in consumer.topics() if t.startswith(prefix + ".")]
    assert f"{prefix}.zoo.strs" in topics
    consumer.subscribe(topics)
    records = 0
    for msg in consumer:
        records += 1
        data = (msg.key or b"") + (msg.value or b"") + b"".join(k.encode() + v for k, v in msg.headers or ())
        assert SECRET not in data, f"{msg.topic}@{msg.offset} holds a masked value"
    consumer.close()
    assert records

    assert main(["consume", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--from-beginning",
                 "--exit-at-end"]) == 0
    replayed = zoo.replay(capsys.readouterr().out.encode(), "zoo")
    with conn.cursor() as cur:
        cur.execute("SELECT id, vc, vcc FROM strs")
        originals = {pk: (vc, vcc) for pk, vc, vcc in cur.fetchall()}
    assert originals[900][0] == "Zq7SecVcNew" and 901 not in originals
    masked = 0
    for name, cols in zoo.TABLES.items():
        expected = zoo.server_state(conn, name)
        assert sorted(replayed[name]) == sorted(expected), name
        for pk, row in expected.items():
            for col, sqltype in cols:
                got = replayed[name][pk][col]
                rule = next((a for p, a in RULES.items() if fnmatch.fnmatchcase(f"zoo.{name}.{col}", p)), None)
                if rule is None:
                    assert zoo.canonical(col, sqltype, got, True) == zoo.canonical(col, sqltype, row[col], False), \
                        f"{name}.{col} id={pk}"
                    continue
                masked += 1
                if row[col] is None or rule == "exclude":
                    assert got is None, f"{name}.{col} id={pk}"
                elif rule == "hash":
                    assert got == _hash(originals[pk][0 if col == "vc" else 1]), f"{name}.{col} id={pk}"
                elif col in ("c", "tx", "cu"):  # in the column's charset (cu: ucs2)
                    assert got == "****", f"{name}.{col} id={pk}"
                else:  # a nullable number masked: NULL
                    assert got is None, f"{name}.{col} id={pk}"
    assert masked > 20
