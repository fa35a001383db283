"""The lake's table format, one strategy behind one interface (``land.format``): what a micro-batch asks of
the tables it lands -- their columns, a table's share of the batch landed exactly once (its change log, and
its mirror where the table has a key), the quarantine's rows, the mirrors' keys as they recorded them. Delta Lake
(delta/format.py's DeltaFormat: the driver's own Delta log commits, or the JVM's Delta) and Apache Iceberg
(iceberg/format.py's IcebergFormat: pyiceberg's commits in the lake's catalog), each building its own parts from
``FormatSettings`` and ``FormatServices`` (land/formats.py's make_format). Everything format-independent --
decoding, the union schema, the mirror's candidates and the rules of its key -- stays with sink.Lander and batch/.
``binlake verify`` (verify.py) reads a mirror's rows through the format and records its results with it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ingester.config import LandConfig

from ..batch.batch_rows import TableRows
from ..batch.evolution import SchemaEvolution, SchemaGroup
from ..batch.keys import MirrorKeys
from ..lake.files import LakeFiles
from ..lake.scratch import Scratch
from ..runtime.driver_threads import DriverThreads
from .mirror_read import MirrorRead

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..statements.schema_alter import Mode
    from ..statements.statements import Action
    from ..statements.table_statements import TableStatements

QUARANTINE_TABLE = "_quarantine"
# land.deletion_vectors (Delta's mirrors: delta/mirror_driver.py; Iceberg's position deletes: iceberg/format.py):
# "auto": once a batch would rewrite a large share of a mirror's files; "always": from a mirror's creation (or its
# next batch); "never"
VectorMode = Literal["auto", "always", "never"]


class Undecodable(NamedTuple):
    """A record the job could not decode: quarantined (``--quarantine``) or the job stops naming the first."""

    topic: str
    partition: int
    offset: int
    error: str  # why
    value: bytes  # the record's value
    headers: bytes  # its headers, a pickled dict


@dataclass(frozen=True)
class FormatSettings:
    """What a lake format is built with (land.*, as the Lander has them: land/formats.py's make_format)."""

    name: str  # land.format: "delta" or "iceberg"
    lake: str
    keys: dict[str, list[str]] = field(default_factory=dict)  # land.keys: "<db>.<table>" -> its mirror's key
    # Delta: a table's batch of at most this many row changes lands by the driver (delta/landing.py), which keeps
    # the mirror itself where that reads at most driver_merge_bytes of its files (delta/mirror_driver.py)
    driver_rows: int = LandConfig.driver_rows
    driver_merge_bytes: int = 256 << 20
    # land.compact_*: small files rewritten together (delta/compaction.py, delta/mirror_driver.py,
    # iceberg/maintenance.py's defaults; compact_files None: the format's default)
    compact_files: int | None = LandConfig.compact_files
    small_file_bytes: int = LandConfig.small_file_bytes
    compact_bytes: int = LandConfig.compact_bytes
    on_incompatible_change: Mode = "rewrite"  # land.on_incompatible_change (schema_alter.py)
    deletion_vectors: VectorMode = LandConfig.deletion_vectors  # land.deletion_vectors (delta/mirror_driver.py)
    key_memory: int = LandConfig.key_memory  # land.key_memory: the mirrors' files' keys kept (batch/key_index.py)
    # land.quiet_compaction in seconds: a table no commit changed for this long is compacted whole (0: never;
    # format/upkeep.py: Delta's mirrors, delta/tidy.py; Iceberg's tables take it with iceberg/maintenance.py's settings)
    quiet_compaction: float = 30.0


@dataclass
class FormatServices:
    """The job's shared parts a lake format uses (the Lander's)."""

    spark: SparkSession
    app_id: str  # the job's identity for idempotent writes
    # the lake's files as the driver and the executors write them (lake/files.py); None: a lake only Spark's own
    # filesystems reach (e.g. abfss://)
    files: LakeFiles | None
    threads: DriverThreads
    evolution: SchemaEvolution  # the batch's union schema, the defaults of added columns
    scratch: Scratch  # the driver's Arrow tables handed to Spark through the lake's files (lake/scratch.py)
    # raises once another job took the lake's lease (lake/lease.py's LakeLease.check; None: no lease): the work a
    # format does beside the batches (Iceberg's table upkeep) checks it before each piece of it
    lease: Callable[[], None] | None = None


@dataclass
class TableChanges:
    """One table's share of a micro-batch, its schema settled (evolution.SchemaEvolution.evolve)."""

    db: str
    table: str
    lake: list[tuple[str, str]]  # the change log's columns before this batch (none: a new table)
    columns: list[tuple[str, str]]  # the batch's union schema: the row images' columns
    pk: list[str]  # the mirror's key (none: change log only)
    schemas: list[SchemaGroup]
    batch_id: int
    ingest_micros: int  # the batch's ingest_ts

    @property
    def rows(self) -> int:
        return sum(g.n for g in self.schemas)


class LakeFormat(ABC):
    """A lake's table format. Every write of batch N is idempotent by (the job's app id, N): a batch replayed
    after a crash skips each table that already has it."""

    name: str

    @abstractmethod
    def lake_columns(self, db: str, table: str) -> list[tuple[str, str]]:
        """The table's columns in the lake (its change log's row images, Spark DDL types); none for a new one."""

    @abstractmethod
    def land(self, rows: TableRows, changes: TableChanges) -> None:
        """The table's change log brought to the batch's schema and given its row changes, and its mirror
        (a key: ``changes.pk``) their last state per key; each skipped where it has the batch already."""

    # Table statements (table_statements.py) over the format's own writes of them; its change logs' generations
    table_statements: TableStatements
    # The mirrors' keys (keys.py), read from and recorded in the format's own mirrors
    keys: MirrorKeys

    def apply(self, action: Action) -> None:
        """What a table statement did to a table (statements.Action), applied to its lake tables at its place in
        the batch: a row of its own in the change log, and its effect on the mirror; each lake table skipped where
        it has the action already (table_statements.py)."""
        self.table_statements.apply(action)

    def forget(self, db: str, table: str) -> None:
        """A statement changed the table's lake tables: what the format keeps of them (their mirror's key too) is
        read again."""
        self.keys.forget(db, table)

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """The writes inside are part ``name`` of the batch (statements.py; "" the batch's own): idempotent on their
        own, so that a replay skips the parts that committed."""
        base = self.identity
        with self.identified(f"{base}~{name}" if name else base):
            yield

    def landing(self) -> AbstractContextManager[None]:
        """A whole batch lands inside (sink.Lander.process): a format with work of its own beside the batches lets
        it go first (the upkeep of Iceberg's tables and of quiet Delta mirrors, format/upkeep.py)."""
        return nullcontext()

    @contextmanager
    def identified(self, identity: str) -> Iterator[None]:
        """The writes inside carry ``identity`` (a parked table's rewrite: the identity it had in its batch,
        parking.py). The identity is the calling thread's own (a context variable): a rewrite beside the batches and
        the batches' parts do not see each other's; threads that land a part's tables are given the part's (a copied
        context)."""
        base = self.identity
        self.identity = identity
        try:
            yield
        finally:
            self.identity = base

    @property
    @abstractmethod
    def identity(self) -> str:
        """The writer identity the format's idempotent writes carry (the job's app id, with the batch's part)."""

    @identity.setter
    @abstractmethod
    def identity(self, value: str) -> None: ...

    @abstractmethod
    def quarantine(self, errors: list[Undecodable], batch_id: int) -> None:
        """Undecodable records landed in the lake's quarantine table (``--quarantine``)."""

    @abstractmethod
    def verify_mirror(self, db: str, table: str) -> MirrorRead | None:
        """The table's mirror as it is in the lake now, opened for verify's comparison (None: it has none)."""

    @abstractmethod
    def record_verify(self, rows: list[dict[str, Any]], batch_id: int) -> None:
        """Verify results (verify_results.RESULT_COLUMNS' values by name) recorded in the lake's results table,
        once per batch: a batch replayed after a crash that recorded them adds none."""

    def close(self) -> None:  # noqa: B027 (most formats keep nothing open)
        """The job ends."""


def quarantine_rows(errors: list[Undecodable]) -> list[tuple[Any, ...]]:
    """The quarantine table's rows of ``errors`` (its columns: QUARANTINE_DDL), without batch_id and ingest_ts."""
    import pickle

    return [(e.topic, e.partition, e.offset, e.error, e.value, dict(pickle.loads(e.headers).items())) for e in errors]


QUARANTINE_DDL = "topic string, partition int, offset bigint, error string, value binary, headers map<string,binary>"
