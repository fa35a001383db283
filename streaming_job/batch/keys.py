"""The key of each table's mirror, and that it stays the key (docs/LAND.md, "Mirrors").

A mirror is kept by the table's key as its records carry it (the schema's ``pk``: the primary key, or the
UNIQUE index of NOT NULL columns the server uses in its place), or by the columns ``land.keys`` names for
the table, which replace it. A new mirror records its key in its Delta properties (``binlake.key``, a JSON
list of column names). Every batch is checked against it: changes keyed otherwise (a primary key added or
dropped, the UNIQUE index dropped or made nullable, land.keys changed) stop the query with a message
naming the table, both keys and the binlog position, instead of applying changes reduced by one key to a
mirror kept by another. A table without a key has no mirror; one that gets a key starts its mirror then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ingester.records.format import Sequence

from ..decode.lake_types import quote
from ..runtime.errors import LandError
from .mirror import SEQ

KEY_PROPERTY = "binlake.key"


def key_property(key: list[str]) -> dict[str, str]:
    """A new mirror's table property that records its key."""
    return {KEY_PROPERTY: orjson.dumps(key).decode()}


def recorded_key(configuration: dict[str, str]) -> list[str] | None:
    """The key a mirror recorded (None: none, e.g. a mirror an older binlake created)."""
    text = configuration.get(KEY_PROPERTY)
    return None if text is None else list(orjson.loads(text))


def _listed(key: list[str]) -> str:
    return ", ".join(f"`{k}`" for k in key)


@dataclass
class MirrorKeys:
    """land.keys, and the key of every mirror checked so far in this process."""

    configured: dict[str, list[str]]  # "<db>.<table>" -> its key columns (land.keys)
    path: Callable[[str, str], str]  # (db, table) -> the mirror's path (named in messages)
    # the lake format's reading of a mirror: whether it exists, and the key it recorded (None: none)
    stored: Callable[[str, str], tuple[bool, list[str] | None]]
    # the lake format's recording of the key in a mirror that has none (one an older binlake made); None: the
    # format's mirrors always record theirs (Iceberg's), such a mirror is taken as kept by the batch's key
    record: Callable[[str, str, list[str]], None] | None = None
    _known: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # []: no mirror

    def forget(self, db: str, table: str) -> None:
        """A statement made the table's mirror anew (table_statements.py): its key is read from it again."""
        self._known.pop((db, table), None)

    def configured_for(self, db: str, table: str) -> list[str] | None:
        return self.configured.get(f"{db}.{table}")

    def key(self, db: str, table: str, schemas: list[tuple[dict[str, Any], str]]) -> list[str]:
        """The key of the table's mirror for a batch whose rows have ``schemas`` (meta, first binlog position;
        in source order); [] for a table without a key (no mirror). Raises LandError where the key changes,
        in the batch or against the mirror's."""
        configured = self.configured_for(db, table)
        if configured is not None:
            key = _spelled(configured, [n for n, _ in schemas[-1][0]["columns"]], db, table)
            keys = [(key, position) for _, position in schemas]
        else:
            keys = [(list(meta["pk"]), position) for meta, position in schemas]
        for (before, _), (after, position) in pairwise(keys):  # a table may get a key; never another, or none
            if before and after != before:
                raise LandError(self._changed(db, table, before, after, position))
        key = keys[-1][0]
        known = self._known.get((db, table))
        if known is None:
            exists, known = self.stored(db, table)
            if not exists:
                known = []
            elif known is None and key:  # a mirror from before keys were recorded: kept by this key, it must be
                if self.record is not None:
                    self.record(db, table, key)
                known = key
            elif known is None:
                raise LandError(self._changed(db, table, None, [], keys[0][1]))
        if known and key != known:
            position = next(p for k, p in keys if k != known)
            raise LandError(self._changed(db, table, known, key, position))
        self._known[(db, table)] = key
        return key

    def _changed(self, db: str, table: str, old: list[str] | None, new: list[str], position: str) -> str:
        """One line: the table, both keys (``old`` None: a mirror that recorded none), where, and what to do."""
        what = (f"its rows from binlog position {position} (file:position:index) on are keyed by ({_listed(new)})"
                if new else f"the table has no key from binlog position {position} (file:position:index) on")
        keep = "" if old is None else (f"keep the mirror's key with land.keys ({db}.{table}: [{', '.join(old)}]) "
                                       "if those columns still identify its rows, or ")
        return (f"`{db}`.`{table}`: its mirror is kept by "
                f"{'the key the table had' if old is None else f'the key ({_listed(old)})'}, but {what} (a primary "
                "key added or dropped, the UNIQUE index that keyed it dropped or made nullable, or land.keys "
                f"changed); one mirror cannot follow two keys, so the query stops: {keep}move the mirror "
                f"{self.path(db, table)} away and re-snapshot the table (binlake snapshot --tables {db}.{table}) "
                "to build it anew")

    def check_nulls(self, candidates: Any, db: str, table: str, key: list[str]) -> None:
        """land.keys columns must identify each row: a NULL in one (an Arrow table or a Spark DataFrame of the
        batch's mirror candidates) stops the query, naming the column and the row's binlog position."""
        if self.configured_for(db, table) is None:
            return
        found: list[Any]
        if isinstance(candidates, pa.Table):
            found = [pc.min(candidates.filter(candidates.column(k).is_null()).column(SEQ)).as_py() for k in key]
        else:
            from pyspark.sql import functions as F

            found = list(candidates.agg(*[F.min(F.when(F.col(quote(k)).isNull(), F.col(SEQ))) for k in key]).first())
        for k, seq in zip(key, found, strict=True):
            if seq is not None:
                raise LandError(f"`{db}`.`{table}`: its land.keys column `{k}` is NULL in a row at binlog position "
                                f"{Sequence.decode(bytes(seq))} (file:position:index); a mirror's key must "
                                "identify each row, so the query stops: name NOT NULL columns in land.keys")


def _spelled(configured: list[str], columns: list[str], db: str, table: str) -> list[str]:
    """land.keys' columns as the table spells them (names are case-insensitive)."""
    spelling = {c.lower(): c for c in columns}
    for c in configured:
        if c.lower() not in spelling:
            raise LandError(f"land.keys: `{db}`.`{table}` has no column `{c}` (its columns: "
                            f"{', '.join(columns)})")
    return [spelling[c.lower()] for c in configured]
