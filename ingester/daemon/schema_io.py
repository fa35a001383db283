"""The schema history's I/O: whether it is needed, reading it back from Kafka, capturing it from the source."""

from __future__ import annotations

import logging
from typing import Any

from ..config import Config
from ..records.builder import Record
from ..records.format import Sequence, file_number
from ..schema.capture import capture, capture_databases
from ..schema.history import DATABASE, HISTORY_TOPIC, VALID_FROM_KEY, SchemaHistory, history_key
from .kafka_io import read_compacted

log = logging.getLogger("binlake.schema")


def history_topic(prefix: str) -> str:
    return f"{prefix}.{HISTORY_TOPIC}"


def wanted(cur: Any) -> bool:
    """Whether the server's TABLE_MAPs lack column names (row metadata not FULL): records then carry the history's
    columns (``schema.history: auto``)."""
    try:
        cur.execute("SELECT @@GLOBAL.binlog_row_metadata")
        value = cur.fetchone()[0]
    except Exception:  # servers older than the variable: no optional metadata at all
        return True
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.upper() != "FULL"


def new_history(cfg: Config) -> SchemaHistory:
    return SchemaHistory(cfg.filters.accepts, cfg.schema.on_unparsed_ddl)


def load(cfg: Config) -> SchemaHistory | None:
    """The history as last committed to Kafka; None when nothing was ever captured."""
    # the daemon made sure the topic exists: one the broker does not show yet is retried, not captured anew
    entries = read_compacted(cfg.kafka.bootstrap, history_topic(cfg.kafka.topic_prefix), cfg.kafka.client_options(),
                             exists=True)
    if not entries:
        return None
    history = new_history(cfg)
    history.load(entries.values())
    log.info("schema history: %d tables (%d skipped) read back from %s", len(history.tables), len(history.skipped),
             history_topic(cfg.kafka.topic_prefix))
    return history


def capture_records(cfg: Config, cur: Any, file: str, position: int) -> tuple[SchemaHistory, list[Record]]:
    """Capture the selected tables' columns now (valid at ``file``:``position``), as history records to
    publish in the Kafka transaction of the first checkpoint at or after that position."""
    history = new_history(cfg)
    history.tables = capture(cur, cfg.filters.accepts)
    history.databases = capture_databases(cur, history.database_collations)
    seq = Sequence(file_number(file), position) if file else Sequence(0, 0)
    history.valid_from = seq.encode()  # the statements before it are in what was captured
    names = [*sorted(history.tables), *((db, DATABASE) for db in sorted(history.databases))]
    records = [Record(HISTORY_TOPIC, history_key(name), history.entry(name, str(seq), "captured"),
                      [("binlake.seq", seq.encode())], seq) for name in names]
    records.append(Record(HISTORY_TOPIC, VALID_FROM_KEY, history.valid_from_entry(str(seq)),
                          [("binlake.seq", seq.encode())], seq))
    log.info("schema history: captured %d tables at %s:%s", len(history.tables), file or "the start", position)
    return history, records
