"""``binlake status`` with neither the daemon nor the land job running: positions and lags as the server and the
broker report them (SHOW MASTER STATUS, SHOW BINARY LOGS, the topics' end offsets read here by a consumer of
our own), at three points: all landed, the server ahead of the daemon, the topics ahead of the land job."""

from __future__ import annotations

import orjson
import pytest
from kafka import KafkaConsumer, TopicPartition

from ingester.cli.main import main

pytestmark = pytest.mark.integration


def _status(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["status", *args, "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)


def _ends(kafka, prefix: str) -> dict[str, int]:
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, group_id=None)
    topics = [t for t in consumer.topics() if t.startswith(prefix + ".") and not t.startswith(prefix + "._")]
    parts = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t)]
    ends = consumer.end_offsets(parts)
    consumer.close()
    return {t: sum(e for tp, e in ends.items() if tp.topic == t) for t in topics}


def _binlog_bytes_after(server, file: str, position: int) -> int:
    logs = [(str(n), int(s)) for n, s, *_ in server.execute("SHOW BINARY LOGS")]
    names = [n for n, _ in logs]
    at = names.index(file)
    return logs[at][1] - position + sum(s for _, s in logs[at + 1:])


def test_status_without_running_processes(make_mariadb, kafka, spark, tmp_path, capsys) -> None:
    server = make_mariadb()
    server.execute("CREATE DATABASE st CHARACTER SET utf8mb4")
    for name in ("a", "b"):
        server.execute(f"CREATE TABLE st.{name} (id INT PRIMARY KEY, v INT)")
        server.execute(f"INSERT INTO st.{name} VALUES (1, 1), (2, 2)")
    prefix, lake = "status", tmp_path / "lake"
    common = ["--kafka", kafka.bootstrap, "--topic-prefix", prefix]
    status_args = ["--source", server.url, *common, "--lake", str(lake), "--checkpoint", str(lake / "_cp")]
    run = ["run", "--source", server.url, *common, "--server-id", "5353", "--exit-at-end"]
    assert main(run) == 0
    assert main(["land", *common, "--lake", str(lake), "--checkpoint", str(lake / "_cp"), "--trigger",
                 "available-now"]) == 0

    # Everything landed.
    s = _status(capsys, *status_args)
    now = server.current_binlog_position()
    assert s["servers"][0]["file"] == now.file and s["servers"][0]["position"] == now.position
    assert s["servers"][0]["gtids"] == server.execute("SELECT @@gtid_binlog_pos")[0][0]
    d = s["daemon"]
    assert (d["file"], d["position"], d["behind_bytes"], d["lag_s"]) == (now.file, now.position, 0, 0.0)
    ends = _ends(kafka, prefix)
    assert {t["topic"]: t["end_offset"] for t in s["tables"]} == ends
    assert {t["table"] for t in s["tables"]} == {"st.a", "st.b"}
    assert all(t["landed_offset"] == t["end_offset"] and t["behind_records"] == 0 and t["lag_s"] == 0
               for t in s["tables"])
    assert s["land"]["batch"] is not None and s["land"]["error"] is None

    # The server moves on: the daemon is behind by what SHOW BINARY LOGS says.
    for i in range(3, 8):
        server.execute(f"INSERT INTO st.a VALUES ({i}, {i})")
    s = _status(capsys, *status_args)
    assert s["daemon"]["behind_bytes"] == _binlog_bytes_after(server, now.file, now.position) > 0
    assert s["daemon"]["lag_s"] > 0

    # The daemon catches up; the land job has not run: table a is behind by the topic's new records.
    assert main(run) == 0
    s = _status(capsys, *status_args)
    assert s["daemon"]["behind_bytes"] == 0
    after = _ends(kafka, prefix)
    by_table = {t["table"]: t for t in s["tables"]}
    topic_a = f"{prefix}.st.a"
    assert by_table["st.a"]["behind_records"] == after[topic_a] - ends[topic_a] > 0
    assert by_table["st.a"]["landed_offset"] == ends[topic_a]
    assert by_table["st.a"]["lag_s"] > 0
    assert by_table["st.b"]["behind_records"] == 0

    # Text for people; the broker away: the server's part still shows, with one line naming the broker.
    capsys.readouterr()
    assert main(["status", *status_args]) == 0
    text = capsys.readouterr().out
    assert f"daemon {prefix}.127.0.0.1:{server.port}: committed" in text and "st.a" in text
    assert main(["status", "--source", server.url, "--kafka", "127.0.0.1:1", "--topic-prefix", prefix]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"source 127.0.0.1:{server.port}: binlog ")
    assert sum("kafka 127.0.0.1:1" in line for line in lines) == 1
