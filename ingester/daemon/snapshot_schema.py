"""What Debezium's formats publish of a snapshot's schema (records/debezium/schema_change.py,
``snapshot_changes``): the server's character set, the captured databases' and tables' definitions read in the
snapshot's transaction, as one record of binlake's topic ``_snapshot_schema`` that only the Debezium formats
read (they publish nothing of it as it is)."""

from __future__ import annotations

from typing import Any

import orjson

from ..records.builder import Record
from ..records.debezium.schema_change import SNAPSHOT_TOPIC
from ..records.format import Sequence


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def snapshot_schema_record(cur: Any, tables: list[tuple[str, str]], mariadb: bool, seq: Sequence,
                           history_seq: str) -> Record:
    """The definitions of ``tables`` (database, table) as the snapshot's transaction sees them (of a MariaDB
    server or not: the connector Debezium's events name); ``seq``: where
    the snapshot is in the binlog; ``history_seq``: the sequence of the schema history's entries captured with it
    (their tables' structures)."""
    cur.execute("SELECT @@character_set_server, @@collation_server")
    charset, collation = (_text(v) for v in cur.fetchone())
    databases = []
    for database in sorted({db for db, _ in tables}):
        cur.execute("SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA"
                    " WHERE SCHEMA_NAME = %s", (database,))
        row = cur.fetchone()
        databases.append([database, *(_text(v) for v in row)] if row else [database, charset, collation])
    described = []
    for database, table in tables:
        cur.execute(f"SHOW CREATE TABLE `{database.replace('`', '``')}`.`{table.replace('`', '``')}`")
        described.append([database, table, _text(cur.fetchone()[1])])
    value = {"connector": "mariadb" if mariadb else "mysql", "charset": charset, "collation": collation,
             "databases": databases, "tables": described, "history_seq": history_seq}
    return Record(SNAPSHOT_TOPIC, b"", orjson.dumps(value), [("binlake.seq", seq.encode())], seq)
