"""``alter`` table statements applied at their place (docs/LAND.md, "Schema changes"), the same for every lake
format: the plan of an ALTER against the table's lake tables, and its application through the format's writes.

The entry (ingester/records/statement.py) carries the table's columns after the statement (``columns``, from the
daemon's schema history), the renamed columns (``renamed``: new name -> old), the statement, its start and time
zone. Against the mirror's columns each column after the statement is:

- kept (the same column, its values unchanged; a safe widening is a cast),
- added (not there before: every existing row gets the default the server gave existing rows, computed from
  the statement as for ADD COLUMN without entries: defaults.lake_default),
- renamed (``renamed``: the old column's values, converted where the type changed too),
- converted (its type changed in a way that changes values: each value converted as the server's ALTER did,
  schema_changes.converter), or re-read (a conversion only the server knows: null, one warning naming
  ``binlake snapshot --tables``);

and the mirror's columns not after the statement are dropped. A mirror whose rows change is rewritten, in one
commit with the action's marker (its columns and every row: a format's ``MirrorRewrite``); one that only gains
columns without values gets them by a schema change. The change log keeps its images as written: it gains the
new columns (its older rows null there), keeps dropped and renamed-away ones, and where a column's new type cannot
join it (generations.conflicts: text <-> binary, a narrowing, another family) goes on in its next generation
(generations.py), the statement's row ending the earlier one and starting the new one.

``land.on_incompatible_change: stop`` stops the job instead at a change that is not a safe widening (any
conversion above but a widening), with one line naming the table, the column, both types and the statement.

Without schema history (an entry without ``columns``) the statement's row is all: the columns follow the table's
rows as before (evolution.py), and a change that is no safe widening stops the job.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson
import pyarrow as pa

from ingester.codec.constants import ColumnType as T
from ingester.codec.table_map import Column
from ingester.records.snapshot import decode_descriptor
from ingester.schema.column_defaults import Uncomputable
from ingester.schema.ddl import parse_ddl
from ingester.schema.ddl_operations import AddColumn, AlterTable, ChangeColumn
from ingester.schema.ddl_tokens import UnparsedDDL
from ingester.schema.table_schema import ColumnDef

from ..batch import defaults as D
from ..batch.keys import recorded_key
from ..decode.lake_types import arrow_type, widens
from ..lake.generations import CURRENT_PROPERTY
from ..runtime.errors import LandError
from .column_kinds import ZERO, Statement, Unknown, kind, time_zone_offset
from .schema_changes import converter, same_values, vector_converter
from .statements import STATEMENT_PROPERTY, Action, applied, marker_text, statement_key, statement_row
from .table_statements import _union

if TYPE_CHECKING:
    from .table_statements import Properties, TableStatements

log = logging.getLogger("binlake.land")
SOURCE_PROPERTY = "binlake.source_columns"  # a mirror's: its table's columns (descriptor form) at the last ALTER
Mode = Literal["rewrite", "stop"]
Transform = Callable[[pa.Table], pa.Table]


class MirrorRewrite(ABC):
    """A lake format's writes of a mirror's schema change, each one commit that also sets ``properties``."""

    @abstractmethod
    def rewrite_mirror(self, db: str, table: str, columns: list[tuple[str, str]], key: list[str],
                       transform: Transform, properties: Properties, batch_id: int) -> None:
        """Every row of the mirror through ``transform`` (its rows, binlake's columns included -> the rows in
        ``columns`` and binlake's columns), the mirror's schema ``columns``, in one commit."""

    @abstractmethod
    def add_mirror_columns(self, db: str, table: str, added: list[tuple[str, str]], properties: Properties,
                           batch_id: int) -> None:
        """Columns added to the mirror (null in its rows), one commit."""

    def joins(self, old: str, new: str) -> bool:
        """Whether a change log's column of lake type ``old`` takes type ``new`` in place (else: a new generation)."""
        return widens(old, new)

    def rename_change_log(self, db: str, name: str, renames: list[tuple[str, str]]) -> None:  # noqa: B027
        """Columns of a change log renamed in place ((old, new) in order), where the format does that (Iceberg's
        field ids: the rows written before keep their values under the new name); else the new name is a column of
        its own, added with the statement's row."""


@dataclass
class ColumnPlan:
    """One column of the mirror after the statement."""

    name: str
    dtype: str  # its lake type after
    action: Literal["keep", "cast", "add", "convert", "reread"]
    source: str | None = None  # the mirror's column it comes from (a renamed one's old name)
    old_type: str | None = None
    default: D.Default | None = None  # an added column's value in the rows there
    convert: Callable[[Any], Any] | None = None
    vector: Callable[[Any], Any] | None = None  # the conversion of a whole array (schema_changes.vector_converter)
    nullable: bool = True  # the old source column's: a null of a NOT NULL temporal column is a zero date
    why: str = ""  # reread: what only the server knows


@dataclass
class AlterPlan:
    columns: list[ColumnPlan]
    dropped: list[str]
    unsafe: list[ColumnPlan] = field(default_factory=list)  # converted or re-read: not a safe widening

    @property
    def lake_columns(self) -> list[tuple[str, str]]:
        return [(c.name, c.dtype) for c in self.columns]

    @property
    def rewrite(self) -> bool:
        """Whether the mirror's rows change (else at most columns are added, null)."""
        return bool(self.dropped) or any((c.action != "keep" or c.source != c.name)
                                         and not (c.action == "add" and c.default is None) for c in self.columns)


def source_columns(descriptor: list[dict[str, Any]], mariadb: bool) -> list[Column]:
    """An entry's columns (descriptor form) as the codec's Columns, MariaDB's hidden hash columns left out."""
    tm, _, _ = decode_descriptor(orjson.dumps({"database": "", "table": "", "mariadb": mariadb,
                                               "columns": descriptor, "primary_key": None, "binary": []}))
    return tm.columns[:len(tm.columns) - tm.hidden_columns]


def pseudo_column(name: str, dtype: str) -> Column:
    """A source column as far as its lake type tells (no schema history of it before the statement): text of an
    unknown charset, the integer type of its width, DECIMAL, DATETIME(6), ..."""
    ints = {"tinyint": T.TINY, "smallint": T.SHORT, "int": T.LONG, "bigint": T.LONGLONG}
    if dtype in ints:
        return Column(0, name, ints[dtype], ints[dtype], 0, True, unsigned=False)
    if dtype.startswith("decimal("):
        p, s = (int(x) for x in dtype[8:-1].split(","))
        return Column(0, name, T.NEWDECIMAL, T.NEWDECIMAL, p << 8 | s, True, unsigned=p == 20 and s == 0)
    simple = {"float": (T.FLOAT, 4), "double": (T.DOUBLE, 8), "date": (T.DATE, 0), "timestamp_ntz": (T.DATETIME2, 6),
              "timestamp": (T.TIMESTAMP2, 6)}
    if dtype in simple:
        t, meta = simple[dtype]
        return Column(0, name, t, t, meta, True)
    if dtype == "binary":
        return Column(0, name, T.BLOB, T.BLOB, 4, True, collation=63)
    if dtype == "string":
        return Column(0, name, T.BLOB, T.BLOB, 4, True, collation=None)
    return Column(0, name, T.GEOMETRY, T.GEOMETRY, 4, True)  # anything else: only the server converts it


def plan_alter(mirror: list[tuple[str, str]], before: dict[str, Column] | None, after: list[Column],
               lake_after: list[tuple[str, str]], renamed: dict[str, str], added: dict[str, D.Default | None],
               stmt: Statement) -> AlterPlan:
    """The mirror's columns after an ALTER: ``mirror`` its lake columns now, ``before`` its source columns before the
    statement by name (None: unknown, their lake types stand in), ``after`` the source columns after it and
    ``lake_after`` their lake types, ``renamed`` new name -> old, ``added`` the added columns' values (None: null)."""
    have = dict(mirror)
    out: list[ColumnPlan] = []
    used: set[str] = set()
    for col, (name, dtype) in zip(after, lake_after, strict=True):
        # a renamed column's values are its old name's; an old name taken by a new column is a new column
        source = renamed[name] if name in renamed else None if name in renamed.values() else name
        if source is None or source not in have:
            out.append(ColumnPlan(name, dtype, "add", default=added.get(name)))
            continue
        used.add(source)
        old_type, lake_type = have[source], dtype
        if old_type != dtype and widens(dtype, old_type):
            dtype = old_type  # a narrower type keeps the lake's wider one (the change log's too): values cut to fit
        old = (before or {}).get(source) or pseudo_column(source, old_type)
        if before is not None and source in before:
            unchanged = same_values(old, col, stmt.mariadb)
        else:  # only the lake type is known: a change of it that widens keeps the values
            unchanged = widens(old_type, lake_type) and kind(old, stmt.mariadb) != "other"
        if unchanged:
            out.append(ColumnPlan(name, dtype, "keep" if old_type == dtype else "cast", source, old_type))
            continue
        try:
            convert = converter(old, col, stmt)
            out.append(ColumnPlan(name, dtype, "convert", source, old_type, convert=convert, nullable=old.nullable,
                                  vector=vector_converter(old, col, stmt)))
        except Unknown as exc:
            out.append(ColumnPlan(name, dtype, "reread", source, old_type, why=str(exc)))
    plan = AlterPlan(out, [n for n in have if n not in used])
    plan.unsafe = [c for c in out if c.action in ("convert", "reread")]
    return plan


def transform(plan: AlterPlan, values: dict[str, pa.Scalar], meta: list[str], table: str = "") -> Transform:
    """The mirror's rows -> the rows after the statement (``values``: the added columns' defaults as scalars;
    ``meta``: binlake's own columns, kept)."""

    def apply(rows: pa.Table) -> pa.Table:
        arrays, fields = [], []
        n = len(rows)
        for c in plan.columns:
            typ = arrow_type(c.dtype)
            if c.action == "add":
                scalar = values.get(c.name)
                array = pa.nulls(n, typ) if scalar is None else pa.repeat(scalar.cast(typ), n)
            elif c.action == "reread":
                array = pa.nulls(n, typ)
            elif c.action == "convert":
                assert c.source is not None
                old = rows.column(c.source).combine_chunks()
                array = (c.vector(old).cast(typ) if c.vector is not None
                         else pa.array(_converted(c, old.to_pylist(), table), typ))
            else:
                assert c.source is not None
                array = rows.column(c.source).combine_chunks().cast(typ)
            arrays.append(array)
            fields.append(pa.field(c.name, typ))
        for name in meta:
            arrays.append(rows.column(name).combine_chunks())
            fields.append(rows.schema.field(name))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    return apply


def _converted(c: ColumnPlan, values: list[Any], table: str) -> list[Any]:
    """A column's old values converted (a value only the server can convert: null, said once per column)."""
    assert c.convert is not None
    convert, zero = c.convert, not c.nullable
    out: list[Any] = []
    unknown = 0
    for v in values:
        if v is None and not zero:
            out.append(None)
            continue
        try:
            out.append(convert(ZERO if v is None else v))
        except Unknown as exc:
            unknown += 1
            c.why = str(exc)
            out.append(None)
    if unknown:
        log.warning("%s: the mirror's column `%s` (%s -> %s) is null in %d rows written before the ALTER: only the "
                    "server knows their values (%s); `binlake snapshot --tables %s` reads the rows again", table,
                    c.name, c.old_type, c.dtype, unknown, c.why, table)
    return out


def added_columns(statement: str, default_db: str) -> dict[str, ColumnDef]:
    """The columns a statement adds, by lower-case name, as its text defines them (their DEFAULT...)."""
    try:
        ops = parse_ddl(statement, default_db)
    except UnparsedDDL:
        return {}
    found: dict[str, ColumnDef] = {}
    for op in ops:
        if isinstance(op, AlterTable):
            for spec in op.specs:
                if isinstance(spec, AddColumn):
                    found[spec.column.name.lower()] = spec.column
                elif isinstance(spec, ChangeColumn):
                    found.setdefault(spec.column.name.lower(), spec.column)
    return found


@dataclass
class _Prepared:
    """An ALTER's plan against its table's lake tables (Alters._prepare)."""

    lake_after: list[tuple[str, str]]  # the table's lake columns after the statement
    mirror_props: dict[str, str] | None  # the mirror's properties (None: no mirror)
    plan: AlterPlan
    lake: list[tuple[str, str]]  # the current change log's columns
    versioned: list[tuple[str, str, str]]  # (column, the change log's type, the new one) that cannot join it


class Alters:
    """``alter`` actions (table_statements.TableStatements.apply's), through the format's writes: ``tables``'
    change rows and generations, ``mirrors``' rewrites; ``values(defaults, types)``: the added columns' defaults
    (Spark SQL, defaults.py) as Arrow scalars; ``meta``: binlake's own mirror columns."""

    def __init__(self, statements: TableStatements, mirrors: MirrorRewrite,
                 values: Callable[[list[D.Default], dict[str, str]], dict[str, pa.Scalar]], meta: list[str],
                 mode: Mode = "rewrite") -> None:
        self.statements = statements
        self.mirrors = mirrors
        self.values = values
        self.meta = meta
        self.mode: Mode = mode

    def apply(self, action: Action) -> None:
        st = action.statement
        db, table = action.name
        if st.columns is None:  # no schema history: the statement's row; the columns follow the rows (evolution.py)
            self.statements._row(action, action.name)
            return
        p = self._prepare(action)
        mirror_props, plan, versioned, lake, lake_after = p.mirror_props, p.plan, p.versioned, p.lake, p.lake_after
        change_log = self.statements.change_log(db, table)
        log_properties = self.statements.tables.properties(db, change_log)
        if st.renamed and log_properties is not None and not applied(log_properties, action.marker):
            self.mirrors.rename_change_log(db, change_log, [(old, new) for new, old in st.renamed.items()])
            lake = self.statements.tables.columns(db, change_log)
            versioned = self._versioned(lake, lake_after)
        if self.mode == "stop" and (plan.unsafe or versioned) and not (mirror_props and applied(mirror_props,
                                                                                                action.marker)):
            raise LandError(self._stop_line(action, plan, versioned))
        target = self._change_log(action, lake, lake_after, versioned)
        if mirror_props is None or applied(mirror_props, action.marker):
            return
        key = recorded_key(mirror_props) or statement_key(st)
        properties: Properties = {STATEMENT_PROPERTY: marker_text(action.marker),
                                  SOURCE_PROPERTY: orjson.dumps(st.columns).decode(), CURRENT_PROPERTY: target}
        for c in plan.columns:
            if c.action == "reread":
                log.warning("`%s`.`%s`: the mirror's column `%s` (%s -> %s) is null in the rows written before %s: "
                            "only the server knows their values (%s); `binlake snapshot --tables %s.%s` reads the "
                            "rows again", db, table, c.name, c.old_type, c.dtype, action.describe(), c.why, db, table)
        if plan.rewrite:
            values = self.values([d for c in plan.columns if (d := c.default) is not None], dict(lake_after))
            self.mirrors.rewrite_mirror(db, table, plan.lake_columns, key,
                                        transform(plan, values, self.meta, f"{db}.{table}"), properties,
                                        action.at.batch_id)
            log.info("`%s`.`%s`: the mirror rewritten for %s", db, table, action.describe())
        else:
            added = [(c.name, c.dtype) for c in plan.columns if c.action == "add"]
            self.mirrors.add_mirror_columns(db, table, added, properties, action.at.batch_id)

    def rewrite_rows(self, action: Action) -> int:
        """How many rows of the mirror applying the action rewrites (0: none, it is applied already, or it stops the
        job: land.on_incompatible_change stop)."""
        if action.statement.columns is None:
            return 0
        p = self._prepare(action, quiet=True)
        if p.mirror_props is None or applied(p.mirror_props, action.marker) or not p.plan.rewrite:
            return 0
        if self.mode == "stop" and (p.plan.unsafe or p.versioned):
            return 0
        return self.statements.tables.mirror_rows(*action.name)

    def _prepare(self, action: Action, quiet: bool = False) -> _Prepared:
        """The ALTER's plan against the table's lake tables as they are (an entry with columns); ``quiet``: its
        warnings left to the ALTER's application."""
        st = action.statement
        assert st.columns is not None
        db, table = action.name
        tables = self.statements.tables
        after = source_columns(st.columns, st.mariadb)
        from ..decode.arrow_rows import LakeColumn

        lake_after = [(c.name, LakeColumn(c, st.mariadb).dtype) for c in after]
        mirror_props = tables.properties(db, table)
        mirror = tables.columns(db, table) if mirror_props is not None else []
        before = self._before(st.before, mirror_props, st.mariadb)
        stmt = Statement(st.micros, time_zone_offset(st.time_zone), st.mariadb)
        defaults = self._defaults(action, [n for n, _ in lake_after if n not in dict(mirror)
                                           and n not in st.renamed], dict(lake_after), quiet)
        plan = plan_alter(mirror, before, after, lake_after, dict(st.renamed), defaults, stmt)
        lake = tables.columns(db, self.statements.change_log(db, table))
        return _Prepared(lake_after, mirror_props, plan, lake, self._versioned(lake, lake_after))

    def _versioned(self, lake: list[tuple[str, str]], after: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
        """The columns whose new type cannot join the change log (``lake``: its columns): its next generation."""
        have = dict(lake)
        return [(n, have[n], t) for n, t in after if n in have and have[n] != t
                and not self.mirrors.joins(have[n], t) and not self.mirrors.joins(t, have[n])]

    def _before(self, given: Any, properties: dict[str, str] | None, mariadb: bool) -> dict[str, Column] | None:
        """The table's source columns before the statement: the entry's, else the mirror's record of the last
        ALTER's; None where neither says."""
        descriptor = given
        if descriptor is None and properties and properties.get(SOURCE_PROPERTY):
            descriptor = orjson.loads(properties[SOURCE_PROPERTY])
        if descriptor is None:
            return None
        return {c.name: c for c in source_columns(descriptor, mariadb)}

    def _defaults(self, action: Action, names: list[str], types: dict[str, str],
                  quiet: bool = False) -> dict[str, D.Default | None]:
        st = action.statement
        defined = added_columns(st.statement, st.default_database or st.database)
        out: dict[str, D.Default | None] = {}
        db, table = action.name
        for name in names:
            column = defined.get(name.lower())
            if column is None:
                out[name] = None
                continue
            try:
                sql = D.lake_default(column, types[name], st.micros, st.time_zone)
            except Uncomputable as exc:
                log.log(logging.DEBUG if quiet else logging.WARNING, "`%s`.`%s`: the mirror's column `%s` stays null "
                        "in rows written before it was added: only the server can compute their value: %s. `binlake "
                        "snapshot --tables %s.%s` reads the rows again", db, table, name, exc, db, table)
                sql = None
            out[name] = None if sql is None else D.Default(name, action.at.seq, sql, st.statement)
        return out

    def _change_log(self, action: Action, lake: list[tuple[str, str]], columns: list[tuple[str, str]],
                    versioned: list[tuple[str, str, str]]) -> str:
        """The statement's row in the table's change log, which gains the new columns; where one conflicts with it,
        the row ends it and begins its next generation. Returns the current change log's name after it."""
        db, table = action.name
        tables = self.statements.tables
        current = self.statements.change_log(db, table)
        properties = tables.properties(db, current)
        marker: Properties = {STATEMENT_PROPERTY: marker_text(action.marker)}
        began = self.statements.generations.current(db, table).started_by == action.at.seq  # a replay: it began it
        if not versioned:
            if began or (properties is not None and applied(properties, action.marker)):
                return current
            union = _union(lake, columns)
            tables.change_row(db, current, union, statement_row(action.at, union, action.index), marker,
                              action.at.batch_id)
            return current
        if properties is not None and not applied(properties, action.marker) and not began:
            tables.change_row(db, current, lake, statement_row(action.at, lake, action.index), marker,
                              action.at.batch_id)
        log.info("`%s`.`%s`: column%s %s of another type than its change log's: %s", db, table,
                 "s" if len(versioned) > 1 else "", ", ".join(f"`{n}` ({a} -> {b})" for n, a, b in versioned),
                 action.describe())
        target = self.statements.start_generation(db, table, action.at.seq, columns, action.at.batch_id,
                                                  statement_row(action.at, columns, action.index))
        return target.name

    def _stop_line(self, action: Action, plan: AlterPlan, versioned: list[tuple[str, str, str]]) -> str:
        db, table = action.name
        st = action.statement
        if plan.unsafe:
            c = plan.unsafe[0]
            old = f"{c.source} {c.old_type}" if c.source != c.name else c.old_type
            what = f"column `{c.name}` changed from {old} to {c.dtype}"
        else:
            n, a, b = versioned[0]
            what = f"column `{n}` changed from {a} to {b}"
        return (f"`{db}`.`{table}`: {what} at binlog position {action.at.position} (file:position:index), by "
                f"{' '.join(st.statement.split())[:300]}; not a safe widening, and land.on_incompatible_change is "
                "stop: the job stops (land.on_incompatible_change: rewrite rewrites the table's mirror and versions "
                "its change log instead)")
