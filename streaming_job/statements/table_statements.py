"""What each table statement does to a table's lake tables (docs/LAND.md, "Table statements"), the same for every
lake format: the format does the writes (``StatementTables``: one commit each), this module decides them.

- truncate: the mirror emptied; the change log's ``truncate`` row.
- drop: the mirror emptied and marked ended (ENDED_PROPERTY: the statement and its position); the change log's
  ``drop`` row, marked ended too. The dropped rows stay in the change log (and in the mirror's history: Delta's
  time travel, Iceberg's snapshots, until they are vacuumed or expired); no archive table.
- create (its entry, or a table's first rows after it ended): the mirror's schema replaced by the new
  table's columns and key, no rows; the change log goes on, or where the new columns conflict with it
  (generations.conflicts) in its next generation; the ``create`` row.
- rename (a pair of RENAME TABLE / ALTER TABLE ... RENAME): the new name's mirror a copy of the old one's
  (the format copies its files: never a reference to the other table's), its change log goes on with a
  ``rename`` row naming both (the first row of a new generation where the columns conflict with that name's
  change log); the old name's mirror ends as a drop's, its change log with the same ``rename`` row.
- partition: the change log's row; the mirror is left as it is (the binlog does not say which rows a TRUNCATE,
  DROP or EXCHANGE PARTITION removed or brought): where the daemon reads the table again
  (``partition["reload"]``) a reload entry follows; else a warning says the mirror may hold stale rows.
- reload (after such partition maintenance, or ``binlake snapshot --replace``): the mirror emptied, the
  change log's ``reload`` row; the re-snapshot's rows that follow, and the changes after it, fill it again.
- alter: schema_alter.py (the columns added, dropped, renamed, converted at the statement); without it, or without
  schema history, the change log's row (the columns' own changes land with the table's rows).

Every write records the action's marker (statements.Action.marker) in its commit, and is skipped on a table
that has it (or a later one's) already: an action is applied once per table, whether its batch is replayed
after a crash or its statement's entries arrive in several batches.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from ingester.records.table_statements import ROW_ACTIONS

from ..lake.generations import CURRENT_PROPERTY, STARTED_BY, ChangeLogGenerations, Generation, conflicts
from ..runtime.errors import LandError
from .statements import (
    ENDED_PROPERTY,
    STATEMENT_PROPERTY,
    Action,
    Name,
    applied,
    ended_of,
    ended_value,
    marker_text,
    statement_columns,
    statement_key,
    statement_row,
)

if TYPE_CHECKING:
    from .schema_alter import Alters

log = logging.getLogger("binlake.land")
Properties = dict[str, "str | None"]  # table properties a commit sets (a value None: removed)


class StatementTables(ABC):
    """A lake format's writes of table statements, each one commit that also sets ``properties``. ``name``: a lake
    table's name in the table's database (the mirror ``<table>``, a change log ``<table>__changes[__v<n>]``)."""

    @abstractmethod
    def properties(self, db: str, name: str) -> dict[str, str] | None:
        """The lake table's properties; None where it does not exist."""

    @abstractmethod
    def columns(self, db: str, name: str) -> list[tuple[str, str]]:
        """A change log's row-image columns, or a mirror's row columns (binlake's own left out); [] where the table
        does not exist."""

    @abstractmethod
    def change_row(self, db: str, name: str, columns: list[tuple[str, str]], row: pa.Table | None,
                   properties: Properties, batch_id: int) -> None:
        """The change log ``name`` brought to ``columns`` (created with them where it does not exist; columns
        added, types widened) and given ``row`` (statements.statement_row of ``columns``; None: no row) and
        ``properties``, in one commit where the format can."""

    @abstractmethod
    def empty_mirror(self, db: str, table: str, properties: Properties, batch_id: int) -> None:
        """Every row of the mirror removed, in one commit with ``properties`` (nothing where there is no mirror)."""

    @abstractmethod
    def replace_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       properties: Properties, batch_id: int) -> None:
        """The mirror made anew: no rows, ``columns`` and ``key`` (created where it does not exist), one commit."""

    @abstractmethod
    def copy_mirror(self, source: Name, target: Name, properties: Properties, batch_id: int) -> None:
        """The mirror of ``target`` made a copy of ``source``'s (its rows, columns and key; files of its own), in
        one commit of ``target`` with ``properties`` (``target``'s rows before it are gone)."""

    def mirror_rows(self, db: str, table: str) -> int:
        """How many rows the mirror holds, from its metadata (0: none, or no mirror): what a rewrite of it costs."""
        return 0

    def copy_rows(self, source: Name, target: Name) -> int:
        """How many rows ``copy_mirror`` writes anew (0: it copies the files themselves)."""
        return 0


class TableStatements:
    """Table statements applied through a format's StatementTables; ``forget(db, table)``: the caches of the job
    that know the table's lake tables (its columns, key, files...) let go after each action."""

    def __init__(self, tables: StatementTables, generations: ChangeLogGenerations,
                 forget: Callable[[str, str], None]) -> None:
        self.tables = tables
        self.generations = generations
        self.forget = forget
        self.alters: Alters | None = None  # ALTERs' columns (schema_alter.py); None: the change log's row alone
        self._ended: dict[Name, bool] = {}
        self._lock = threading.Lock()

    # --- what the job asks

    def change_log(self, db: str, table: str) -> str:
        """The table's current change log (its name)."""
        return self.generations.current(db, table).name

    def ended(self, db: str, table: str) -> bool:
        """Whether the table ended (dropped, renamed away) with no table created under its name since: its
        next rows are a new table's (``recreate``)."""
        key = (db, table)
        with self._lock:
            found = self._ended.get(key)
        if found is None:
            found = ended_of(self.tables.properties(db, self.change_log(db, table))) is not None
            with self._lock:
                self._ended[key] = found
        return found

    def apply(self, action: Action) -> None:
        op = action.op
        if op == "truncate":
            self._truncate(action)
        elif op == "drop":
            self._drop(action)
        elif op == "create":
            self._create(action)
        elif op == "rename":
            self._rename(action)
        elif op == "partition":
            self._partition(action)
        elif op == "reload":
            self._truncate(action)
        elif op == "alter":
            self.alters.apply(action) if self.alters is not None else self._row(action, action.name)
        else:
            raise LandError(f"`{action.name[0]}`.`{action.name[1]}`: unknown table statement {action.describe()}")
        for db, table in action.names:
            self._changed(db, table)

    def rewrite_rows(self, action: Action) -> int:
        """How many mirror rows applying the action writes anew (0: none, or only metadata, or it is applied already):
        a long rewrite parks the table instead of holding the batch back (parking.py)."""
        if action.op == "alter" and self.alters is not None:
            return self.alters.rewrite_rows(action)
        if action.op == "rename" and action.to is not None:
            target = self.tables.properties(*action.to)
            if self.tables.properties(*action.name) is None or (target is not None and applied(target, action.marker)):
                return 0
            return self.tables.copy_rows(action.name, action.to)
        return 0

    def applied_already(self, action: Action) -> bool:
        """Whether the action's last write has committed: the old name's change log records it (or later)."""
        db, table = action.name
        properties = self.tables.properties(db, self.change_log(db, table))
        return properties is not None and applied(properties, action.marker)

    def recreate(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str], seq: bytes,
                 batch_id: int) -> None:
        """A table's first rows after it ended, without a create entry (one that names no columns, or none at
        all): a create with the rows' columns and key at their first sequence."""
        log.info("`%s`.`%s`: rows of a table created anew after it ended: its mirror starts empty with their "
                 "columns", db, table)
        marker = (seq, 0)
        target = self._generation(db, table, columns, seq)
        if key:
            self._mirror_anew(db, table, columns, key, target, marker, batch_id)
        else:
            self._end_mirror(db, table, marker, None, batch_id)
        self._continue(db, table, target, columns, None, marker, batch_id)
        self._changed(db, table)

    def start_generation(self, db: str, table: str, seq: bytes, columns: list[tuple[str, str]], batch_id: int,
                         row: pa.Table | None = None) -> Generation:
        """The table's change log goes on in its next generation from a statement at ``seq`` (created with
        ``columns``, its first row ``row`` where given, STARTED_BY ``seq``), unless that statement began the
        current one already (a replay): for any statement after which the table's rows cannot join its change
        log (generations.conflicts). The earlier generation's last row is the caller's. Returns the generation."""
        target = self.generations.for_statement(db, table, seq, True)
        if self.tables.properties(db, target.name) is None:
            self.tables.change_row(db, target.name, columns, row, {STARTED_BY: seq.hex()}, batch_id)
            log.info("`%s`.`%s`: its change log goes on in %s.%s", db, table, db, target.name)
        self.generations.started(db, table, target)
        self._changed(db, table)
        return target

    # --- the statements

    def _truncate(self, action: Action) -> None:
        db, table = action.name
        self._empty(db, table, action, {})
        self._row(action, action.name)

    def _drop(self, action: Action) -> None:
        db, table = action.name
        ended: Properties = {ENDED_PROPERTY: ended_value(action)}
        self._empty(db, table, action, ended)
        self._row(action, action.name, ended)

    def _create(self, action: Action) -> None:
        db, table = action.name
        columns = statement_columns(action.statement)
        if columns is None:  # no schema history: the rows that follow recreate the mirror (``recreate``)
            # its row where the name's table ended; a lake table that never ended is one the batch's rows after the
            # statement made (met again on a replay) or a drop not seen: no row, whichever run applies it
            if self.ended(db, table):
                self._row(action, action.name)
            return
        target = self._generation(db, table, columns, action.at.seq)
        key = statement_key(action.statement)
        if key:
            self._mirror_anew(db, table, columns, key, target, action.marker, action.at.batch_id)
        else:
            self._end_mirror(db, table, action.marker, None, action.at.batch_id)
        self._continue(db, table, target, columns, action, action.marker, action.at.batch_id)

    def _rename(self, action: Action) -> None:
        assert action.to is not None
        (db, table), (to_db, to_table) = action.name, action.to
        batch_id = action.at.batch_id
        source = self.generations.current(db, table)
        source_columns = self.tables.columns(db, source.name)
        mirror = self.tables.properties(db, table)
        if not source_columns and mirror is None:
            columns = statement_columns(action.statement) or []
            log.warning("`%s`.`%s`: renamed from `%s`.`%s` at %s, a table binlake never landed (not captured, or "
                        "no rows yet): its mirror cannot have the table's rows; run `binlake snapshot --tables "
                        "%s.%s` to read them", to_db, to_table, db, table, action.at.position, to_db, to_table)
            target = self._generation(to_db, to_table, columns, action.at.seq)
            if self._landed_since(to_db, target, action.marker):
                self.generations.started(to_db, to_table, target)
                return
            self._end_mirror(to_db, to_table, action.marker, None, batch_id)
            self._continue(to_db, to_table, target, columns, action, action.marker, batch_id)
            return
        columns = source_columns or statement_columns(action.statement) or []
        target = self._generation(to_db, to_table, columns, action.at.seq)
        current = self.tables.properties(to_db, to_table)
        if mirror is not None and not (current is not None and applied(current, action.marker)):
            self.tables.copy_mirror(action.name, action.to, {STATEMENT_PROPERTY: marker_text(action.marker),
                                                             ENDED_PROPERTY: None, CURRENT_PROPERTY: target.name},
                                    batch_id)
        elif mirror is None:  # a table without a key: no mirror to follow; an older one of the new name ends
            self._end_mirror(to_db, to_table, action.marker, None, batch_id)
        self._continue(to_db, to_table, target, columns, action, action.marker, batch_id)
        ended: Properties = {ENDED_PROPERTY: ended_value(action)}
        self._empty(db, table, action, ended)
        self._row(action, action.name, ended)

    def _partition(self, action: Action) -> None:
        db, table = action.name
        detail = action.statement.partition or {}
        if detail.get("reload"):  # a reload entry follows: it empties the mirror for the rows read again
            log.info("`%s`.`%s`: %s: the daemon reads the table again", db, table, action.describe())
        elif detail.get("action") in ROW_ACTIONS:
            log.warning("`%s`.`%s`: %s: the mirror may hold rows the server no longer has (the binlog does not say "
                        "which rows a partition statement removed or brought, and the daemon has no "
                        "snapshot_signal_table to read the table again); `binlake verify --tables %s.%s` shows them, "
                        "`binlake snapshot --replace --tables %s.%s` reads the table again", db, table,
                        action.describe(), db, table, db, table)
        self._row(action, action.name)

    def _landed_since(self, db: str, target: Generation, marker: tuple[bytes, int]) -> bool:
        """Whether a table renamed to ``target``'s name from one binlake never landed was applied, and its rows after
        the statement landed, in an earlier run (a replay): its change log records the statement, or is live without
        it. No live table of a name can be there when a table is renamed to it, so a live change log (and mirror)
        without the statement's marker is the renamed table's own, made by its rows after the statement (where no
        columns were known, the statement wrote nothing): emptying it would lose them."""
        properties = self.tables.properties(db, target.name)
        return properties is not None and (applied(properties, marker) or ended_of(properties) is None)

    # --- the writes

    def _generation(self, db: str, table: str, columns: list[tuple[str, str]], seq: bytes) -> Generation:
        """Where a table created (or renamed) under this name at ``seq`` goes on: the current change log, or the
        next generation where ``columns`` conflict with it."""
        current = self.generations.current(db, table)
        found = conflicts(self.tables.columns(db, current.name), columns)
        target = self.generations.for_statement(db, table, seq, bool(found))
        if target.number != current.number:
            log.info("`%s`.`%s`: column%s %s of another type than %s.%s has: the change log goes on in %s.%s", db,
                     table, "s" if len(found) > 1 else "", ", ".join(f"`{n}` ({a} -> {b})" for n, a, b in found), db,
                     current.name, db, target.name)
        return target

    def _continue(self, db: str, table: str, target: Generation, columns: list[tuple[str, str]],
                  action: Action | None, marker: tuple[bytes, int], batch_id: int) -> None:
        """The change log ``target`` (the current generation, or the next one, made here) goes on with the new
        table: its ``columns`` added, ``action``'s row (none: a table recreated by its rows), no longer ended."""
        properties = self.tables.properties(db, target.name)
        if properties is not None and applied(properties, marker):
            self.generations.started(db, table, target)
            return
        merged = _union(self.tables.columns(db, target.name), columns)
        if not merged:  # no columns known (no schema history, nothing landed): the table's first rows make it
            return
        row = None
        if action is not None:
            row = statement_row(action.at, merged, action.index,
                                (action.name, action.to) if action.to is not None else None)
        change: Properties = {STATEMENT_PROPERTY: marker_text(marker), ENDED_PROPERTY: None}
        if properties is None and target.number > 1:
            change[STARTED_BY] = marker[0].hex()
        self.tables.change_row(db, target.name, merged, row, change, batch_id)
        self.generations.started(db, table, target)

    def _mirror_anew(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str], target: Generation,
                     marker: tuple[bytes, int], batch_id: int) -> None:
        current = self.tables.properties(db, table)
        if current is not None and applied(current, marker):
            return
        self.tables.replace_mirror(db, table, columns, key, {STATEMENT_PROPERTY: marker_text(marker),
                                                             ENDED_PROPERTY: None, CURRENT_PROPERTY: target.name},
                                   batch_id)

    def _end_mirror(self, db: str, table: str, marker: tuple[bytes, int], ended: str | None, batch_id: int) -> None:
        """A mirror left from an earlier table of the name, where the new one has none (no key): emptied."""
        current = self.tables.properties(db, table)
        if current is None or applied(current, marker):
            return
        self.tables.empty_mirror(db, table, {STATEMENT_PROPERTY: marker_text(marker),
                                             ENDED_PROPERTY: ended or '{"op": "create", "key": null}'}, batch_id)

    def _empty(self, db: str, table: str, action: Action, extra: Properties) -> None:
        current = self.tables.properties(db, table)
        if current is None or applied(current, action.marker):
            return
        self.tables.empty_mirror(db, table, {STATEMENT_PROPERTY: marker_text(action.marker), **extra},
                                 action.at.batch_id)

    def _row(self, action: Action, name: Name, extra: Properties | None = None) -> None:
        """The action's row in the current change log of ``name``, with ``extra`` properties."""
        db, table = name
        path = self.change_log(db, table)
        properties = self.tables.properties(db, path)
        if properties is not None and applied(properties, action.marker):
            return
        columns = self.tables.columns(db, path) or statement_columns(action.statement) or []
        if properties is None and not columns:  # a table the lake has not seen yet (e.g. created): its rows make it
            log.debug("`%s`.`%s`: %s: no lake table yet, no columns named: nothing to apply", db, table,
                      action.describe())
            return
        row = statement_row(action.at, columns, action.index,
                            (action.name, action.to) if action.to is not None else None)
        self.tables.change_row(db, path, columns, row, {STATEMENT_PROPERTY: marker_text(action.marker),
                                                        **(extra or {})}, action.at.batch_id)

    def _changed(self, db: str, table: str) -> None:
        with self._lock:
            self._ended.pop((db, table), None)
        self.forget(db, table)


def _union(lake: list[tuple[str, str]], columns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The change log's columns and a new table's (no conflicts: generations.conflicts said so): new ones added,
    a type that widens kept wide."""
    from ..decode.lake_types import widens

    out = list(lake)
    index = {n: i for i, (n, _) in enumerate(out)}
    for name, dtype in columns:
        if name not in index:
            index[name] = len(out)
            out.append((name, dtype))
        elif widens(out[index[name]][1], dtype):
            out[index[name]] = (name, dtype)
    return out
