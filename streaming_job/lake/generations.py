"""Generations of a table's change log (docs/LAND.md, "Table statements").

A change log is append-only history, kept by column name: a later row's column of another type than the
change log's, where neither type safely widens into the other (text <-> binary, a narrowing, another type
family), cannot join it. Such a table's change log is *versioned*: its history goes on in a new generation,
``<table>__changes__v<n>`` (n = 2, 3, ...; generation 1 is ``<table>__changes``), created with the table's
columns then, and the earlier generation ends with the row of the statement that versioned it (a DROP,
CREATE, RENAME, or an ALTER the table's rows cannot follow). A table's current change log is its highest
generation; the mirror names it in its property ``binlake.change_log`` too.

The module is the generations' bookkeeping, for any statement that versions a change log; the lake format
makes the tables (``LakeFormat.start_generation``):

    gens = ChangeLogGenerations(probe)           # probe(db, name) -> the table's properties, None: no table
    gens.current(db, table)                      # Generation: number, name (cached per process)
    target = gens.for_statement(db, table, seq, incompatible)   # where a statement at ``seq`` goes on
    if target.number != gens.current(db, table).number: ... create it (with STARTED_BY = seq) ...
    gens.started(db, table, target)

``for_statement`` is idempotent: a statement replayed after a crash that had already created its
generation (its ``STARTED_BY`` property is the statement's sequence) is given that generation again, never a
third one. ``conflicts`` says which columns force a new generation.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..decode.lake_types import widens

CHANGE_LOG_SUFFIX = "__changes"
STARTED_BY = "binlake.generation.started_by"  # a generation's property: the hex sequence of the statement that began it
CURRENT_PROPERTY = "binlake.change_log"  # a mirror's property: its table's current change log (a table name)
_VERSIONED = re.compile(r"^(.*)__changes(?:__v(\d+))?$")

# (db, change-log table name) -> that table's properties, or None where it does not exist
Probe = Callable[[str, str], "dict[str, str] | None"]


def change_log_name(table: str, number: int = 1) -> str:
    """The change log of ``table``'s generation ``number``: ``<table>__changes``, then ``<table>__changes__v<n>``."""
    if number < 1:
        raise ValueError(f"generation {number}: generations count from 1")
    return f"{table}{CHANGE_LOG_SUFFIX}" if number == 1 else f"{table}{CHANGE_LOG_SUFFIX}__v{number}"


def parse_change_log(name: str) -> tuple[str, int] | None:
    """(table, generation) of a change log's table name; None for any other name."""
    found = _VERSIONED.match(name)
    if found is None or not found.group(1):
        return None
    return found.group(1), int(found.group(2) or 1)


def conflicts(lake: list[tuple[str, str]], columns: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """The columns of ``columns`` that ``lake`` (a change log's) has with another type that is no safe widening
    either way: (name, the lake's type, the new type). Any: the change log is versioned."""
    have = dict(lake)
    return [(n, have[n], t) for n, t in columns
            if n in have and have[n] != t and not widens(t, have[n]) and not widens(have[n], t)]


@dataclass(frozen=True)
class Generation:
    table: str
    number: int
    started_by: bytes | None = None  # the sequence of the statement that began it (None: generation 1, or unknown)

    @property
    def name(self) -> str:
        return change_log_name(self.table, self.number)


class ChangeLogGenerations:
    """The current generation of each table's change log, resolved once per process through ``probe`` (the
    highest existing generation) and kept up to date by ``started``."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self._current: dict[tuple[str, str], Generation] = {}
        self._lock = threading.Lock()  # tables land side by side

    def current(self, db: str, table: str) -> Generation:
        key = (db, table)
        with self._lock:
            found = self._current.get(key)
        if found is not None:
            return found
        found = Generation(table, 1)
        number = 2
        while True:  # generation n + 1 exists only once n ended: the first missing one ends the search
            properties = self.probe(db, change_log_name(table, number))
            if properties is None:
                break
            started = properties.get(STARTED_BY)
            found = Generation(table, number, bytes.fromhex(started) if started else None)
            number += 1
        with self._lock:
            self._current[key] = found
        return found

    def for_statement(self, db: str, table: str, seq: bytes, incompatible: bool) -> Generation:
        """The generation the table goes on in after a statement at ``seq``: the current one, or where
        ``incompatible`` (the statement's columns conflict with it) the next one -- unless this statement
        began the current one already (replayed after a crash)."""
        now = self.current(db, table)
        if now.started_by == seq or not incompatible:
            return now
        return Generation(table, now.number + 1, seq)

    def started(self, db: str, table: str, generation: Generation) -> None:
        """The format created ``generation``: the table's current one from now on."""
        with self._lock:
            self._current[(db, table)] = generation

    def forget(self, db: str, table: str) -> None:
        with self._lock:
            self._current.pop((db, table), None)
