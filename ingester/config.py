"""One typed configuration for every command: defaults < YAML file < BINLAKE_* environment < flags.

Secrets (the source password) come from the URL, ``BINLAKE_SOURCE_PASSWORD`` or a file named by
``password_file`` (Kafka's SASL password: ``kafka.sasl_password``, ``BINLAKE_KAFKA_SASL_PASSWORD`` or
``kafka.sasl_password_file``); ``Config.redacted()`` is what may be logged.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import yaml

from .records.mask import ColumnRules
from .sources.replication import redact


@dataclass
class SourceConfig:
    url: str = field(default="mysql://root@127.0.0.1:3306", repr=False)  # may hold the password: see __repr__
    password_file: str | None = None
    server_id: int = 54321  # our replica id: must differ from every server and replica
    heartbeat: float = 5.0  # seconds; a stream silent for 3 heartbeats is treated as dead
    start_file: str | None = None  # only used when there is no checkpoint yet
    start_position: int = 4
    resume: str = "position"  # or "gtid": resume by executed GTIDs, e.g. after failing over to a replica
    # host:port of further servers with the same GTID history (replicas), tried in order after the URL's
    # own when it cannot be reached; same user, password and TLS settings; the daemon then resumes by GTIDs
    hosts: list[str] = field(default_factory=list)
    # TLS to the source; unset: what the URL says (?tls=...), by default verify-identity.
    tls: str | None = None  # verify-identity | verify-ca | required | preferred | disabled
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    def __repr__(self) -> str:  # the URL without its password, in logs and exception texts alike
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
        return f"SourceConfig(url={redact(self.url)!r}, " + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"


@dataclass
class KafkaConfig:
    bootstrap: str = "127.0.0.1:9092"
    topic_prefix: str = "binlake"
    transactional_id: str | None = None  # default: "<topic_prefix>.<source host:port>"
    # Group commit: a Kafka transaction commits as soon as the previous one has, holding every binlog
    # transaction completed meanwhile; batch_ms > 0 also waits at least that long between commits.
    batch_ms: int = 0
    max_record_bytes: int = 900_000
    compression: str | None = "zstd"  # kafka-python uses the zstandard package we already depend on
    # Security of every Kafka client (daemon, consume): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)  # secret: BINLAKE_KAFKA_SASL_PASSWORD or the file
    sasl_password_file: str | None = None
    ssl_cafile: str | None = None  # CA to verify the brokers (default: the system's)
    ssl_certfile: str | None = None  # client certificate (mutual TLS)
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments for these security settings (empty for PLAINTEXT)."""
        protocol = self.security_protocol.upper()
        if protocol not in KAFKA_PROTOCOLS:
            raise ValueError(f"kafka.security_protocol: {self.security_protocol!r} is not one of "
                             f"{', '.join(KAFKA_PROTOCOLS)}")
        options: dict[str, Any] = {}
        if protocol == "PLAINTEXT":
            return options
        # A secured listener may drop a client's first connection before answering; retry within a second
        # (kafka-python's backoff grows to 30 s) so the real cause, e.g. refused credentials, is what surfaces.
        options |= {"security_protocol": protocol, "reconnect_backoff_max_ms": 1000}
        if protocol.startswith("SASL"):
            mechanism = (self.sasl_mechanism or "").upper()
            if mechanism not in SASL_MECHANISMS:
                raise ValueError(f"kafka.sasl_mechanism: {self.sasl_mechanism!r} is not one of "
                                 f"{', '.join(SASL_MECHANISMS)} (needed by {protocol})")
            password = self.sasl_password
            if password is None and self.sasl_password_file:
                password = Path(self.sasl_password_file).read_text().strip()
            if not self.sasl_username or password is None:
                raise ValueError(f"kafka: {mechanism} needs sasl_username and sasl_password (or sasl_password_file)")
            options |= {"sasl_mechanism": mechanism, "sasl_plain_username": self.sasl_username,
                        "sasl_plain_password": password}
        if protocol.endswith("SSL"):
            options |= {"ssl_cafile": self.ssl_cafile, "ssl_certfile": self.ssl_certfile,
                        "ssl_keyfile": self.ssl_keyfile, "ssl_check_hostname": self.ssl_check_hostname}
        return options


KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class FilterConfig:
    include: list[str] = field(default_factory=lambda: ["*.*"])  # db.table glob patterns
    exclude: list[str] = field(default_factory=lambda: ["mysql.*", "sys.*", "performance_schema.*"])
    # db.table.column glob -> exclude | hash | mask: rows events rewritten before Kafka (records/mask.py)
    columns: dict[str, str] = field(default_factory=dict)
    mask_key: str | None = field(default=None, repr=False)  # secret HMAC key of hash: BINLAKE_MASK_KEY

    def column_rules(self) -> ColumnRules | None:
        """The compiled ``columns`` rules (None without any); raises ValueError for a bad rule."""
        if not self.columns:
            return None
        return ColumnRules(dict(self.columns), (self.mask_key or "").encode())

    def accepts(self, database: str, table: str) -> bool:
        name = f"{database}.{table}"
        return any(fnmatch.fnmatchcase(name, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(name, p) for p in self.exclude)


@dataclass
class LandConfig:
    """``binlake land``: Kafka topics -> Delta Lake (docs/LAND.md)."""

    lake: str | None = None  # root of the Delta tables: <lake>/<db>/<table>[__changes]
    checkpoint: str | None = None  # Spark's checkpoint: the query's progress; one per lake
    trigger: str = "1s"  # micro-batch interval, or "available-now": land what is committed, then stop
    quarantine: bool = False  # undecodable records go to <lake>/_quarantine instead of stopping the query
    min_partitions: int | None = None  # Kafka source minPartitions: decode one hot table in many tasks
    max_offsets_per_trigger: int | None = None  # bound a micro-batch (e.g. the first run on a backlog)
    # the stream's Kafka source (docs/LAND.md): "binlake" (a task per core, one consumer each: batches that
    # touch many tables), "spark" (a task per topic partition: a few hot tables), or "auto": binlake's where
    # the topics have KAFKA_SOURCE_PARTITIONS partitions or more when the job starts; max_offsets_per_trigger
    # takes Spark's
    kafka_source: str = "auto"
    master: str = "local[2]"  # Spark master for `binlake land`; spark-submit sets its own
    shuffle_partitions: int = 2
    # a table's micro-batch of at most this many row changes has its mirror rows reduced and, when they
    # only add keys, appended by the driver (fast); larger ones go through Spark's jobs (bounded memory)
    driver_rows: int = 1_000_000
    # "<db>.<table>" -> the columns that key its mirror, for tables without a primary key or a UNIQUE index
    # of NOT NULL columns (docs/LAND.md, "Mirrors"); they replace the table's own key
    keys: dict[str, list[str]] = field(default_factory=dict)
    # a lake on S3 or an S3-compatible store (s3a://bucket/...): its endpoint (None: AWS by region), path-style
    # addressing, region, and an AWS shared-credentials file (else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
    s3_endpoint: str | None = None
    s3_path_style: bool = False
    s3_region: str | None = None
    s3_credentials_file: str | None = None


@dataclass
class SchemaConfig:
    """Schema history, for servers whose TABLE_MAPs carry no column names (README, "Schema history")."""

    history: str = "auto"  # auto: when binlog_row_metadata is not FULL; always; never
    on_unparsed_ddl: str = "stop"  # or skip-table: stop publishing the tables such DDL names


@dataclass
class Config:
    source: SourceConfig = field(default_factory=SourceConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    land: LandConfig = field(default_factory=LandConfig)
    schema: SchemaConfig = field(default_factory=SchemaConfig)
    exit_at_end: bool = False
    metrics_port: int | None = None  # serve /metrics, /healthz, /readyz on this port
    metrics_host: str = "127.0.0.1"
    log_format: str = "text"  # or "json": one JSON object per line, for log pipelines
    # the libraries' own log lines (Kafka client, Spark) go to files here, not to the terminal (cli/logs.py);
    # None: ~/.cache/binlake/logs; verbose: to the terminal too
    log_dir: str | None = None
    verbose: bool = False
    # initial: snapshot the selected tables when there is no checkpoint; when-needed: also when the
    # checkpoint's binlog has been purged; never: stream only (from source.start_file).
    snapshot: str = "never"
    snapshot_chunk_rows: int = 5000  # rows per primary-key chunk (fewer when rows are large)
    # "<db>.<table>" of the signal table: its rows ask for on-demand re-snapshots (None: feature off)
    snapshot_signal_table: str | None = None

    def source_url(self, url: str | None = None) -> str:
        """The source URL (or ``url``, one of ``source_candidates()``) with the password (from the environment
        or file) and the TLS settings filled in."""
        url = self.source.url if url is None else url
        tls = {name: value for name, value in (("tls", self.source.tls), ("tls-ca", self.source.tls_ca),
                                               ("tls-cert", self.source.tls_cert), ("tls-key", self.source.tls_key))
               if value is not None}
        if tls:
            parts = urlsplit(url)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()} | tls
            url = parts._replace(query=urlencode(query)).geturl()
        password = os.environ.get("BINLAKE_SOURCE_PASSWORD")
        if password is None and self.source.password_file:
            password = Path(self.source.password_file).read_text().strip()
        if password is None:
            return url
        parts = urlsplit(url)
        netloc = f"{quote(parts.username or 'root', safe='')}:{quote(password, safe='')}@{parts.hostname}"
        if parts.port:
            netloc += f":{parts.port}"
        return parts._replace(netloc=netloc).geturl()

    def source_candidates(self) -> list[str]:
        """The URL (password not filled in) of each server to replicate from, in order of preference: the
        URL's own, then ``source.hosts``."""
        parts = urlsplit(self.source.url)
        auth = parts.netloc.rpartition("@")[0]
        seen, out = {f"{parts.hostname}:{parts.port or 3306}"}, [self.source.url]
        for host in self.source.hosts:
            name, _, port = host.strip().rpartition(":")
            if not name or not port.isdigit() or any(c in name for c in "/@?"):
                raise ValueError(f"source.hosts: {host!r} is not HOST:PORT")
            if f"{name}:{port}" not in seen:
                seen.add(f"{name}:{port}")
                out.append(parts._replace(netloc=(f"{auth}@" if auth else "") + f"{name}:{port}").geturl())
        return out

    def redacted(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["source"]["url"] = redact(self.source.url)
        if d["kafka"]["sasl_password"] is not None:
            d["kafka"]["sasl_password"] = "***"
        if d["filters"]["mask_key"] is not None:
            d["filters"]["mask_key"] = "***"
        return d


def _merge(obj: Any, values: dict[str, Any], where: str) -> None:
    names = {f.name: f for f in dataclasses.fields(obj)}
    for key, value in values.items():
        key = key.replace("-", "_")
        if key not in names:
            raise ValueError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(names))})")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ValueError(f"{where}: {key} must be a mapping")
            _merge(current, value, f"{where}.{key}")
        else:
            setattr(obj, key, _coerce(value, names[key].type, f"{where}.{key}"))


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    text = str(annotation)
    if value is None:
        return None
    if text.startswith("dict[str, list"):  # land.keys; from the environment as YAML: {db.t: [a, b]}
        try:
            return _key_columns(yaml.safe_load(value) if isinstance(value, str) else value, where)
        except yaml.YAMLError as exc:
            raise ValueError(f"{where}: not YAML ({str(exc).splitlines()[0]}): {value!r}") from None
    try:
        if text.startswith("bool"):
            if isinstance(value, str):
                if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                return value.lower() in ("1", "true", "yes", "on")
            return bool(value)
        if text.startswith("int"):
            return int(value)
        if text.startswith("float"):
            return float(value)
        if text.startswith("dict"):  # from the environment: "pattern=value,pattern=value"
            if isinstance(value, str):
                return dict(item.strip().split("=", 1) for item in value.split(",") if item.strip())
            return {str(k): str(v) for k, v in dict(value).items()}
        if text.startswith("list"):
            return [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: cannot use {value!r} as {text}") from None
    return value


def _key_columns(value: Any, where: str) -> dict[str, list[str]]:
    """``land.keys``: "<db>.<table>" -> its key columns (a list, or one name)."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: must map <db>.<table> to its key columns, got {value!r}")
    out: dict[str, list[str]] = {}
    for table, columns in value.items():
        if not isinstance(table, str) or "." not in table.strip("."):
            raise ValueError(f"{where}: {table!r} is not <db>.<table>")
        names = [columns] if isinstance(columns, str) else columns
        if not isinstance(names, list) or not names or not all(isinstance(c, str) and c for c in names):
            raise ValueError(f"{where}: {table}: the key must be a column name or a list of them, got {columns!r}")
        if len({c.lower() for c in names}) < len(names):
            raise ValueError(f"{where}: {table}: a column is named twice in {names}")
        out[table] = list(names)
    return out


def load_config(path: str | os.PathLike[str] | None = None, overrides: dict[str, Any] | None = None,
                environ: dict[str, str] | None = None) -> Config:
    """Defaults, then the YAML file, then BINLAKE_<SECTION>_<NAME> variables, then ``overrides``
    (nested dicts, as the CLI builds them from its flags)."""
    config = Config()
    if path:
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: the configuration must be a mapping")
        _merge(config, data, str(path))
    env = os.environ if environ is None else environ
    from_env: dict[str, Any] = {}
    sections = {f.name for f in dataclasses.fields(Config) if dataclasses.is_dataclass(getattr(config, f.name))}
    for key, value in env.items():
        if not key.startswith("BINLAKE_") or key == "BINLAKE_SOURCE_PASSWORD":
            continue
        if key == "BINLAKE_MASK_KEY":
            from_env.setdefault("filters", {})["mask_key"] = value
            continue
        name = key[len("BINLAKE_"):].lower()
        section, _, rest = name.partition("_")
        if section in sections and rest:
            from_env.setdefault(section, {})[rest] = value
        elif name == "source":  # BINLAKE_SOURCE=mysql://... as a shorthand for the URL (before: a section)
            from_env.setdefault("source", {}).setdefault("url", value)
        elif name in {f.name for f in dataclasses.fields(Config)}:
            from_env[name] = value
    _merge(config, from_env, "environment")
    if overrides:
        _merge(config, overrides, "command line")
    config.kafka.client_options()  # a wrong security setting fails here, with its name
    if config.snapshot not in SNAPSHOT_MODES:
        raise ValueError(f"snapshot: {config.snapshot!r} is not one of {', '.join(SNAPSHOT_MODES)}")
    if config.schema.history not in SCHEMA_HISTORY_MODES:
        raise ValueError(f"schema.history: {config.schema.history!r} is not one of {', '.join(SCHEMA_HISTORY_MODES)}")
    if config.schema.on_unparsed_ddl not in ("stop", "skip-table"):
        raise ValueError(f"schema.on_unparsed_ddl: {config.schema.on_unparsed_ddl!r} is not stop or skip-table")
    config.filters.column_rules()  # a bad rule fails here, with its name
    config.source_candidates()  # a malformed source.hosts entry fails here, with its name
    if config.snapshot_chunk_rows < 1:
        raise ValueError(f"snapshot_chunk_rows: must be at least 1, got {config.snapshot_chunk_rows}")
    return config


SNAPSHOT_MODES = ("initial", "never", "when-needed")
SCHEMA_HISTORY_MODES = ("auto", "always", "never")
