"""One typed configuration for every command: defaults < YAML file < BINLAKE_* environment < flags.

Secrets (the source password) come from the URL, ``BINLAKE_SOURCE_PASSWORD`` or a file named by
``password_file`` (Kafka's SASL password: ``kafka.sasl_password``, ``BINLAKE_KAFKA_SASL_PASSWORD`` or
``kafka.sasl_password_file``; the schema registry's: ``debezium.schema_registry_password``, its variable or
``debezium.schema_registry_password_file``; a REST Iceberg catalog's token or OAuth2 credential:
``land.iceberg_catalog_token``/``_credential``, their variables or files); ``Config.redacted()`` is what may be
logged.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from .column_rules import ColumnRules
from .config_values import CHECKS, ConfigError, coerce, secret_file
from .redact import redact

SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
# Debezium's value-handling options (kafka.format debezium-json; records/debezium/columns.py)
DecimalMode = Literal["precise", "string", "double"]
TimeMode = Literal["adaptive_time_microseconds", "connect"]
BigintMode = Literal["long", "precise"]
BinaryMode = Literal["bytes", "base64", "base64-url-safe", "hex"]
SubjectStrategy = Literal["TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"]
# Debezium's skipped.operations that binlake follows: "t" (truncates), or "none" (Debezium's c, u, d are not offered)
SkippedOperation = Literal["t", "none"]


@dataclass
class SourceConfig:
    url: str = field(default="mysql://root@127.0.0.1:3306", repr=False)  # may hold the password: see __repr__
    password_file: str | None = None
    server_id: int = 54321  # our replica id: must differ from every server and replica
    heartbeat: float = 5.0  # seconds; a stream silent for 3 heartbeats is treated as dead
    # seconds a starting daemon keeps trying a source it cannot reach (a server still starting, a network not yet
    # up) before it stops with one line; 0: it stops at once. Once streaming, it retries for as long as it runs.
    start_wait: float = 60.0
    start_file: str | None = None  # only used when there is no checkpoint yet
    start_position: int = 4
    resume: Literal["position", "gtid"] = "position"  # gtid: by executed GTIDs, e.g. after failing over
    # host:port of further servers with the same GTID history (replicas), tried in order after the URL's
    # own when it cannot be reached; same user, password and TLS settings; the daemon then resumes by GTIDs
    hosts: list[str] = field(default_factory=list)
    # TLS to the source; unset: what the URL says (?tls=...), by default verify-identity.
    tls: Literal["verify-identity", "verify-ca", "required", "preferred", "disabled"] | None = None
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
    # auto: zstd for binlake's records (few and large: the best ratio), lz4 for Debezium's change events (a message
    # each: the least CPU a message, ~0.08 s of a 45,000-event run here); none (YAML null) for none
    compression: Literal["auto", "zstd", "gzip", "lz4", "snappy"] | None = "auto"
    # what the topics carry: binlake's records (docs/FORMAT.md), or Debezium's change events in Kafka Connect's
    # JSON layout or as Confluent's Avro converter writes them (docs/DEBEZIUM.md; options in the debezium section)
    format: Literal["binlake", "debezium-json", "debezium-avro"] = "binlake"
    # Security of every Kafka client (daemon, consume): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)  # secret: BINLAKE_KAFKA_SASL_PASSWORD or the file
    sasl_password_file: str | None = None
    ssl_cafile: str | None = None  # CA to verify the brokers (default: the system's)
    ssl_certfile: str | None = None  # client certificate (mutual TLS)
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True

    def producer_compression(self) -> str | None:
        """The producer's compression.type (``compression`` with auto resolved by the format)."""
        if self.compression == "auto":
            return "zstd" if self.format == "binlake" else "lz4"
        return self.compression

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments for these security settings (empty for PLAINTEXT)."""
        protocol = self.security_protocol
        options: dict[str, Any] = {}
        if protocol == "PLAINTEXT":
            return options
        # A secured listener may drop a client's first connection before answering; retry within a second
        # (kafka-python's backoff grows to 30 s) so the real cause, e.g. refused credentials, is what surfaces.
        options |= {"security_protocol": protocol, "reconnect_backoff_max_ms": 1000}
        if protocol.startswith("SASL"):
            mechanism = self.sasl_mechanism
            if mechanism is None:
                raise ConfigError(f"kafka.sasl_mechanism: one of {', '.join(get_args(SaslMechanism))} is needed by "
                                  f"{protocol}")
            password = self.sasl_password
            if password is None and self.sasl_password_file:
                password = Path(self.sasl_password_file).read_text().strip()
            if not self.sasl_username or password is None:
                raise ConfigError(f"kafka: {mechanism} needs sasl_username and sasl_password (or sasl_password_file)")
            options |= {"sasl_mechanism": mechanism, "sasl_plain_username": self.sasl_username,
                        "sasl_plain_password": password}
        if protocol.endswith("SSL"):
            options |= {"ssl_cafile": self.ssl_cafile, "ssl_certfile": self.ssl_certfile,
                        "ssl_keyfile": self.ssl_keyfile, "ssl_check_hostname": self.ssl_check_hostname}
        return options




@dataclass
class FilterConfig:
    include: list[str] = field(default_factory=lambda: ["*.*"])  # db.table glob patterns
    exclude: list[str] = field(default_factory=lambda: ["mysql.*", "sys.*", "performance_schema.*"])
    # db.table.column glob -> exclude | hash | mask: rows events rewritten before Kafka (records/mask.py)
    columns: dict[str, Literal["exclude", "hash", "mask"]] = field(default_factory=dict)
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
    # a micro-batch reads about this many bytes of Kafka records at most, whatever the backlog (binlake's Kafka
    # source; 0: all there is); max_offsets_per_trigger bounds it in records instead (Spark's source)
    max_batch_bytes: int = 64 << 20
    max_offsets_per_trigger: int | None = None
    # the stream's Kafka source (docs/LAND.md): "binlake" (a task per core, one consumer each, batches bounded in
    # bytes), "spark" (Spark's: a task per topic partition, batches bounded by max_offsets_per_trigger alone), or
    # "auto": binlake's where the topics have 8 partitions or more, or hold more than one batch of max_batch_bytes
    # past where the checkpoint's next batch starts; Spark's otherwise, and wherever max_offsets_per_trigger is set
    kafka_source: Literal["auto", "binlake", "spark"] = "auto"
    # what the topics hold (docs/DEBEZIUM.md, "Landing Debezium topics"): binlake's records, or Debezium's
    # change events in Kafka Connect's JSON converter layout with schemas, or in Avro with a schema registry
    # (debezium.schema_registry_*) (binlake's debezium formats or a real Debezium MySQL/MariaDB connector's);
    # repeats of an at-least-once producer are dropped by source position
    source_format: Literal["binlake", "debezium-json", "debezium-avro"] = "binlake"
    # the lake's table format (docs/LAND.md): Delta Lake, or Apache Iceberg (pyiceberg's writes, iceberg/catalog.py)
    format: Literal["delta", "iceberg"] = "delta"
    # format iceberg: the catalog's database, a SQLAlchemy URL (sqlite:///..., mysql+pymysql://user@host/db), or a
    # REST catalog (http(s)://...);
    # None: Iceberg's Hadoop catalog on a local lake's path (an earlier lake's <lake>/_iceberg_catalog.db is kept);
    # a lake on S3: SQLite at <checkpoint>/_iceberg_catalog.db, a local checkpoint.
    # Spark reads it as Iceberg's Hadoop, JDBC or REST catalog `binlake`
    iceberg_catalog: str | None = None
    # a REST catalog's authentication (docs/LAND.md, "Iceberg"): a bearer token, or an OAuth2 client credential
    # (client_id:client_secret, exchanged at the catalog's token endpoint or iceberg_catalog_oauth2_uri for a token
    # of iceberg_catalog_scope); secrets: BINLAKE_LAND_ICEBERG_CATALOG_TOKEN / _CREDENTIAL or the files, never logged
    iceberg_catalog_token: str | None = field(default=None, repr=False)
    iceberg_catalog_token_file: str | None = None
    iceberg_catalog_credential: str | None = field(default=None, repr=False)
    iceberg_catalog_credential_file: str | None = None
    iceberg_catalog_scope: str | None = None
    iceberg_catalog_oauth2_uri: str | None = None
    master: str = "local[2]"  # Spark master for `binlake land`; spark-submit sets its own
    shuffle_partitions: int = 2
    # a table's micro-batch of at most this many row changes has its mirror rows reduced and, when they
    # only add keys, appended by the driver (fast); larger ones go through Spark's jobs (bounded memory). A batch of
    # max_batch_bytes (64 MiB: about 1,700,000 row changes of a five-column table) lands on the driver, twice as fast
    # (bench/results/backlog.md)
    driver_rows: int = 4_000_000
    # "<db>.<table>" -> the columns that key its mirror, for tables without a primary key or a UNIQUE index
    # of NOT NULL columns (docs/LAND.md, "Mirrors"); they replace the table's own key
    keys: dict[str, list[str]] = field(default_factory=dict)
    # a lake on S3 or an S3-compatible store (s3a://bucket/...): its endpoint (None: AWS by region), path-style
    # addressing, region, and an AWS shared-credentials file (else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
    # an ALTER TABLE that is no safe widening of a column (text <-> binary, a narrowing, a DECIMAL scale, ENUM/SET
    # relabelled, another type family: docs/LAND.md, "Schema changes"): "rewrite" that table's mirror with each value
    # converted as the server did (its change log versioned where the new type cannot join it), or "stop" the job
    on_incompatible_change: Literal["rewrite", "stop"] = "rewrite"
    # a table statement that rewrites more than this many rows of a mirror (such an ALTER, an Iceberg rename's copy)
    # parks its table: the rewrite runs beside the micro-batches, which go on landing every other table, and the
    # table catches up from Kafka once it has committed (docs/LAND.md, "Parked tables"); 0: every rewrite, -1: none
    park_rows: int = 100_000
    s3_endpoint: str | None = None
    s3_path_style: bool = False
    s3_region: str | None = None
    s3_credentials_file: str | None = None

    def iceberg_catalog_auth(self) -> tuple[str | None, str | None]:
        """(bearer token, OAuth2 client credential) of the REST catalog, from the settings or their files."""
        token, credential = self.iceberg_catalog_token, self.iceberg_catalog_credential
        if token is None and self.iceberg_catalog_token_file:
            token = secret_file("land.iceberg_catalog_token_file", self.iceberg_catalog_token_file)
        if credential is None and self.iceberg_catalog_credential_file:
            credential = secret_file("land.iceberg_catalog_credential_file", self.iceberg_catalog_credential_file)
        if token is not None and credential is not None:
            raise ConfigError("land.iceberg_catalog_token and land.iceberg_catalog_credential: give one of them")
        given = token is not None or credential is not None or self.iceberg_catalog_oauth2_uri
        if given and urlsplit(self.iceberg_catalog or "").scheme not in ("http", "https"):
            raise ConfigError("land.iceberg_catalog_token/credential: a REST catalog's authentication, and "
                              f"land.iceberg_catalog is {redact(self.iceberg_catalog or 'none')!r}, not an http(s) URL")
        return token, credential

    # Compaction of small files (docs/LAND.md, "Small files", "Iceberg"): once a table (a change log: one commit
    # date) holds compact_files data files under small_file_bytes, up to compact_bytes of them are rewritten
    # together: Delta's change logs and mirrors by the batches' own commits (default 32; a Delta mirror's rewrite is
    # also bounded by the most of its files the driver reads for a batch); Iceberg's tables by the upkeep beside the
    # batches, which merges files of like rows tier by tier once a partition holds compact_files files under
    # 500,000 rows (default 4: batch/small_files.py). None: the format's default
    compact_files: int | None = None
    small_file_bytes: int = 8 << 20
    compact_bytes: int = 256 << 20
    # Mirrors with deletion vectors or position deletes: the driver keeps the keys of their files between batches
    # (batch/key_index.py), at most key_memory bytes; runs of consecutive keys take a few bytes a file, other keys 8
    # bytes a row (random BIGINTs: a 100,000,000-row mirror's 800 MB). Past it, a batch reads the key columns of the
    # files it touches again (a warning says so); raise it where the driver has the memory.
    key_memory: int = 512 << 20
    # format delta (docs/LAND.md, "Deletion vectors"): a batch's updates and deletes in a mirror's file of
    # small_file_bytes or more mark its old rows in the file's deletion vector instead of rewriting the file.
    # "auto": a mirror gets deletion vectors once a batch would rewrite more than 128 MiB of its files (its protocol
    # upgraded then: readers need deletion vector support); "always": every mirror, from its creation; "never".
    # format iceberg: a batch's deletes by position (a position delete file) instead of file rewrites, "auto" once
    # the files its keys may be in pass 128 MiB
    deletion_vectors: Literal["auto", "always", "never"] = "auto"
    # format iceberg (docs/LAND.md, "Iceberg"): every iceberg_expire_every commits of a table its snapshots older
    # than iceberg_snapshot_retention (a duration: 90s, 30m, 1h, 7d) are expired and their files deleted; each
    # table keeps its iceberg_metadata_versions newest previous metadata files
    iceberg_expire_every: int = 100
    iceberg_snapshot_retention: str = "1h"
    iceberg_metadata_versions: int = 20
    # format iceberg: files of a table no live metadata names (left by a crash) and older than iceberg_orphan_age are
    # deleted when the job first loads or creates the table and every iceberg_orphan_every commits of it (0: only then)
    iceberg_orphan_age: str = "1h"
    iceberg_orphan_every: int = 1000
    # a table no commit changed for quiet_compaction (a duration; 0: never) is compacted whole beside the batches
    # (every file with deleted rows rewritten, its small files and Iceberg's delete files merged; a Delta mirror the
    # driver keeps), so that it reads as fast as a freshly compacted one until its next change
    quiet_compaction: str = "30s"


@dataclass
class DebeziumConfig:
    """The Debezium connector options the debezium formats follow, with Debezium's defaults (docs/DEBEZIUM.md)."""

    schemas_enable: bool = True  # the JSON converter's schemas.enable: {"schema":..., "payload":...}
    tombstones_on_delete: bool = True  # a null value after each delete, for log compaction
    provide_transaction_metadata: bool = False  # <prefix>.transaction topic and each event's transaction block
    include_schema_changes: bool = True  # the schema change topic <prefix>: an event per DDL statement
    # skipped.operations: the change events not published; "t": truncates (TRUNCATE TABLE's op "t" events), "none"
    skipped_operations: list[SkippedOperation] = field(default_factory=lambda: ["t"])
    decimal_handling_mode: DecimalMode = "precise"
    time_precision_mode: TimeMode = "adaptive_time_microseconds"
    bigint_unsigned_handling_mode: BigintMode = "long"
    binary_handling_mode: BinaryMode = "bytes"
    # debezium-avro (kafka.format, land.source_format): the schema registry's Confluent-compatible API (e.g.
    # Apicurio's .../apis/ccompat/v7), HTTP basic authentication (the password:
    # BINLAKE_DEBEZIUM_SCHEMA_REGISTRY_PASSWORD or the file) and the CA of an https registry (default: the system's)
    schema_registry_url: str | None = None
    schema_registry_username: str | None = None
    schema_registry_password: str | None = field(default=None, repr=False)
    schema_registry_password_file: str | None = None
    schema_registry_ca: str | None = None
    # the Avro converter's auto.register.schemas: false looks each schema up under its subject (registered ahead by
    # whoever manages the registry) instead of registering it
    auto_register_schemas: bool = True
    # the Avro converter's key.subject.name.strategy / value.subject.name.strategy (Confluent's class names, without
    # their package): a schema's subject <topic>-key|value, its record's full name, or <topic>-<full name>
    key_subject_name_strategy: SubjectStrategy = "TopicNameStrategy"
    value_subject_name_strategy: SubjectStrategy = "TopicNameStrategy"

    def registry_credentials(self) -> tuple[str | None, str | None]:
        """(username, password) of the schema registry (password from the setting or its file)."""
        password = self.schema_registry_password
        if password is None and self.schema_registry_password_file:
            password = Path(self.schema_registry_password_file).read_text().strip()
        if password is not None and not self.schema_registry_username:
            raise ConfigError("debezium.schema_registry_password needs debezium.schema_registry_username")
        return self.schema_registry_username, password


@dataclass
class SchemaConfig:
    """Schema history, for servers whose TABLE_MAPs carry no column names (docs/COMMANDS.md, "Schema history")."""

    history: Literal["auto", "always", "never"] = "auto"  # auto: when binlog_row_metadata is not FULL
    on_unparsed_ddl: Literal["stop", "skip-table"] = "stop"  # skip-table: stop publishing the tables it names


@dataclass
class Config:
    source: SourceConfig = field(default_factory=SourceConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    land: LandConfig = field(default_factory=LandConfig)
    schema: SchemaConfig = field(default_factory=SchemaConfig)
    debezium: DebeziumConfig = field(default_factory=DebeziumConfig)
    exit_at_end: bool = False
    metrics_port: int | None = None  # serve /metrics, /healthz, /readyz on this port
    metrics_host: str = "127.0.0.1"
    log_format: Literal["text", "json"] = "text"  # json: one JSON object per line, for log pipelines
    # the libraries' own log lines (Kafka client, Spark) go to files here, not to the terminal (cli/logs.py);
    # None: ~/.cache/binlake/logs; verbose: to the terminal too
    log_dir: str | None = None
    verbose: bool = False
    # initial: snapshot the selected tables when there is no checkpoint; when-needed: also when the
    # checkpoint's binlog has been purged; never: stream only (from source.start_file).
    snapshot: Literal["initial", "never", "when-needed"] = "never"
    snapshot_chunk_rows: int = 5000  # rows per primary-key chunk (fewer when rows are large)
    # a re-snapshot's and verify's watermark chunks grow from snapshot_chunk_rows up to this many times it while
    # they read fast (doubled while one reads in under 0.25 s, halved past 1 s: daemon/resnapshot.ChunkSize);
    # 1: chunks of snapshot_chunk_rows
    snapshot_chunk_growth: int = 20
    # source connections reading one table's snapshot at once (tables keyed by one integer column, of at least
    # snapshot_parallel_rows rows by the server's statistics; the others are read on one)
    snapshot_parallelism: int = 2
    snapshot_parallel_rows: int = 1_000_000
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
                raise ConfigError(f"source.hosts: {host!r} is not HOST:PORT")
            if f"{name}:{port}" not in seen:
                seen.add(f"{name}:{port}")
                out.append(parts._replace(netloc=(f"{auth}@" if auth else "") + f"{name}:{port}").geturl())
        return out

    def redacted(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["source"]["url"] = redact(self.source.url)
        if d["kafka"]["sasl_password"] is not None:
            d["kafka"]["sasl_password"] = "***"
        if d["debezium"]["schema_registry_url"] is not None:
            d["debezium"]["schema_registry_url"] = redact(d["debezium"]["schema_registry_url"])
        if d["debezium"]["schema_registry_password"] is not None:
            d["debezium"]["schema_registry_password"] = "***"
        for secret in ("iceberg_catalog_token", "iceberg_catalog_credential"):
            if d["land"][secret] is not None:
                d["land"][secret] = "***"
        if d["land"]["iceberg_catalog"] is not None:
            d["land"]["iceberg_catalog"] = redact(d["land"]["iceberg_catalog"])
        if d["filters"]["mask_key"] is not None:
            d["filters"]["mask_key"] = "***"
        return d


def _merge(obj: Any, values: dict[str, Any], where: str) -> None:
    names = {f.name: f for f in dataclasses.fields(obj)}
    hints = get_type_hints(type(obj))
    for key, value in values.items():
        key = key.replace("-", "_")
        if key not in names:
            raise ConfigError(f"{where}: unknown setting {key!r} (known: {', '.join(sorted(names))})")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {key} must be a mapping")
            _merge(current, value, f"{where}.{key}")
        else:
            value = coerce(value, hints[key], f"{where}.{key}")
            check = CHECKS.get((type(obj).__name__, key))
            problem = check(value) if check is not None and value is not None else None
            if problem is not None:
                raise ConfigError(f"{where}.{key}: {problem}")
            setattr(obj, key, value)


def load_config(path: str | os.PathLike[str] | None = None, overrides: dict[str, Any] | None = None,
                environ: dict[str, str] | None = None) -> Config:
    """Defaults, then the YAML file, then BINLAKE_<SECTION>_<NAME> variables, then ``overrides``
    (nested dicts, as the CLI builds them from its flags)."""
    config = Config()
    if path:
        import yaml

        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the configuration must be a mapping")
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
    try:
        config.kafka.client_options()  # a missing SASL setting fails here, with its name
        config.filters.column_rules()  # a bad rule fails here, with its name
        config.source_candidates()  # a malformed source.hosts entry fails here, with its name
        if config.land.format == "iceberg":
            config.land.iceberg_catalog_auth()  # both given, one without a REST catalog, an unreadable file
        if "debezium-avro" in (config.kafka.format, config.land.source_format):
            config.debezium.registry_credentials()  # a password without a user, an unreadable file
    except ConfigError:
        raise
    except (ValueError, OSError) as exc:
        raise ConfigError(str(exc)) from None
    registry = config.debezium.schema_registry_url
    for setting, value in (("kafka.format", config.kafka.format), ("land.source_format", config.land.source_format)):
        if value == "debezium-avro" and not registry:
            raise ConfigError(f"debezium.schema_registry_url: {setting} debezium-avro needs a schema registry "
                              "(its Confluent-compatible API, http(s)://HOST:PORT[/path])")
    if registry and urlsplit(registry).scheme not in ("http", "https"):
        raise ConfigError(f"debezium.schema_registry_url: {redact(registry)!r} is not an http(s) URL")
    if config.snapshot_chunk_rows < 1:
        raise ConfigError(f"snapshot_chunk_rows: must be at least 1, got {config.snapshot_chunk_rows}")
    if config.snapshot_chunk_growth < 1:
        raise ConfigError(f"snapshot_chunk_growth: must be at least 1, got {config.snapshot_chunk_growth}")
    if config.snapshot_parallelism < 1:
        raise ConfigError(f"snapshot_parallelism: must be at least 1, got {config.snapshot_parallelism}")
    if config.land.max_batch_bytes < 0:
        raise ConfigError(f"land.max_batch_bytes: must be 0 (no bound) or more, got {config.land.max_batch_bytes}")
    if config.land.trigger != "available-now" and not _INTERVAL.fullmatch(config.land.trigger.strip()):
        raise ConfigError(f"land.trigger: {config.land.trigger!r} is neither an interval (1s, 500ms, 2m) nor "
                          "available-now")
    return config


_INTERVAL = re.compile(r"\d+(?:\.\d+)?\s*(ms|s|m)")
