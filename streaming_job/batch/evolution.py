"""Schema evolution of a table's lake tables, format-neutral: the union of the lake's columns and a batch's table
maps (added columns, safe widenings; anything else stops the query), and the defaults of added columns, learnt
from the ADD COLUMN statements on the schema topic (defaults.py; docs/LAND.md, "Schema changes"). The lake's
own columns and the ALTERs that bring a table to the union are the format's (delta/evolution.py)."""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from ingester.codec.events import QueryEvent
from ingester.records.format import record_events

from ..decode.lake_types import widens
from ..runtime.errors import LandError
from ..source.kafka_read import KafkaReader
from . import defaults as D

log = logging.getLogger("binlake.land")
_DDL = re.compile(r"\s*(/\*.*?\*/\s*)*(ALTER|CREATE|RENAME|DROP|TRUNCATE)\b", re.IGNORECASE | re.DOTALL)


@dataclass
class SchemaGroup:
    """One table schema's share of a batch: where it starts, how many rows, the newest commit."""

    schema: str
    first_seq: bytes = b""
    first_position: str = ""
    n: int = 0
    newest: int = 0
    partial: bool = False

    def add(self, seq: bytes, position: str, n: int, newest: int, partial: bool) -> None:
        if not self.first_seq or seq < self.first_seq:
            self.first_seq, self.first_position = seq, position
        self.n += n
        self.newest = max(self.newest, newest)
        self.partial = self.partial or partial

    @cached_property
    def meta(self) -> dict[str, Any]:
        """The schema JSON, parsed once (evolution and the mirror's key both read it)."""
        return orjson.loads(self.schema)


class SchemaEvolution:
    """The batch's union schema per table, and the schema topic's statements read so far (the lake's own columns
    and the ALTERs that bring a table to the union are the format's: delta/evolution.py, iceberg/format.py)."""

    def __init__(self, kafka: KafkaReader, schema_topic: str | None) -> None:
        """``schema_topic``: binlake's topic of DDL statements (``<prefix>._schema``); None where the source has
        none (Debezium's change events)."""
        self.kafka = kafka
        self.schema_topic = schema_topic
        # per table of the batch: column -> first sequence with it, and the columns older images lack (ADD COLUMN)
        self._appear: dict[tuple[str, str], tuple[dict[str, bytes], set[str]]] = {}
        # per table of the batch: its columns' defaults as the change events' schemas give them (no schema topic)
        self._schema_defaults: dict[tuple[str, str], dict[str, str]] = {}
        self._added = D.AddedColumns()  # ADD COLUMN statements read so far
        self._schema_next = 0  # the schema topic's next offset to read
        self._statements = threading.Lock()  # the schema topic's reading

    def evolve(self, db: str, table: str, lake: list[tuple[str, str]],
               schemas: list[SchemaGroup]) -> list[tuple[str, str]]:
        """The union of the lake's columns and this batch's table maps, in source order. New columns are
        added; a type that widens (or narrows into the lake's type) is kept wide; anything else stops.
        (The mirror's key is keys.MirrorKeys'.)"""
        columns = list(lake)
        first: dict[str, bytes] = {}  # column -> the first sequence of an image with it
        for g in schemas:  # in source order
            meta = g.meta
            for name, _ in meta["columns"]:
                first.setdefault(name, g.first_seq)
            index = {n: i for i, (n, _) in enumerate(columns)}
            for name, dtype in meta["columns"]:
                if name not in index:
                    index[name] = len(columns)
                    columns.append((name, dtype))
                    continue
                old = columns[index[name]][1]
                if widens(dtype, old):
                    continue
                if widens(old, dtype):
                    columns[index[name]] = (name, dtype)
                    continue
                raise LandError(f"`{db}`.`{table}`: column `{name}` changed from {old} to {dtype} at binlog position "
                                f"{g.first_position} (file:position:index), {self._ddl_before(db, table, g)}; "
                                "not a safe widening, so the query stops: land the table anew from that point "
                                "under a new lake path")
        self._schema_defaults[(db, table)] = {n: sql for g in schemas for n, sql in g.meta.get("defaults", {}).items()}
        # Columns that the batch's older images lack: added (or dropped and added again) in the batch
        self._appear[(db, table)] = (first, {n for n, seq in first.items() if seq > schemas[0].first_seq})
        return columns

    def defaults(self, db: str, table: str, columns: list[tuple[str, str]], added: list[str]) -> list[D.Default]:
        """The defaults the mirror needs: of the columns ``added`` to it now, and of the columns that images
        of this batch lack because they are older than the ADD COLUMN (docs/LAND.md, "Schema changes")."""
        first, older = self._appear.get((db, table), ({}, set()))
        wanted = [n for n, _ in columns if n in added or n in older]
        if not wanted:
            return []
        types = dict(columns)
        out: list[D.Default] = []
        if self.schema_topic is None:  # the defaults of the change events' schemas, where they give them
            given = self._schema_defaults.get((db, table), {})
            out = [D.Default(n, first[n], given[n], "the column's default in the change events' schema")
                   for n in wanted if n in given and n in first]
            missing = [n for n in wanted if n not in given]
            if missing:
                log.info("`%s`.`%s`: the mirror's columns %s stay null in rows written before they were added: the "
                         "change events' schema gives them no default", db, table, ", ".join(f"`{n}`" for n in missing))
            return out
        with self._statements:  # tables landing side by side: one reads the topic, none sees it half read
            self._read_statements()
            for name in wanted:
                try:
                    d = self._added.default(db, table, name, types, first.get(name))
                except D.Uncomputable as exc:
                    log.warning("`%s`.`%s`: the mirror's column `%s` stays null in rows written before it was "
                                "added (or renamed): only the server can compute their value: %s. `binlake snapshot "
                                "--tables %s.%s` reads the rows again", db, table, name, exc, db, table)
                    continue
                if d is not None:
                    out.append(d)
        return out

    def renames(self, db: str, table: str, lake: list[tuple[str, str]],
                columns: list[tuple[str, str]]) -> list[D.Default]:
        """The RENAME COLUMN and CHANGE statements that named a column of ``columns`` after another of them
        (a format that renames columns in place: iceberg/format.py), in source order; not a swap of two
        columns the ``lake`` has both of. Empty without a schema topic."""
        if self.schema_topic is None:
            return []
        first, _ = self._appear.get((db, table), ({}, set()))
        types, have = dict(columns), dict(lake)
        out = []
        with self._statements:
            self._read_statements()
            for name in types:
                try:
                    d = self._added.default(db, table, name, types, first.get(name))
                except D.Uncomputable:
                    continue  # a type change that is no widening: a new column (the Delta side's way)
                if d is not None and d.source and d.source != name and not (name in have and d.source in have):
                    out.append(d)
        return sorted(out, key=lambda d: d.seq)

    def _read_statements(self) -> None:
        """The schema topic's statements since the last read (committed ones), for their ADD COLUMNs."""
        topic = self.schema_topic
        assert topic is not None
        try:
            records = self.kafka.read(topic, {"0": self._schema_next}, "latest").select(
                "offset", "headers", "value").collect()
        except Exception as exc:
            raise LandError(f"ADD COLUMN statements could not be read from {topic}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0]}") from exc
        for r in sorted(records, key=lambda r: r.offset):
            headers = {h.key: bytes(h.value) for h in r.headers or ()}
            for item in record_events(headers, bytes(r.value), f"{topic}[0]@{r.offset}"):
                if isinstance(item.event, QueryEvent):
                    self._added.feed(item.seq.encode(), item.event)
            self._schema_next = r.offset + 1

    def ddl_before(self, db: str, table: str, seq: bytes, position: str) -> str:
        """The last DDL statement naming the table before ``seq`` (``_ddl_before``), for messages."""
        return self._ddl_before(db, table, SchemaGroup("", seq, position))

    def _ddl_before(self, db: str, table: str, group: SchemaGroup) -> str:
        """The last statement on the schema topic before ``group``'s first row that names the table: for
        the error message only, so the topic is read just then."""
        topic = self.schema_topic
        if topic is None:
            return "the change events carry no DDL statements"
        mentions = re.compile(r"(?<![\w$])`?" + re.escape(table) + r"`?(?![\w$])", re.IGNORECASE)
        found = None
        try:
            records = self.kafka.read(topic, "earliest", "latest").select("offset", "headers", "value").collect()
            for r in records:
                headers = {h.key: bytes(h.value) for h in r.headers or ()}
                for item in record_events(headers, bytes(r.value), f"{topic}[0]@{r.offset}"):
                    ev = item.event
                    if (item.seq.encode() < group.first_seq and isinstance(ev, QueryEvent)
                            and _DDL.match(ev.query) and mentions.search(ev.query)
                            and (ev.database == db or re.search(re.escape(db), ev.query, re.IGNORECASE))):
                        found = (str(item.seq), ev.query)
        except Exception as exc:  # the message must still come out
            return f"the DDL statement could not be read from {topic}: {type(exc).__name__}: {exc}"
        if found is None:
            return f"no DDL statement naming the table before it on {topic}"
        return f"after the DDL statement at {found[0]}: {' '.join(found[1].split())}"


def widened(lake: list[tuple[str, str]], columns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The columns (name, new type) whose ``lake`` type ``columns`` widens."""
    current = dict(lake)
    return [(n, t) for n, t in columns if n in current and current[n] != t and widens(current[n], t)]
