"""Apache Iceberg as the lake's format (lake_format.LakeFormat), written by pyiceberg from the driver.

Why pyiceberg and not Spark's Iceberg runtime (docs/LAND.md, "Iceberg"): the Delta side writes its Parquet files and
commits with pyarrow from the driver, a MERGE costs seconds per micro-batch; pyiceberg writes the same Arrow tables
(its Parquet writer is pyarrow's) and commits in milliseconds, in the lake's catalog (iceberg/catalog.py: Iceberg's
Hadoop catalog, iceberg/hadoop.py, or a SQL or REST one). A table's share of a batch:

- the change log ``<db>.<table>__changes`` gets the typed row changes in one append snapshot;
- the mirror ``<db>.<table>``, for a table with a key, the batch's last change per key (mirror.py): in one
  transaction the rows of every key the batch touches are deleted and the surviving after images appended.
  The delete is by position (iceberg/position_deletes.py: a position delete file of the rows' places, in one
  snapshot with the new rows) where land.deletion_vectors says so: ``always``, or ``auto`` once the data files
  whose key ranges meet the batch's keys pass ``_AUTO_POSITION_BYTES`` (a large mirror changed at scattered
  keys); else copy-on-write (files holding one are rewritten without it). Either is skipped where no data
  file's key range meets the batch's.

After each commit the table's upkeep falls due, on a thread beside the next batches (format/upkeep.py): its small
files compacted and its old snapshots expired where due (iceberg/maintenance.py), and every land.iceberg_orphan_every
commits the files a crash left (named by no live metadata) removed (iceberg/orphans.py; also when the job first loads
a table, before its first commit to it). Every write of a table, and every read of its data files to write it, holds
the table (upkeep.Upkeep.hold): it waits while the table's upkeep commits, and none commits meanwhile; other tables'
writes do not wait. Renamed columns are renamed in place (iceberg/renames.py).

Exactly once: every snapshot carries (app id, batch id) in its summary; a table whose newest snapshot of
this job has batch N already is skipped when batch N is replayed. The job is the tables' only writer."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue

from ingester.config import LandConfig

from ..batch.batch_rows import TableRows
from ..batch.default_values import default_values, fill_older, with_columns
from ..batch.evolution import SchemaEvolution
from ..batch.key_index import FileKeys
from ..batch.keys import MirrorKeys, key_property, recorded_key
from ..batch.mirror import (
    COMMIT_TS,
    DELETED,
    SEQ,
    candidate_schema,
    full_images,
    last_per_key,
    mirror_candidates,
    mirror_columns,
    statement_seq,
)
from ..batch.recent_files import RecentFiles
from ..batch.small_files import MERGE_FILES
from ..batch.writer import PARTITION_COLUMN
from ..decode.typed import typed_batches
from ..format.lake_format import (
    QUARANTINE_TABLE,
    FormatServices,
    FormatSettings,
    LakeFormat,
    TableChanges,
    Undecodable,
    VectorMode,
    quarantine_rows,
)
from ..format.mirror_read import MirrorRead
from ..format.upkeep import Due, Upkeep
from ..format.verify_results import ICEBERG_VERIFY, VERIFY_TABLE, result_schema
from ..lake.files import LakeFiles
from ..lake.generations import ChangeLogGenerations, parse_change_log
from ..lake.paths import join
from ..runtime.errors import LandError
from ..statements.table_statements import TableStatements
from .catalog import IcebergCatalog, batch_properties, first_line, landed_batch
from .maintenance import IcebergMaintenance
from .orphans import OrphanFiles
from .planning import KeptManifests
from .position_deletes import locate, stage_batch
from .renames import Renames, field_paths, has_field, in_place, moved, renamed, renamed_images
from .schema import iceberg_alters
from .statements import IcebergStatementTables, append_parts, mirror_parts
from .tables import (
    Reshape,
    WantedTable,
    change_log_properties,
    change_log_schema,
    change_rows,
    columns_property,
    key_filter,
    keys_filter,
    mirror_properties,
    mirror_schema,
    recorded_columns,
)
from .transactions import transaction
from .upkeep import copy_of, loaded_due, on_copy
from .verify import IcebergMirror

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.catalog import Catalog
    from pyiceberg.table import FileScanTask, Table

    from ..runtime.driver_threads import DriverThreads
    from ..statements.schema_alter import Mode

log = logging.getLogger("binlake.land")
QUARANTINE = ("_binlake", "quarantine")
_QUARANTINE_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                                ("error", pa.string()), ("value", pa.binary()),
                                ("headers", pa.map_(pa.string(), pa.binary())), ("batch_id", pa.int64()),
                                ("ingest_ts", pa.timestamp("us", tz="UTC"))])
# land.deletion_vectors "auto": a batch's deletes go by position once the mirror's data files its keys may be in
# pass this (the bytes a copy-on-write delete would read and rewrite: Delta's bound, delta/mirror_driver.py)
_AUTO_POSITION_BYTES = 128 << 20


class IcebergFormat(LakeFormat):
    name = "iceberg"

    def __init__(self, where: IcebergCatalog, app_id: str, keys: dict[str, list[str]] | None = None,
                 evolution: SchemaEvolution | None = None, spark: Any = None,
                 maintenance: IcebergMaintenance | None = None, on_incompatible_change: Mode = "rewrite",
                 deletes: VectorMode = "auto", threads: DriverThreads | None = None,
                 lease: Callable[[], None] | None = None, key_memory: int = LandConfig.key_memory) -> None:
        """``keys``: land.keys; ``evolution`` and ``spark``: the defaults of added columns (none without them);
        ``maintenance``: compaction and expiry after each commit (iceberg/maintenance.py's defaults without it);
        ``deletes``: land.deletion_vectors (a mirror's deletes by position); ``threads``: the driver's, which read
        the data files' keys side by side (one at a time without them); ``lease``: raises where the lake's lease is
        lost (lake/lease.py), checked before each table's upkeep; ``key_memory``: land.key_memory, the most bytes of
        the data files' keys kept between batches (position deletes)."""
        self.where = where  # (the app id: with the batch's part, lake_format.LakeFormat.part, the calling thread's own)
        self._app_id: ContextVar[str] = ContextVar(f"binlake-iceberg-app-id-{id(self)}", default=app_id)
        # the mirrors' keys, as each mirror records its own (its properties: mirror_properties, from its creation)
        self.keys = MirrorKeys(keys or {}, partial(join, where.lake), self.stored_key)
        self.evolution = evolution
        self.spark = spark
        self._catalog: Catalog | None = None
        self._opening = threading.Lock()
        self._namespaces = threading.Lock()  # pyiceberg checks, then inserts: two tables' threads would collide
        self._tables: dict[tuple[str, str], Table] = {}
        self._loading: dict[tuple[str, str], threading.Lock] = {}
        self._orphans: OrphanFiles | None = None
        self._columns: dict[tuple[str, str], list[tuple[str, str]]] = {}  # as the table has them (property)
        self.maintenance = maintenance or IcebergMaintenance()
        self.upkeep: Upkeep[Table] = Upkeep(self._upkeep, lease, self.maintenance.quiet_after, "binlake-iceberg")
        self.deletes = deletes
        self.threads = threads
        self.file_keys: RecentFiles[FileKeys] = RecentFiles(key_memory, "land.key_memory")  # by data file path
        self.manifests = KeptManifests(key_memory // 4, "land.key_memory")  # manifests' entries, deleted positions
        self.generations = ChangeLogGenerations(self._properties)
        statement_tables = IcebergStatementTables(self)
        self.table_statements = TableStatements(statement_tables, self.generations, self.forget)
        self.table_statements.alters = iceberg_alters(statement_tables, self.table_statements)
        self.table_statements.alters.mode = on_incompatible_change

    @classmethod
    def build(cls, settings: FormatSettings, services: FormatServices, catalog: IcebergCatalog,
              maintenance: IcebergMaintenance | None = None) -> IcebergFormat:
        """An Iceberg lake's format in the lake's ``catalog`` (built once by the job: Spark's session reads it too);
        ``maintenance``: land.iceberg_* (None: IcebergMaintenance's defaults with land.compact_*)."""
        kept = maintenance or IcebergMaintenance(settings.compact_files or MERGE_FILES, settings.small_file_bytes,
                                                 settings.compact_bytes)
        return cls(catalog, services.app_id, settings.keys, services.evolution, services.spark, kept,
                   settings.on_incompatible_change, settings.deletion_vectors, services.threads, services.lease,
                   settings.key_memory)

    def _properties(self, db: str, name: str) -> dict[str, str] | None:
        found = self.table(db, name)
        return None if found is None else dict(found.metadata.properties)

    @property
    def app_id(self) -> str:
        return self._app_id.get()

    @property
    def identity(self) -> str:
        return self._app_id.get()

    @identity.setter
    def identity(self, value: str) -> None:
        self._app_id.set(value)

    def forget(self, db: str, table: str) -> None:
        """A statement changed the table's lake tables: their columns are read again (the tables themselves are
        this job's objects, committed in place); the mirror's key too."""
        super().forget(db, table)
        for key in [k for k in list(self._columns) if k[0] == db]:  # (a copy: a parked table's rewrite forgets on
            # a thread of its own while the batches land)
            if key[1] == table or (parse_change_log(key[1]) or ("",))[0] == table:
                self._columns.pop(key, None)

    @property
    def orphans(self) -> OrphanFiles:
        """The removal of the tables' orphan files (iceberg/orphans.py), with the maintenance's settings."""
        with self._opening:
            if self._orphans is None:
                files = LakeFiles.of(self.where.lake, self.where.store) or LakeFiles.on_disk()
                self._orphans = OrphanFiles(files, self.where.warehouse, self.maintenance.orphan_age,
                                            self.maintenance.orphan_every)
            return self._orphans

    @property
    def catalog(self) -> Catalog:
        with self._opening:
            if self._catalog is None:
                self._catalog = self.where.open()
            return self._catalog

    def table(self, namespace: str, name: str) -> Table | None:
        """A table as this job last committed it (loaded once per process: the job is its only writer), its
        orphan files removed when it is first loaded (before this job commits to it)."""
        from pyiceberg.exceptions import NoSuchTableError

        found = self._tables.get((namespace, name))
        if found is None:
            with self._opening:
                first = self._loading.setdefault((namespace, name), threading.Lock())
            with first:  # a table's first load and its orphans' removal once, before any commit to it
                found = self._tables.get((namespace, name))
                if found is None:
                    try:
                        found = self.catalog.load_table((namespace, name))
                    except NoSuchTableError:
                        return None
                    self._remove_orphans(found)
                    self._tables[(namespace, name)] = found
                    if (quiet := loaded_due(found, self._batch(0))) is not None:  # compacted once quiet
                        self.upkeep.loaded((namespace, name), quiet)
        return found

    def _remove_orphans(self, table: Table) -> None:
        try:
            self.orphans.remove(table)
        except Exception as exc:  # never a batch's failure: the files stay, looked at again later
            log.warning("%s: orphan files not removed: %s", ".".join(table.name()), first_line(exc))

    def lake_columns(self, db: str, table: str) -> list[tuple[str, str]]:
        found = self.table(db, self.table_statements.change_log(db, table))
        return (recorded_columns(dict(found.metadata.properties)) or []) if found is not None else []

    def stored_key(self, db: str, table: str) -> tuple[bool, list[str] | None]:
        found = self.table(db, table)
        return (False, None) if found is None else (True, recorded_key(dict(found.metadata.properties)))

    def land(self, rows: TableRows, changes: TableChanges) -> None:
        db, table, union, pk, batch_id = changes.db, changes.table, changes.columns, changes.pk, changes.batch_id
        t = time.monotonic()
        name = self.table_statements.change_log(db, table)
        moves = self._renames(changes)
        columns = renamed(union, moves)
        changes_table = self.ready(
            WantedTable(db, name, change_log_schema(columns), columns, lambda: change_log_properties(columns),
                        partition=PARTITION_COLUMN),
            Reshape(renames=moves, nested=True))
        write = not self._has(changes_table, batch_id)
        if not (write or pk):
            return
        typed = list(typed_batches(union, rows.records(db, table).to_batches()))
        if moves:
            typed = [renamed_images(b, moves, columns) for b in typed]
        log.debug("%s.%s: typed %.1fs", db, table, time.monotonic() - t)
        if write:
            t = time.monotonic()
            properties = self._batch(batch_id)
            self._commit(db, name, changes_table, lambda tx: tx.append(
                change_rows(typed, columns, changes.ingest_micros), snapshot_properties=properties), properties)
            log.debug("%s.%s: change log %.1fs", db, table, time.monotonic() - t)
        if pk:
            t = time.monotonic()
            self._mirror(db, table, columns, pk, changes, typed, moves)
            log.debug("%s.%s: mirror %.1fs", db, table, time.monotonic() - t)

    def _renames(self, changes: TableChanges) -> Renames:
        """The batch's renamed columns the tables take in place (iceberg/renames.py): looked for only where the
        batch has a column the lake lacks."""
        lake = dict(changes.lake)
        if self.evolution is None or not lake or all(n in lake for n, _ in changes.columns):
            return []
        found = self.evolution.renames(changes.db, changes.table, changes.lake, changes.columns)
        return in_place(found, changes.schemas) if found else []

    def _mirror(self, db: str, table: str, columns: list[tuple[str, str]], pk: list[str], changes: TableChanges,
                typed: list[pa.RecordBatch], moves: Renames) -> None:
        full_images(db, table, changes.schemas)
        schema = candidate_schema(columns)
        found = [mirror_candidates(b, pk, schema) for b in typed]
        latest = last_per_key(pa.concat_tables(found) if found else schema.empty_table(), pk)
        self.keys.check_nulls(latest, db, table, pk)
        existing = self.table(db, table)
        known = renamed(recorded_columns(dict(existing.metadata.properties)) or [], moves) if existing else []
        if existing is not None:  # the mirror's columns and the batch's: not those of an earlier table of the name
            since = statement_seq(dict(existing.metadata.properties))  # a replayed part's older rows add no column
            columns = mirror_columns(columns, known, [g for g in changes.schemas if g.first_seq > since])
        fills = self._fills(db, table, columns, [n for n, _ in columns if existing is not None
                                                 and n not in dict(known)])
        values = default_values(self.spark, fills, dict(columns))
        latest = fill_older(latest, fills, values, SEQ)  # images older than an ADD COLUMN
        mirror = self.ready(
            WantedTable(db, table, mirror_schema(columns), columns,
                        lambda: mirror_properties(columns, key_property(pk), pk)),
            Reshape(rows=(lambda rows, names: fill_older(with_columns(rows, names, mirror_schema(columns)),
                                                         fills, values, SEQ)) if values else None,
                    renames=moves))
        if self._has(mirror, changes.batch_id):
            return
        upserts = latest.filter(pc.invert(latest.column(DELETED))).select([*(n for n, _ in columns), SEQ, COMMIT_TS])
        properties = self._batch(changes.batch_id)

        def apply(tx: Any) -> None:
            held = self._holding(mirror, latest, pk) if len(latest) else []
            if held and self._by_position(held):
                located = locate(mirror, latest.select(pk), pk, self.threads.workers if self.threads else None,
                                 self.file_keys, held, self.manifests)
                stage_batch(tx, mirror, upserts, located, properties, pk)
                return
            if held:
                tx.delete(key_filter(latest, pk), snapshot_properties=properties)
            if len(upserts):
                tx.append(upserts, snapshot_properties=properties)

        self._commit(db, table, mirror, apply, properties, pk)

    def _fills(self, db: str, table: str, columns: list[tuple[str, str]], added: list[str]) -> list[Any]:
        """The defaults the mirror needs (evolution.SchemaEvolution.defaults), renames left out."""
        if self.evolution is None or self.spark is None:
            return []
        fills = self.evolution.defaults(db, table, columns, added)
        renamed = [d.column for d in fills if d.source]
        if renamed:
            log.warning("`%s`.`%s`: renamed columns %s of the Iceberg mirror stay null in older rows", db, table,
                        ", ".join(renamed))
        return [d for d in fills if not d.source]

    def _holding(self, mirror: Table, keys: pa.Table, pk: list[str]) -> list[FileScanTask]:
        """The mirror's data files that may hold one of the keys (by their key statistics, with their delete
        files): none for a batch of new keys above the mirror's (AUTO_INCREMENT inserts), which deletes nothing
        and skips the delete's planning."""
        bounds = keys_filter(keys, pk[0])
        return self.manifests.plan(mirror, bounds if bounds is not None else AlwaysTrue())

    def _by_position(self, held: list[FileScanTask]) -> bool:
        """Whether a batch's deletes go by position (land.deletion_vectors): ``always``, or ``auto`` where the
        data files its keys may be in pass ``_AUTO_POSITION_BYTES`` (what copy-on-write would rewrite)."""
        if self.deletes == "never":
            return False
        return self.deletes == "always" or sum(t.file.file_size_in_bytes for t in held) > _AUTO_POSITION_BYTES

    def quarantine(self, errors: list[Undecodable], batch_id: int) -> None:
        rows = [(*r, batch_id, int(time.time() * 1e6)) for r in quarantine_rows(errors)]
        table = pa.Table.from_pylist([dict(zip(_QUARANTINE_SCHEMA.names, r, strict=True)) for r in rows],
                                     schema=_QUARANTINE_SCHEMA)
        self._append_once(QUARANTINE, QUARANTINE_TABLE, table, batch_id)

    def verify_mirror(self, db: str, table: str) -> MirrorRead | None:
        """The mirror loaded from the catalog anew (not the job's own copy): a write behind the job's back is
        what verify looks for. Its upkeep finished first: no expiry deletes the files of the snapshot read."""
        from pyiceberg.exceptions import NoSuchTableError

        self.upkeep.settle((db, table))
        try:
            return IcebergMirror(self.catalog.load_table((db, table)))
        except NoSuchTableError:
            return None

    def record_verify(self, rows: list[dict[str, Any]], batch_id: int) -> None:
        self._append_once(ICEBERG_VERIFY, VERIFY_TABLE, pa.Table.from_pylist(rows, schema=result_schema()), batch_id)

    def _append_once(self, name: tuple[str, str], location: str, rows: pa.Table, batch_id: int) -> None:
        """``rows`` appended to the job's own table ``name`` (created at ``<lake>/<location>``), once per batch."""
        found = self.ready(WantedTable(*name, rows.schema, [], dict, location=location))
        if not self._has(found, batch_id):
            properties = self._batch(batch_id)
            self._commit(*name, found, lambda tx: tx.append(rows, snapshot_properties=properties), properties)

    def _batch(self, batch_id: int) -> dict[str, str]:
        return batch_properties(self.app_id, batch_id)

    def _has(self, table: Table, batch_id: int) -> bool:
        landed = landed_batch(table, self.app_id)
        return landed is not None and landed >= batch_id

    def ready(self, wanted: WantedTable, reshape: Reshape | None = None) -> Table:
        """The table, created where it does not exist, and given the batch's columns where it lacks some
        (added columns, Iceberg's type promotions: int to long, float to double, a wider decimal), its rows and
        columns brought along as ``reshape`` says."""
        namespace, name, columns = wanted.namespace, wanted.name, wanted.columns
        found = self.table(namespace, name)
        if found is None:
            return self.create(wanted)
        if columns and self._columns.get((namespace, name)) != columns:
            if recorded_columns(dict(found.metadata.properties)) != columns:
                with self.upkeep.hold((namespace, name)):
                    self._reshape(found, wanted, reshape or Reshape())
            self._columns[(namespace, name)] = columns
        return found

    def _reshape(self, found: Table, wanted: WantedTable, reshape: Reshape) -> None:
        """The table given ``wanted``'s columns (ready's schema change, with its rewrite)."""
        namespace, name, schema, columns = wanted.namespace, wanted.name, wanted.schema, wanted.columns
        rows, renames, nested = reshape.rows, reshape.renames, reshape.nested
        try:
            names = moved([f.name for f in found.schema().fields], renames or [])
            names += [n for n in schema.names if n not in names]

            def rewrite(part: pa.Table) -> pa.Table:
                assert rows is not None  # only called where there is a rewrite
                return rows(part.rename_columns(moved(part.column_names, renames or [])), names)

            rewritten = mirror_parts(found, rewrite) if rows is not None and found.current_snapshot() else None
            with transaction(found) as tx:
                for move in renames or []:  # one at a time: a -> b, then b -> c
                    paths = field_paths([move], partial(has_field, tx), nested)
                    if paths:
                        with tx.update_schema() as update:
                            for path, new in paths:
                                update.rename_column(path, new)
                with tx.update_schema() as update:
                    update.union_by_name(schema)
                tx.set_properties(columns_property(columns))
                if rewritten is not None:
                    tx.delete(AlwaysTrue())
                    append_parts(tx, rewritten)
        except Exception as exc:
            raise LandError(f"the Iceberg table {namespace}.{name} cannot take the batch's columns "
                            f"(Iceberg's promotions: int to long, float to double, a wider decimal): "
                            f"{first_line(exc)}") from None

    def create(self, wanted: WantedTable) -> Table:
        """The table as ``wanted`` (it does not exist yet)."""
        namespace, name, location = wanted.namespace, wanted.name, wanted.location
        catalog = self.catalog
        with self._namespaces:
            catalog.create_namespace_if_not_exists(namespace)
        # the Hadoop catalog's tables are where their names say (the quarantine too: <lake>/_binlake/quarantine)
        where = None if self.where.hadoop else self.where.location(*([location] if location else [namespace, name]))
        properties = {**wanted.properties(), **self.maintenance.table_properties()}
        with catalog.create_table_transaction((namespace, name), wanted.schema, location=where,
                                              properties=properties) as tx:
            if wanted.partition is not None:
                with tx.update_spec() as spec:
                    spec.add_identity(wanted.partition)
        found = catalog.load_table((namespace, name))
        log.info("created the Iceberg table %s.%s at %s", namespace, name, found.location())
        # a crash between an earlier creation's metadata file and its catalog entry left that file at this
        # location, named by no catalog: an orphan of the new table (before its first commit, as at a first load)
        self._remove_orphans(found)
        self._tables[(namespace, name)] = found
        return found

    def _commit(self, namespace: str, name: str, table: Table, write: Any, properties: dict[str, str],
                key: list[str] | None = None) -> None:
        """``write(transaction)``'s snapshots (summary ``properties``: the batch's) committed together, the table
        held (its running upkeep finished first); then its upkeep is due (``_upkeep``, on the upkeep's thread).
        ``key``: a mirror's."""
        with self.upkeep.hold((namespace, name)):
            before = table.metadata.current_snapshot_id
            with transaction(table) as tx:
                write(tx)
            if table.metadata.current_snapshot_id != before:  # a commit that wrote nothing needs no upkeep
                self.upkeep.due((namespace, name),
                                Due(table, properties, key or [], orphans=self.orphans.due((namespace, name))))

    def _upkeep(self, name: tuple[str, str], due: Due[Table]) -> bool:
        """A table's upkeep after the job's commits to it (on the upkeep's thread), or once it is quiet (``due.tidy``):
        its small files compacted and its old snapshots expired where due (iceberg/maintenance.py), its orphan files
        removed where due; the compaction read and written while the writers go on, then committed while they are
        kept out. Whether a compaction was committed."""
        self.upkeep.pause()  # (batches first: upkeep.py)
        prepared = self.maintenance.prepare(name, copy_of(due.table), due.key, self.upkeep.pause, self.manifests,
                                            due.tidy)
        if due.tidy and prepared is None:
            return False  # (nothing to commit: the writers are not kept out)
        self.upkeep.pause()
        prepared = self.maintenance.catch_up(name, copy_of(due.table), prepared)  # the writers' deletes meanwhile
        with self.upkeep.exclusive(name), on_copy(due.table) as table:
            compacted = self.maintenance.finish(name, table, prepared, due.properties, due.commits)
            if due.orphans:
                self._remove_orphans(table)
        return compacted

    def landing(self) -> AbstractContextManager[None]:
        return self.upkeep.landing()

    def close(self) -> None:
        """The job ends: the tables' upkeep left done first (a failure of it raised)."""
        try:
            self.upkeep.close()
        finally:
            self.maintenance.close()
            self._tables.clear()

