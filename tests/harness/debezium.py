"""A real Debezium MariaDB connector in the harness's Kafka Connect, and the messages of a topic prefix: what
binlake's Debezium formats are compared with (issue 24)."""

from __future__ import annotations

import time
from typing import Any

import orjson

# a table of the Debezium landing tests' workloads (random_change)
CHANGES_TABLE = ("CREATE TABLE {} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(200), d DECIMAL(12,3), "
                 "at DATETIME(3), ts TIMESTAMP(6) NULL, f DOUBLE, b VARBINARY(16))")


def create_changes_tables(server, db: str, rows: int, text: str) -> None:
    """Database ``db`` with the CHANGES_TABLE tables ``a`` and ``b``, each of ``rows`` rows (s: ``text``)."""
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    for table in ("a", "b"):
        server.execute(CHANGES_TABLE.format(f"{db}.{table}"))
        server.execute(f"INSERT INTO {db}.{table} (id, v, s) VALUES " + ", ".join(
            f"({i}, {i}, '{text}')" for i in range(1, rows + 1)))


def random_change(cur, rng, n: int, keys: int, also: str = "") -> None:
    """The ``n``-th statement of a workload on the CHANGES_TABLE tables ``a`` and ``b``: an insert or an update
    of one of ``keys`` keys, an update (``also``: more of its SET), a changed key (a delete and a create at one
    position), a delete, or several rows in one transaction."""
    table = rng.choice(("a", "b"))
    key = rng.randrange(1, keys)
    choice = rng.random()
    if choice < 0.45:
        cur.execute(f"INSERT INTO {table} (id, v, s, d, at, ts, f, b) "
                    "VALUES (%s, %s, %s, %s, NOW(3), NOW(6), %s, %s) "
                    "ON DUPLICATE KEY UPDATE v = v + 1, s = CONCAT(LEFT(s, 150), 'é')",
                    (key, n, f"w{n}", rng.randrange(-10**9, 10**9) / 1000, rng.random(), bytes([n % 256])))
    elif choice < 0.75:
        cur.execute(f"UPDATE {table} SET v = v - 1, d = d * -1, f = NULL{also} WHERE id = %s", (key,))
    elif choice < 0.85:
        cur.execute(f"UPDATE IGNORE {table} SET id = id + 300 WHERE id = %s", (key,))
    elif choice < 0.95:
        cur.execute(f"DELETE FROM {table} WHERE id = %s OR id = %s", (key, key + 300))
    else:
        cur.execute("BEGIN")
        cur.executemany(f"INSERT INTO {table} (id, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = -v",
                        [(rng.randrange(1, keys), n) for _ in range(6)])
        cur.execute("COMMIT")


Messages = dict[str, list[tuple[bytes | None, bytes | None]]]  # topic -> (key, value) in order

# Debezium's DDL parser reads characters outside the Basic Multilingual Plane in ENUM/SET definitions as '?'
# (its allowed list, and its values of them); binlake gives the server's characters.
NON_BMP = "\N{GRINNING FACE}"
# (Debezium's connector options, binlake's BINLAKE_DEBEZIUM_* settings): the defaults with transaction metadata,
# and every other value handling with neither tombstones nor transaction metadata
SETTINGS = {
    "defaults": {"provide.transaction.metadata": "true"},
    "modes": {"decimal.handling.mode": "string", "time.precision.mode": "connect",
              "bigint.unsigned.handling.mode": "precise", "binary.handling.mode": "hex",
              "tombstones.on.delete": "false"},
}


def binlake_settings(options: dict[str, str]) -> dict[str, str]:
    """The daemon's environment for Debezium's connector options (the converters' are not the daemon's)."""
    return {f"BINLAKE_DEBEZIUM_{k.replace('.', '_').upper()}": v for k, v in options.items() if "converter" not in k}


def as_debezium_reads(text: Any) -> Any:
    """ENUM/SET text as Debezium gives it (NON_BMP as '?')."""
    return text.replace(NON_BMP, "?") if isinstance(text, str) else text


def renamed(value: Any, ours: str, theirs: str) -> Any:
    """Schema names and the source's name carry the topic prefix: ours -> theirs."""
    if isinstance(value, str):
        return theirs + value[len(ours):] if value == ours or value.startswith(ours + ".") else value
    if isinstance(value, dict):
        return {k: renamed(v, ours, theirs) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, ours, theirs) for v in value]
    return value


def zoo_through_both(make_mariadb, kafka, kafka_connect, monkeypatch, ours: str, theirs: str, env: dict[str, str],
                     options: dict[str, str], metadata: str = "FULL",
                     headers: bool = False) -> tuple[Messages, Messages]:
    """The type zoo's binlog published by binlake (prefix ``ours``, its environment ``env``) and by Debezium's
    MariaDB connector (prefix ``theirs``, its ``options``) on a server of its own: every message of each prefix.
    Debezium 3.5.0 stops on MariaDB's compressed columns (a NullPointerException reading their TABLE_MAP): binlake
    decodes them (test_type_zoo), here they are plain ones."""
    from harness import zoo
    from harness.daemon import run_daemon

    server = make_mariadb(binlog_row_metadata=metadata)
    server.execute("CREATE DATABASE zoo CHARACTER SET utf8mb4")
    conn = server.connect("zoo")
    conn.autocommit(True)
    zoo.create(conn, rows=False)
    conn.cursor().execute("ALTER TABLE strs MODIFY vcc VARCHAR(500), MODIFY bc BLOB")
    for name, value in {"BINLAKE_FILTERS_INCLUDE": "zoo.*", **env}.items():
        monkeypatch.setenv(name, value)
    run_daemon(server, kafka, ours)  # without FULL metadata, binlake's schema history starts here
    start_connector(kafka_connect, server, kafka, theirs, "zoo", **options)
    try:
        zoo.write(conn)
        run_daemon(server, kafka, ours)
        published = messages(kafka, ours, headers)
        last = "transaction" if f"{ours}.transaction" in published else "zoo.strs"
        wait_for(kafka, theirs, last, len(published[f"{ours}.{last}"]), kafka_connect)
        return published, messages(kafka, theirs, headers)
    finally:
        kafka_connect.delete(theirs)


def start_connector(kafka_connect, server, kafka, name: str, db: str, **options: str) -> None:
    """Debezium's MariaDB connector named ``name`` (its topic prefix too) on database ``db``, streaming once this
    returns; ``options`` add to or replace its configuration (dots as underscores allowed)."""
    config = {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "tasks.max": "1",
        "database.hostname": "127.0.0.1", "database.port": str(server.port), "database.user": "root",
        "database.password": "", "database.server.id": "7101", "topic.prefix": name,
        "database.include.list": db, "snapshot.mode": "initial",
        "schema.history.internal.kafka.bootstrap.servers": kafka.bootstrap,
        "schema.history.internal.kafka.topic": f"{name}.history",
        "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1"}
    config |= {key.replace("_", "."): value for key, value in options.items()}
    log = kafka_connect.log_file
    start = log.stat().st_size
    kafka_connect.create(name, config)
    kafka_connect.wait_running(name)
    # RUNNING comes before the snapshot: writes made then would be in it (op r, not the changes compared)
    deadline = time.monotonic() + 60
    while b"Keepalive thread is running" not in log.read_bytes()[start:]:
        assert time.monotonic() < deadline, f"connector {name} did not start streaming within 60 s"
        time.sleep(0.2)


def avro_converters(registry) -> dict[str, str]:
    """A connector's options for Apicurio's Avro converter (ingester/devstack/connect.py's APICURIO_CONVERTER) as
    key and value converter, in Confluent's wire format (a zero byte and the 4-byte id the Confluent API gives,
    Apicurio's content id; no headers), registering its schemas under TopicNameStrategy's subjects."""
    options = {"url": registry.core_url, "as-confluent": "true", "use-id": "contentId", "headers.enabled": "false",
               "auto-register": "true"}
    return {f"{role}.converter": "io.apicurio.registry.utils.converter.AvroConverter" for role in ("key", "value")} \
        | {f"{role}.converter.apicurio.registry.{k}": v for role in ("key", "value") for k, v in options.items()}


def messages(kafka, prefix: str, headers: bool = False) -> dict[str, list[Any]]:
    """Every committed message of the prefix's topics (``<prefix>.`` and the prefix itself), per topic in
    order: (key, value) bytes, with ``headers`` (key, value, headers)."""
    from kafka import KafkaConsumer, TopicPartition

    from .daemon import stable_end_offsets

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    try:
        topics = [t for t in consumer.topics() if t == prefix or t.startswith(prefix + ".")]
        parts = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        if not parts:
            return {}
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = stable_end_offsets(kafka, consumer, parts, 10.0)  # a commit's markers come after it returned
        out: dict[str, list[Any]] = {t: [] for t in topics}
        while any(consumer.position(tp) < end[tp] for tp in parts):
            for tp, batch in consumer.poll(timeout_ms=1000).items():
                out[tp.topic] += [(m.key, m.value, m.headers) if headers else (m.key, m.value) for m in batch]
        return out
    finally:
        consumer.close()


def wait_for(kafka, prefix: str, topic: str, count: int, kafka_connect, timeout: float = 90.0) -> None:
    """Until ``<prefix>.<topic>`` holds ``count`` messages (else the connector's state and errors)."""
    deadline = time.monotonic() + timeout
    have = 0
    while time.monotonic() < deadline:
        have = len(messages(kafka, prefix).get(f"{prefix}.{topic}", []))
        if have >= count:
            return
        time.sleep(0.5)
    errors = [line for line in kafka_connect.log_file.read_text(errors="replace").splitlines()
              if " ERROR " in line][-3:]
    status = kafka_connect._get(f"/connectors/{prefix}/status")
    trace = [line for task in status["tasks"] for line in task.get("trace", "").splitlines()]
    last = max((i for i, line in enumerate(trace) if line.startswith("Caused by")), default=0)
    causes = [line for line in trace[:last] if line.startswith("Caused by")] + trace[last:last + 8]
    raise AssertionError(f"{prefix}.{topic} has {have} messages after {timeout} s, not {count}; connector "
                         f"{status['connector']['state']}, tasks {[t['state'] for t in status['tasks']]}: "
                         + "\n".join(causes) + f"; errors logged: {errors}")


def decoded(message: tuple[bytes | None, bytes | None]) -> tuple[Any, Any]:
    key, value = message
    return (None if key is None else orjson.loads(key)), (None if value is None else orjson.loads(value))
