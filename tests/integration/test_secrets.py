"""The source password never leaks: the daemon, `doctor` and `consume` run with a distinctive password
(in the URL, in BINLAKE_SOURCE_PASSWORD, in a password_file) through their error paths (wrong password,
unreachable server, unreachable Kafka) and a good run, and every log line, the metrics and health
endpoints, every Kafka record (values, keys, headers) and the exception texts are searched for it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from urllib.parse import quote

import pytest
from kafka import KafkaConsumer

from ingester.config import load_config
from ingester.daemon.kafka_io import read_checkpoint
from ingester.devstack import free_tcp_port
from ingester.sources.replication import ReplicationError, SourceURL
from tests.harness.daemon import BINLAKE
from tests.harness.land import store_env

pytestmark = pytest.mark.integration
CORE = "Zq7Secret4411"
PASSWORD = CORE + ":/@x"  # characters URLs must encode, to catch a half-done redaction
WRONG = "Zq7Secret9922wrong"


def _assert_clean(where: str, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    for secret in (CORE, "Zq7Secret9922", quote(PASSWORD, safe="")):
        assert secret.encode() not in data, f"{where} holds the password: {data[-2000:]!r}"


@pytest.fixture(autouse=True)
def log_files(tmp_path, monkeypatch):
    """The libraries' log files (the Kafka client's, Spark's: cli/logs.py) of every command a test runs, in
    a directory of its own: searched for the secrets too once the test has run."""
    logs = tmp_path / "logs"
    monkeypatch.setenv("BINLAKE_LOG_DIR", str(logs))
    yield logs
    for path in sorted(logs.rglob("*")) if logs.exists() else ():
        if path.is_file():
            _assert_clean(f"log file {path.name}", path.read_bytes())


@pytest.fixture
def server(make_mariadb):
    server = make_mariadb()
    server.execute("CREATE USER 'sec'@'%%' IDENTIFIED BY %s", (PASSWORD,))
    server.execute("GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'sec'@'%'")
    server.execute("CREATE DATABASE s")
    server.execute("CREATE TABLE s.t (id INT PRIMARY KEY, note VARCHAR(20))")
    server.execute("INSERT INTO s.t VALUES (1, 'one'), (2, 'two')")
    return server


def _ways(port: int, password: str, tmp_path) -> list[tuple[str, list[str], dict[str, str]]]:
    """(name, --source flags, environment) of the three ways to give a password."""
    tag = f"{port}-{len(password)}"
    pw_file = tmp_path / f"pw-{tag}"
    pw_file.write_text(password + "\n")
    config = tmp_path / f"cfg-{tag}.yaml"
    config.write_text(f"source:\n  password_file: {pw_file}\n")
    base = f"mysql://sec@127.0.0.1:{port}?tls=disabled"
    url = f"mysql://sec:{quote(password, safe='')}@127.0.0.1:{port}?tls=disabled"
    return [("url", ["--source", url], {}),
            ("env", ["--source", base], {"BINLAKE_SOURCE_PASSWORD": password}),
            ("file", ["--config", str(config), "--source", base], {})]


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([*BINLAKE, *args], env={**os.environ, "PYTHONPATH": os.getcwd(), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_error_paths_never_show_the_password(server, kafka, tmp_path) -> None:
    dead_kafka = f"127.0.0.1:{free_tcp_port()}"
    runs: list[tuple[str, subprocess.Popen, int | None]] = []  # (what, process, expected exit or None: stopped)
    for way, flags, env in _ways(server.port, WRONG, tmp_path):
        runs.append((f"doctor, wrong password, {way}", _start(["doctor", *flags], env), 2))
        runs.append((f"run, wrong password, {way}", _start(["run", *flags, "--kafka", kafka.bootstrap,
                                                            "--exit-at-end"], env), 2))
    url, env_way, file_way = _ways(free_tcp_port(), PASSWORD, tmp_path)
    runs.append(("doctor, unreachable, file", _start(["doctor", *file_way[1]], file_way[2]), 1))  # a NOT READY finding
    # a start's retries of the source (source.start_wait) log its error each time: never the password either
    runs.append(("run, unreachable, url", _start(["run", *url[1], "--kafka", kafka.bootstrap],
                                                 {**url[2], "BINLAKE_SOURCE_START_WAIT": "2"}), 2))
    url, env_way, file_way = _ways(server.port, PASSWORD, tmp_path)
    runs.append(("run, unreachable Kafka, env", _start(["run", *env_way[1], "--kafka", dead_kafka,
                                                        "--topic-prefix", "sec0"], env_way[2]), None))
    runs.append(("consume, unreachable Kafka, file", _start(["consume", "--config", file_way[1][1], "--kafka",
                                                             dead_kafka, "--topic-prefix", "sec0", "--exit-at-end"],
                                                            file_way[2]), 2))
    runs.sort(key=lambda run: run[2] is None)  # those that end on their own first, meanwhile Kafka retries
    for what, proc, expected in runs:
        if expected is None:  # a stop request ends the Kafka retries (within the client's 15 s max_block_ms)
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        _assert_clean(f"{what}: stdout", out)
        _assert_clean(f"{what}: stderr", err)
        if expected is not None:
            assert proc.returncode == expected, f"{what}: {proc.returncode} {err.decode()[-2000:]}"
            if what.startswith("doctor, unreachable"):  # a finding per server, on stdout
                lines = out.decode().strip().splitlines()
                assert lines[-1].startswith("NOT READY: mysql://sec@127.0.0.1:"), f"{what}: {lines}"
                assert any("connect" in line and "2003" in line for line in lines), f"{what}: {lines}"
                continue
            last = err.decode().strip().splitlines()[-1]
            if what.startswith("consume"):  # gives up on its own: one line naming the broker
                assert last.startswith(f"binlake: error: kafka {dead_kafka}"), f"{what}: {last}"
                continue
            reason = "1045" if "wrong password" in what else "2003"  # the server's own error, named
            assert last.startswith("binlake: error: mysql://sec@127.0.0.1:") and reason in last, f"{what}: {last}"
            if "unreachable" in what:
                assert last.endswith("(tried for 2 s: source.start_wait)"), f"{what}: {last}"
                assert b"trying again in" in err, f"{what}: {err.decode()[-2000:]}"
        else:
            assert b"127.0.0.1:" + dead_kafka.split(":")[1].encode() in err, f"{what}: {err.decode()[-2000:]}"


def test_good_run_logs_metrics_and_records_hold_no_password(server, kafka, tmp_path) -> None:
    metrics_port = free_tcp_port()
    url = f"mysql://sec:{quote(PASSWORD, safe='')}@127.0.0.1:{server.port}?tls=disabled"
    proc = _start(["run", "--source", url, "--kafka", kafka.bootstrap, "--topic-prefix", "sec1",
                   "--metrics-port", str(metrics_port), "--log-format", "json"], {})
    scraped = b""
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not read_checkpoint(kafka.bootstrap, "sec1",
                                                                   f"sec1.127.0.0.1:{server.port}"):
            time.sleep(0.5)
        for path in ("/metrics", "/healthz", "/readyz"):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}{path}", timeout=10) as r:
                    scraped += r.read()
            except urllib.error.HTTPError as exc:  # /readyz may say 503 while it catches up
                scraped += exc.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert b"binlake_" in scraped
    _assert_clean("metrics", scraped)
    _assert_clean("run stdout", out)
    _assert_clean("run stderr", err)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000, isolation_level="read_uncommitted")
    topics = [t for t in consumer.topics() if t.startswith("sec1.")]
    assert "sec1.s.t" in topics and "sec1._offsets" in topics
    consumer.subscribe(topics)
    count = 0
    for msg in consumer:
        count += 1
        _assert_clean(f"record {msg.topic}@{msg.offset}", (msg.key or b"") + (msg.value or b"") +
                      b"".join(k.encode() + v for k, v in msg.headers or ()))
    consumer.close()
    assert count >= 2


def test_exception_texts_and_reprs_hold_no_password(tmp_path, monkeypatch) -> None:
    url = f"mysql://sec:{quote(PASSWORD, safe='')}@127.0.0.1:{free_tcp_port()}?tls=disabled"
    cfg = load_config(None, {"source": {"url": url}})
    parsed = SourceURL.parse(cfg.source_url())
    assert parsed.password == PASSWORD  # the password is there, to be hidden
    for text in (repr(cfg), str(cfg), repr(cfg.redacted()), repr(parsed), str(parsed)):
        _assert_clean("config text", text)
    with pytest.raises(ReplicationError) as exc:
        parsed.connect(connect_timeout=2)
    _assert_clean("connect error", str(exc.value) + repr(exc.value))
    with pytest.raises(ValueError) as bad:
        SourceURL.parse(url + "&bogus=1")
    _assert_clean("URL error", str(bad.value))
    monkeypatch.setenv("BINLAKE_SOURCE_PASSWORD", PASSWORD)
    cfg = load_config(None, {"source": {"url": f"mysql://sec@127.0.0.1:{free_tcp_port()}"}})
    _assert_clean("config from the environment", repr(cfg) + repr(cfg.redacted()))


def test_the_object_stores_secret_key_never_shows(kafka, tmp_path) -> None:
    """An s3a:// lake's secret key (here from a shared-credentials file, land.s3_credentials_file) is in no
    output of `binlake land`: a good run (its configuration line, Spark's settings) and a wrong key."""
    from ingester.devstack.objectstore import ObjectStore
    from streaming_job.lake.files import LakeFiles
    from streaming_job.lake.object_store import ObjectStoreSettings

    with ObjectStore(tmp_path / "s3", secret_key=PASSWORD) as store:
        store.create_bucket("lake")
        for key, name in ((PASSWORD, "good"), (WRONG, "wrong")):
            credentials = tmp_path / f"{name}.credentials"
            credentials.write_text(f"[default]\naws_access_key_id = {store.access_key}\n"
                                   f"aws_secret_access_key = {key}\n")
            config = tmp_path / f"{name}.yaml"
            config.write_text(f"land:\n  s3_credentials_file: {credentials}\n  s3_endpoint: {store.endpoint}\n"
                              "  s3_path_style: true\n")
            env = store_env()  # the credentials file's, not the environment's
            done = subprocess.run([*BINLAKE, "land", "--config", str(config), "--kafka", kafka.bootstrap,
                                   "--topic-prefix", "secs3", "--lake", "s3a://lake/sec",
                                   "--checkpoint", "s3a://lake/sec/_checkpoint", "--trigger", "available-now"],
                                  env=env, capture_output=True, timeout=600, check=False)
            assert done.returncode == (0 if name == "good" else 2), done.stderr.decode()[-3000:]
            assert (tmp_path / "logs" / "land-spark.log").is_file()  # Spark's own lines: searched too
            _assert_clean(f"land stdout ({name} key)", done.stdout)
            _assert_clean(f"land stderr ({name} key)", done.stderr)
        settings = ObjectStoreSettings(store.endpoint, True, None, str(tmp_path / "good.credentials"))
        _assert_clean("settings and credentials", repr(settings) + repr(settings.credentials()))
        _assert_clean("lake files", repr(LakeFiles.of("s3a://lake/sec", settings)))
