"""Records for tests without servers: the daemon's records of a binlog file, and snapshot records of small
tables."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from ingester.codec import BinlogDecoder, BinlogError
from ingester.codec import events as E
from ingester.codec.constants import ColumnType as T
from ingester.codec.table_map import Column, TableMap
from ingester.daemon import table_reader as D
from ingester.dump.jsonl import event_json
from ingester.records import snapshot as S
from ingester.records.builder import Checkpoint, Record, RecordBuilder
from ingester.records.debezium.columns import Modes
from ingester.records.format import Sequence
from ingester.sources.binlog_file import binlog_frames
from tests.harness.binlogs import synthetic_binlog

# real binlogs of many layouts (compressed transactions, GTID tags, MariaDB, checksums, JSON), from the corpus
CORPUS_FILES = [
    "osheroff-mysql-binlog-connector-java/mysql-bin.compressed",
    "rust-mysql-common/transaction_compression.000001",
    "rust-mysql-common/binlog_transaction_with_GTID_TAG.000001",
    "rust-mysql-common/mariadb-bin.000001",
    "mariadb-operator-mariadb-poc/domain_id_0/mariadb-repl-bin.000005",
    "zendesk-maxwell/binlog.000004",
    "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32",
    "rust-mysql-common/json.binlog.000001",
    "apecloud-mysql-binlog-connector-rust/mysql-bin.000057",
]

# every combination of Debezium's value-handling modes
ALL_MODES = [Modes(*m) for m in itertools.product(("precise", "string", "double"),
                                                   ("adaptive_time_microseconds", "connect"), ("long", "precise"),
                                                   ("bytes", "base64", "base64-url-safe", "hex"))]


def build_records(path, max_record_bytes=900_000):
    """The file's records and checkpoints as the daemon's RecordBuilder makes them, and each event as the codec
    alone decodes it (JSONL, by (position, index in a transaction payload)): (builder, output, expected)."""
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(file=path.name if path.suffix[1:].isdigit() else "binlog.000001",
                            max_record_bytes=max_record_bytes)
    out: list[Record | Checkpoint] = []
    expected: dict[tuple[int, int], dict] = {}
    for pos, raw in binlog_frames(path, dec):
        ev = dec.decode(raw, pos)
        expected[(pos, 0)] = orjson.loads(event_json(ev))
        if isinstance(ev, E.TransactionPayloadEvent):
            for sub, inner in enumerate(dec.payload_events(ev), start=1):
                expected[(pos, sub)] = orjson.loads(event_json(inner))
        out.extend(builder.feed(dec, raw, pos))
        if (checkpoint := builder.checkpoint()) is not None:
            out.append(checkpoint)
    out.extend(builder.flush())
    return builder, out, expected


def binlog_records(path: Path) -> list[Any] | None:
    """The daemon's records of a binlog file (None if the builder itself refuses it: nothing to encode)."""
    dec = BinlogDecoder(str(path))
    builder = RecordBuilder(file="mysql-bin.000001", max_record_bytes=900_000)
    out: list[Any] = []
    try:
        for pos, raw in binlog_frames(path, dec):
            out.extend(builder.feed(dec, raw, pos))
        out.extend(builder.flush())
    except BinlogError:
        return None
    return out


def synthetic_records(tmp_path: Path, data: Any) -> list[Any] | None:
    """The daemon's records of a random binlog (binlogs.synthetic_binlog, with keys), or None (binlog_records)."""
    path = tmp_path / "synthetic-bin.000001"
    path.write_bytes(synthetic_binlog(data, keys=True))
    return binlog_records(path)


def ticking_clock() -> Callable[[], int]:
    """A Debezium encoder's clock (ns) that moves on ~1 ms each time it is read."""
    ticks = itertools.count(1_700_000_000_123_456_789, 1_000_003)
    return lambda: next(ticks)


def encoded(encoder: Any, records: list[Any]) -> tuple[list[Any], str | None]:
    """The messages of the records through one Debezium encoder (one Kafka transaction), and its error if any
    (compared, not judged: a native path and the reference must fail alike)."""
    messages: list[Any] = []
    try:  # the change events go out as the records come (or, with transaction metadata, at complete ones)
        for r in records:
            if isinstance(r, Record):
                messages += encoder.messages(r)
        messages += encoder.before_commit()
    except Exception as exc:
        return messages, f"{type(exc).__name__}: {exc}"
    return messages, None


def snapshot_table() -> TableMap:
    """db.t: id INT, name VARCHAR(40) (utf8mb4), raw BLOB; the table map of a MariaDB with FULL metadata."""
    cols = [Column(0, "id", T.LONG, T.LONG, 0, False, unsigned=False),
            Column(1, "name", T.VARCHAR, T.VARCHAR, 40, True, collation=45),
            Column(2, "raw", T.BLOB, T.BLOB, 2, True, collation=63)]
    return TableMap(0, 0, "db", "t", cols, [(0, 0)], has_names=True, is_mariadb=True)


def json_snapshot_table() -> TableMap:
    """db.t: id INT, j JSON; a MySQL table map."""
    cols = [Column(0, "id", T.LONG, T.LONG, 0, False, unsigned=False), Column(1, "j", T.JSON, T.JSON, 4, True)]
    return TableMap(0, 0, "db", "t", cols, [(0, 0)], has_names=True, is_mariadb=False)


def snapshot_record(rows_per_entry: list[list[list]], compress: bool = True, table: TableMap | None = None,
                    binary: tuple[int, ...] = (2,)) -> tuple[dict[str, bytes], bytes]:
    """A snapshot record of ``table`` (snapshot_table() by default; ``binary``: its binary columns) holding an
    entry per item of ``rows_per_entry``: (headers, value)."""
    descriptor = S.encode_descriptor(table or snapshot_table(), list(binary))
    value = S.snapshot_value(descriptor, [orjson.dumps(rows) for rows in rows_per_entry], compress)
    index = b"".join(S.index_entry(Sequence(3, 99, k).encode(), 1_700_000_000_000_000)
                     for k in range(len(rows_per_entry)))
    return {"binlake.index": index}, value


def json_null_record() -> tuple[dict[str, bytes], bytes]:
    """A snapshot of a MySQL JSON column: SELECT gives the documents as text (``null`` is the null
    document), SQL NULL as None, which ``TableReader.convert`` leaves alone."""
    texts = [b"null", None, b"[null]", b'"null"']
    return snapshot_record([[[i, None if t is None else D._json(t)] for i, t in enumerate(texts, 1)]],
                           table=json_snapshot_table(), binary=())


def debezium_messages(path, options, registry=None) -> list:
    """A corpus binlog's records through binlake's debezium-json encoder (``options``: DebeziumOptions), or
    debezium-avro's with ``registry`` (its SchemaIds): every message of one Kafka transaction, ``ts_ms`` of 0."""
    from ingester.records.debezium.encoder import DebeziumAvro, DebeziumJson
    from ingester.records.outbound import BinlogNames

    _, out, _ = build_records(path)
    names = BinlogNames()
    names.saw(1, path.name if path.suffix[1:].isdigit() else "binlog.000001")
    encoder = (DebeziumJson(options, names, 900_000, clock=lambda: 0) if registry is None else
               DebeziumAvro(options, registry, names, 900_000, clock=lambda: 0))
    messages = [m for r in out if isinstance(r, Record) for m in encoder.messages(r)]
    return messages + list(encoder.before_commit())


def source_batch(messages: list) -> pa.RecordBatch:
    """Messages (topic, key, value) as the Kafka source's columns for a decode function: partition 0, each
    topic's offsets from 0 in order."""
    offsets: dict[str, int] = {}
    batch: dict[str, list] = {"topic": [], "partition": [], "offset": [], "key": [], "value": []}
    for m in messages:
        batch["topic"].append(m.topic)
        batch["partition"].append(0)
        batch["offset"].append(offsets.setdefault(m.topic, 0))
        offsets[m.topic] += 1
        batch["key"].append(m.key)
        batch["value"].append(m.value)
    return pa.RecordBatch.from_pydict(batch)
