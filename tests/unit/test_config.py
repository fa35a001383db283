"""Configuration precedence: defaults < YAML < BINLAKE_* environment < command line."""

from __future__ import annotations

import datetime

import pytest

from ingester.config import load_config
from ingester.config_values import duration_seconds


def test_precedence_and_types(tmp_path) -> None:
    f = tmp_path / "binlake.yaml"
    f.write_text("source:\n  url: mysql://repl@db:3307\n  server_id: 100\nkafka:\n  topic_prefix: fromfile\n"
                 "filters:\n  include: ['shop.*']\nexit_at_end: true\n")
    env = {"BINLAKE_KAFKA_TOPIC_PREFIX": "fromenv", "BINLAKE_SOURCE_HEARTBEAT": "2.5", "HOME": "/x"}
    cfg = load_config(f, {"kafka": {"bootstrap": "k:1"}}, environ=env)
    assert cfg.source.url == "mysql://repl@db:3307" and cfg.source.server_id == 100
    assert cfg.source.heartbeat == 2.5
    assert cfg.kafka.topic_prefix == "fromenv" and cfg.kafka.bootstrap == "k:1"
    assert cfg.exit_at_end is True
    assert cfg.filters.accepts("shop", "orders") and not cfg.filters.accepts("crm", "x")


def test_unknown_or_bad_settings_are_named(tmp_path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("kafka:\n  bootstrapp: x\n")
    with pytest.raises(ValueError, match=r"bad.yaml.kafka: unknown setting 'bootstrapp'"):
        load_config(f, environ={})
    with pytest.raises(ValueError, match=r"environment.source.server_id: cannot use 'abc'"):
        load_config(None, environ={"BINLAKE_SOURCE_SERVER_ID": "abc"})


def test_enumerated_settings_are_checked_at_load_time_wherever_they_are_set(tmp_path, capsys) -> None:
    """A typo in an enumerated option (resume: gtdi used to mean resume by position) fails at load time with
    the key, where it was set, the value and the allowed values: YAML, environment and flags alike."""
    from ingester.cli.main import main
    from ingester.config import ConfigError

    f = tmp_path / "typo.yaml"
    f.write_text("source:\n  resume: gtdi\n")
    with pytest.raises(ConfigError, match=r"typo.yaml.source.resume: 'gtdi' is not one of position, gtid$"):
        load_config(f, environ={})
    with pytest.raises(ConfigError, match=r"environment.snapshot: 'inital' is not one of initial, never, when-needed"):
        load_config(None, environ={"BINLAKE_SNAPSHOT": "inital"})
    with pytest.raises(ConfigError, match=r"command line.land.kafka_source: 'sparks' is not one of auto, binlake"):
        load_config(None, {"land": {"kafka_source": "sparks"}}, environ={})
    with pytest.raises(ConfigError, match=r"environment.filters.columns\['db.t.c'\]: 'blur' is not one of exclude"):
        load_config(None, environ={"BINLAKE_FILTERS_COLUMNS": "db.t.c=blur"})
    with pytest.raises(ConfigError, match=r"land.trigger: 'soon' is neither an interval"):
        load_config(None, {"land": {"trigger": "soon"}}, environ={})
    with pytest.raises(ConfigError, match=r"source.server_id: cannot use 1.5 as int"):
        load_config(None, {"source": {"server_id": 1.5}}, environ={})
    with pytest.raises(ConfigError, match=r"environment.debezium.value_subject_name_strategy: 'RecordName' is not one"
                                          r" of TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy$"):
        load_config(None, environ={"BINLAKE_DEBEZIUM_VALUE_SUBJECT_NAME_STRATEGY": "RecordName"})
    # case does not matter; the canonical spelling is kept
    cfg = load_config(None, environ={"BINLAKE_SOURCE_RESUME": "GTID", "BINLAKE_KAFKA_SECURITY_PROTOCOL": "ssl",
                                     "BINLAKE_LOG_FORMAT": "Json"})
    assert (cfg.source.resume, cfg.kafka.security_protocol, cfg.log_format) == ("gtid", "SSL", "json")
    # an optional choice is switched off by name from the environment (a YAML null elsewhere)
    assert load_config(None, environ={"BINLAKE_KAFKA_COMPRESSION": "none"}).kafka.compression is None
    assert load_config(None, {"kafka": {"compression": None}}, environ={}).kafka.producer_compression() is None
    # auto: by the format
    assert load_config(None, environ={}).kafka.producer_compression() == "zstd"
    assert load_config(None, environ={"BINLAKE_KAFKA_FORMAT": "debezium-json"}).kafka.producer_compression() == "lz4"
    assert load_config(None, environ={"BINLAKE_KAFKA_FORMAT": "debezium-json",
                                      "BINLAKE_KAFKA_COMPRESSION": "zstd"}).kafka.producer_compression() == "zstd"
    # every command says it in one line (exit 2), not a traceback
    assert main(["run", "--config", str(f)]) == 2
    err = capsys.readouterr().err
    assert err == f"binlake: error: {f}.source.resume: 'gtdi' is not one of position, gtid\n", err


def test_secrets_never_in_the_redacted_view(tmp_path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("hunter2\n")
    cfg = load_config(None, {"source": {"url": "mysql://repl:inline-pw@db:3306", "password_file": str(secret)}},
                      environ={})
    assert "inline-pw" not in str(cfg.redacted())
    assert cfg.source_url() == "mysql://repl:hunter2@db:3306"
    env_cfg = load_config(None, {"source": {"url": "mysql://repl@db"}}, environ={})
    assert env_cfg.source_url() == "mysql://repl@db"


def test_json_logs_never_carry_the_password(capsys, tmp_path) -> None:
    import json
    import logging

    from ingester.cli.logs import setup_logging

    cfg = load_config(None, {"source": {"url": "mysql://repl:pa55word@db:3306"}, "log_format": "json",
                             "log_dir": str(tmp_path)}, environ={})
    setup_logging(cfg, "run")
    logging.getLogger("binlake.run").info("configuration: %s", json.dumps(cfg.redacted()))
    line = capsys.readouterr().err.strip().splitlines()[-1]
    entry = json.loads(line)
    assert entry["level"] == "INFO" and entry["logger"] == "binlake.run"
    assert "pa55word" not in line and "repl:***@db" in entry["message"]


def test_tls_settings_join_the_source_url_and_are_validated(monkeypatch) -> None:
    from ingester.sources.replication import SourceURL

    monkeypatch.setenv("BINLAKE_SOURCE_PASSWORD", "pw")
    assert SourceURL.parse("mysql://repl@db").tls == "verify-identity"  # verified unless told otherwise
    cfg = load_config(None, {"source": {"url": "mysql://repl@db:3306?tls=disabled", "tls": "verify-ca",
                                        "tls_ca": "/etc/ca.pem"}}, environ={})
    url = SourceURL.parse(cfg.source_url())
    assert (url.tls, url.tls_ca, url.password) == ("verify-ca", "/etc/ca.pem", "pw")
    env = load_config(None, {"source": {"url": "mysql://repl@db"}}, environ={"BINLAKE_SOURCE_TLS": "required"})
    assert SourceURL.parse(env.source_url()).tls == "required"
    with pytest.raises(ValueError, match="tls must be one of"):
        SourceURL.parse("mysql://repl@db?tls=sometimes")
    with pytest.raises(ValueError, match="unknown parameter sslmode"):
        SourceURL.parse("mysql://repl@db?sslmode=on")


def test_source_shorthand_variable_sets_the_url() -> None:
    """BINLAKE_SOURCE is the URL (README); BINLAKE_SOURCE_URL, more specific, wins over it."""
    assert load_config(None, environ={"BINLAKE_SOURCE": "mysql://u@h:1"}).source.url == "mysql://u@h:1"
    both = {"BINLAKE_SOURCE": "mysql://u@h:1", "BINLAKE_SOURCE_URL": "mysql://v@k:2"}
    assert load_config(None, environ=both).source.url == "mysql://v@k:2"
    assert load_config(None, environ=dict(reversed(both.items()))).source.url == "mysql://v@k:2"


def test_kafka_security_options_and_their_errors(tmp_path) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text("s3cret-file\n")
    env = {"BINLAKE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "BINLAKE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
           "BINLAKE_KAFKA_SASL_USERNAME": "alice", "BINLAKE_KAFKA_SASL_PASSWORD_FILE": str(password_file),
           "BINLAKE_KAFKA_SSL_CAFILE": "/ca.pem"}
    cfg = load_config(environ=env)
    assert cfg.kafka.client_options() == {
        "security_protocol": "SASL_SSL", "reconnect_backoff_max_ms": 1000, "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "s3cret-file", "ssl_cafile": "/ca.pem", "ssl_certfile": None, "ssl_keyfile": None,
        "ssl_check_hostname": True}
    cfg = load_config(environ={**env, "BINLAKE_KAFKA_SASL_PASSWORD": "s3cret-env"})
    assert cfg.kafka.client_options()["sasl_plain_password"] == "s3cret-env"
    assert "s3cret-env" not in repr(cfg) and cfg.redacted()["kafka"]["sasl_password"] == "***"
    assert load_config().kafka.client_options() == {}
    with pytest.raises(ValueError, match="security_protocol: 'TLS' is not one of"):
        load_config(environ={"BINLAKE_KAFKA_SECURITY_PROTOCOL": "TLS"})
    with pytest.raises(ValueError, match="sasl_mechanism: 'GSSAPI' is not one of"):
        load_config(environ={**env, "BINLAKE_KAFKA_SASL_MECHANISM": "GSSAPI"})
    with pytest.raises(ValueError, match="needs sasl_username and sasl_password"):
        load_config(environ={"BINLAKE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                             "BINLAKE_KAFKA_SASL_MECHANISM": "PLAIN"})


def test_failover_hosts_share_the_urls_credentials(monkeypatch) -> None:
    from ingester.sources.replication import SourceURL

    monkeypatch.setenv("BINLAKE_SOURCE_PASSWORD", "pw")
    cfg = load_config(None, {"source": {"url": "mysql://repl@db1:3306?tls=verify-ca"}},
                      environ={"BINLAKE_SOURCE_HOSTS": "db2:3307, db1:3306,db3:3306"})
    urls = [SourceURL.parse(cfg.source_url(u)) for u in cfg.source_candidates()]
    assert [(u.host, u.port, u.user, u.password, u.tls) for u in urls] == [
        ("db1", 3306, "repl", "pw", "verify-ca"), ("db2", 3307, "repl", "pw", "verify-ca"),
        ("db3", 3306, "repl", "pw", "verify-ca")]
    assert load_config(None, environ={}).source_candidates() == ["mysql://root@127.0.0.1:3306"]
    for bad in ("db2", "mysql://u@db2:3306"):
        with pytest.raises(ValueError, match=rf"source\.hosts: '{bad}' is not HOST:PORT"):
            load_config(None, {"source": {"hosts": [bad]}}, environ={})


def test_logs_follow_the_current_stderr_and_leave_py4j_chatter_out(monkeypatch) -> None:
    """An in-process CLI run must not leave a handler on a stream that is later closed."""
    import io
    import logging

    from ingester.cli.logs import setup_logging

    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stderr", first)
    setup_logging(load_config(None, {"verbose": True}, environ={}), "land")
    first.close()
    monkeypatch.setattr("sys.stderr", second)
    logging.getLogger("py4j.java_gateway").info("Exception while sending command.")
    logging.getLogger("binlake.run").info("after the swap")
    out = second.getvalue()
    assert "after the swap" in out and "Logging error" not in out and "py4j" not in out


def test_the_libraries_log_lines_go_to_a_file_unless_verbose(tmp_path, capsys) -> None:
    """The Kafka client's and py4j's lines are theirs, not binlake's: in <log_dir>/<command>.log, and on the
    terminal only with --verbose; binlake's own lines are on the terminal either way."""
    import logging

    from ingester.cli.logs import setup_logging

    path = setup_logging(load_config(None, {"log_dir": str(tmp_path)}, environ={}), "run")
    assert path == tmp_path / "run.log"
    logging.getLogger("kafka.conn").warning("Node 1 connection failed")
    logging.getLogger("py4j.clientserver").error("Error while sending or receiving")
    logging.getLogger("binlake.run").info("resuming at f:4")
    err = capsys.readouterr().err
    assert "resuming at f:4" in err and "Node 1" not in err and "py4j" not in err
    logged = path.read_text()
    assert "Node 1 connection failed" in logged and "Error while sending" in logged and "resuming" not in logged

    # a second run in this process (tests, notebooks) closes the first's file: no open file per run
    first = logging.getLogger("kafka").handlers[0]
    assert setup_logging(load_config(None, {"log_dir": str(tmp_path)}, environ={}), "run") == path
    assert first.stream is None and logging.getLogger("kafka").handlers[0] is not first  # type: ignore[attr-defined]

    assert setup_logging(load_config(None, {"log_dir": str(tmp_path), "verbose": True}, environ={}), "run") is None
    logging.getLogger("kafka.conn").warning("Node 2 connection failed")
    assert "Node 2 connection failed" in capsys.readouterr().err
    assert "Node 2" not in path.read_text()

    blocked = tmp_path / "file"
    blocked.write_text("")
    assert setup_logging(load_config(None, {"log_dir": str(blocked / "logs")}, environ={}), "run") is None
    assert f"cannot write logs in {blocked / 'logs'}" in capsys.readouterr().err


def test_compaction_and_retention_settings_are_checked_where_they_are_set(tmp_path, capsys) -> None:
    """land.compact_* and land.iceberg_*: typed and bounded at load time, a bad value named in one line with where
    it was set; they reach the Iceberg tables' upkeep and the Delta side's compaction."""
    from ingester.cli.main import main
    from ingester.config import ConfigError
    from streaming_job.iceberg.maintenance import IcebergMaintenance

    defaults = load_config(None, environ={}).land
    assert (defaults.compact_files, defaults.small_file_bytes, defaults.compact_bytes) == (None, 8 << 20, 256 << 20)
    assert IcebergMaintenance.of(defaults).compact_files == 4  # the format's own (Delta's: 32)
    f = tmp_path / "land.yaml"
    f.write_text("land:\n  compact_files: 5\n  iceberg_snapshot_retention: 30m\n  iceberg_metadata_versions: 3\n")
    land = load_config(f, {"land": {"compact_bytes": 1000}},
                       environ={"BINLAKE_LAND_SMALL_FILE_BYTES": "4096", "BINLAKE_LAND_ICEBERG_EXPIRE_EVERY": "7"}).land
    upkeep = IcebergMaintenance.of(land)
    assert (upkeep.compact_files, upkeep.small_file_bytes, upkeep.budget, upkeep.expire_every) == (5, 4096, 1000, 7)
    assert upkeep.retention == datetime.timedelta(minutes=30)
    assert upkeep.table_properties() == {"write.metadata.previous-versions-max": "3"}
    for value, seconds in (("90s", 90), ("1.5h", 5400), ("2d", 172800), ("250ms", 0.25), ("45", 45), ("0s", 0)):
        assert duration_seconds(value) == seconds, value
    with pytest.raises(ConfigError, match=rf"^{f}.land.compact_files: must be at least 2, got 1$"):
        f.write_text("land:\n  compact_files: 1\n")
        load_config(f, environ={})
    with pytest.raises(ConfigError, match=r"^environment.land.iceberg_snapshot_retention: 'an hour' is not a duration"):
        load_config(None, environ={"BINLAKE_LAND_ICEBERG_SNAPSHOT_RETENTION": "an hour"})
    assert load_config(None, environ={}).source.start_wait == 60.0
    assert load_config(None, environ={"BINLAKE_SOURCE_START_WAIT": "2.5"}).source.start_wait == 2.5
    with pytest.raises(ConfigError, match=r"^environment.source.start_wait: must be at least 0, got -1.0$"):
        load_config(None, environ={"BINLAKE_SOURCE_START_WAIT": "-1"})
    with pytest.raises(ConfigError, match=r"^command line.land.small_file_bytes: must be at least 1, got 0$"):
        load_config(None, {"land": {"small_file_bytes": 0}}, environ={})
    with pytest.raises(ConfigError, match=r"^environment.land.compact_bytes: cannot use '8MiB' as int$"):
        load_config(None, environ={"BINLAKE_LAND_COMPACT_BYTES": "8MiB"})
    # the flags, and one line from the command
    assert main(["land", "--lake", str(tmp_path), "--checkpoint", str(tmp_path / "cp"), "--compact-files", "0"]) == 2
    assert capsys.readouterr().err == "binlake: error: command line.land.compact_files: must be at least 2, got 0\n"
    assert defaults.key_memory == 512 << 20  # the mirrors' files' keys the driver keeps (land.key_memory)
    assert load_config(None, environ={"BINLAKE_LAND_KEY_MEMORY": str(2 << 30)}).land.key_memory == 2 << 30
    assert main(["land", "--lake", str(tmp_path), "--checkpoint", str(tmp_path / "cp"), "--key-memory", "0"]) == 2
    assert capsys.readouterr().err == "binlake: error: command line.land.key_memory: must be at least 1, got 0\n"
    assert main(["land", "--lake", str(tmp_path), "--checkpoint", str(tmp_path / "cp"),
                 "--iceberg-snapshot-retention", "soon"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("binlake: error: command line.land.iceberg_snapshot_retention: 'soon' is not a duration")


def test_a_rest_catalogs_token_or_credential_is_read_checked_and_never_shown(tmp_path) -> None:
    """land.iceberg_catalog_token / _credential: from the environment or a file, one of them, only with a REST
    catalog; redacted in the configuration line; pyiceberg's and Spark's properties, Spark's redaction covering
    the credential."""
    from ingester.config import ConfigError
    from streaming_job.iceberg.auth import RestAuth
    from streaming_job.iceberg.catalog import IcebergCatalog

    rest = {"BINLAKE_LAND_ICEBERG_CATALOG": "https://cat.example/api", "BINLAKE_LAND_FORMAT": "iceberg"}
    cfg = load_config(None, environ={**rest, "BINLAKE_LAND_ICEBERG_CATALOG_TOKEN": "tok-123"})
    assert RestAuth.of(cfg.land) == RestAuth(token="tok-123")
    assert "tok-123" not in str(cfg.redacted()) and "tok-123" not in repr(cfg) + repr(RestAuth.of(cfg.land))
    (tmp_path / "cred").write_text("client:sec-456\n")
    cfg = load_config(None, {"land": {"iceberg_catalog_credential_file": str(tmp_path / "cred"),
                                      "iceberg_catalog_scope": "PRINCIPAL_ROLE:ALL"}}, environ=rest)
    auth = RestAuth.of(cfg.land)
    assert auth is not None and auth.properties() == {"credential": "client:sec-456", "scope": "PRINCIPAL_ROLE:ALL"}
    conf = IcebergCatalog("/lake", "https://cat.example/api", auth=auth).spark_conf()
    assert conf["spark.sql.catalog.binlake.credential"] == "client:sec-456"
    assert "credential" in conf["spark.redaction.regex"] and "token" in conf["spark.redaction.regex"]
    assert RestAuth.of(load_config(None, environ=rest).land) is None  # an open server
    with pytest.raises(ConfigError, match=r"^land.iceberg_catalog_token and land.iceberg_catalog_credential: give one"):
        load_config(None, environ={**rest, "BINLAKE_LAND_ICEBERG_CATALOG_TOKEN": "t",
                                   "BINLAKE_LAND_ICEBERG_CATALOG_CREDENTIAL": "c:s"})
    with pytest.raises(ConfigError, match=r"^land.iceberg_catalog_token/credential: a REST catalog's authentication, "
                                          r"and land.iceberg_catalog is 'mysql\+pymysql://u:\*\*\*@h/db', not an"):
        load_config(None, environ={"BINLAKE_LAND_ICEBERG_CATALOG": "mysql+pymysql://u:pw@h/db",
                                   "BINLAKE_LAND_ICEBERG_CATALOG_TOKEN": "t", "BINLAKE_LAND_FORMAT": "iceberg"})
    assert load_config(None, environ={"BINLAKE_LAND_ICEBERG_CATALOG_TOKEN_FILE": "/none"})  # read for iceberg only
    with pytest.raises(ConfigError, match=r"^land.iceberg_catalog_token_file: cannot read .*/none: No such file"):
        load_config(None, environ={**rest, "BINLAKE_LAND_ICEBERG_CATALOG_TOKEN_FILE": str(tmp_path / "none")})
