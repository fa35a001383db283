"""A Delta table's log, read and written by the driver itself: the state binlake needs of the tables it
lands -- version, protocol, schema, configuration, live files and the applications' transaction versions
-- and commits of files it wrote, without the JVM (docs/LAND.md, "Many tables").

Spark's Delta costs a Spark job to read a table's state and tens of milliseconds of JVM work a commit: a
micro-batch touching hundreds of tables paid that for each. Here a table's state is read once per process
from its last checkpoint (Parquet) and the JSON commits after it, then kept up to date by each commit (a
version another writer added, e.g. Spark's MERGE or an ALTER TABLE, is read when found). A commit is the
next version's JSON file, created only where none exists (link(2) of a file written beside it: an atomic
put-if-absent on a local file system), so no two writers can both write a version; a reader (Spark,
delta-rs) finds it as it finds any writer's commit.

A table whose protocol asks writers for more than this module does (writer features beyond
``WRITER_FEATURES``, a change data feed, column mapping) is left to the JVM: ``writable`` says so.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterable
from typing import Any

import orjson

from .files import LakeFiles
from .paths import join

LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
# Writer features whose rules the commits of this module keep: appends and file rewrites of binlake's
# own files with statistics, nothing else (invariants: binlake's lake columns have no NOT NULL; appendOnly
# forbids removes, checked in ``commit``; the type features only describe the files written; deletion vectors:
# the driver reads a file's rows without those of its deletion vector, and removes it with its vector)
WRITER_FEATURES = frozenset(("appendOnly", "invariants", "timestampNtz", "typeWidening", "typeWidening-preview",
                             "checkConstraints", "domainMetadata", "deletionVectors"))
ENGINE = "binlake"
_INTS = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


class CommitConflict(Exception):
    """Another writer wrote the version this commit was for."""


class UnreadableLog(Exception):
    """A log this module cannot read (a V2 checkpoint, a gap in the commits): the JVM's Delta can."""


def simple_type(t: Any) -> str:
    """Spark's simpleString of a type in a Delta schema (JSON): int, bigint, decimal(12,2), array<float>."""
    if isinstance(t, str):
        return _INTS.get(t, t)
    kind = t["type"]
    if kind == "array":
        return f"array<{simple_type(t['elementType'])}>"
    if kind == "map":
        return f"map<{simple_type(t['keyType'])},{simple_type(t['valueType'])}>"
    return "struct<" + ",".join(f"{f['name']}:{simple_type(f['type'])}" for f in t["fields"]) + ">"


def table_protocol(schema: dict[str, Any], configuration: dict[str, str] | None = None) -> dict[str, Any]:
    """The lowest protocol a new table with this schema and these properties needs: timestamp_ntz columns and
    deletion vectors (``delta.enableDeletionVectors``) are table features (readers and writers of version 3 and
    7); anything else is plain (1, 2), which every reader reads."""
    features = [name for name, used in (
        ("timestampNtz", '"timestamp_ntz"' in orjson.dumps(schema).decode()),
        ("deletionVectors", (configuration or {}).get("delta.enableDeletionVectors") == "true")) if used]
    if features:
        return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features,
                "writerFeatures": [*features, "appendOnly", "invariants"]}
    return {"minReaderVersion": 1, "minWriterVersion": 2}


def _vector_id(action: dict[str, Any]) -> str | None:
    """What tells apart two deletion vectors of one file (PROTOCOL.md: its storage type, path and offset)."""
    vector = action.get("deletionVector")
    if not vector:
        return None
    offset = vector.get("offset")
    return f"{vector['storageType']}{vector['pathOrInlineDv']}" + ("" if offset is None else f"@{offset}")


class TableLog:
    """One table's log state at ``version`` (-1: no table there yet); ``files``: where the table is (local
    disk by default, or an object store)."""

    def __init__(self, path: str, files: LakeFiles | None = None) -> None:
        self.path = path
        self.lake = files or LakeFiles.on_disk()
        self.log = join(path, LOG)
        self.version = -1
        self.protocol: dict[str, Any] = {}
        self.metadata: dict[str, Any] = {}
        self.files: dict[str, dict[str, Any]] = {}  # path -> its add action
        self.txns: dict[str, int] = {}  # appId -> version
        self._schema: dict[str, Any] | None = None

    # --- reading

    @classmethod
    def read(cls, path: str, files: LakeFiles | None = None) -> TableLog:
        table = cls(path, files)
        table.refresh()
        return table

    def refresh(self) -> bool:
        """Read the commits after ``version``; whether there were any. The first read lists the log (from
        the last checkpoint on); later ones only look for the next versions' files, so a log that keeps
        weeks of commits costs a file lookup per table and batch, not a listing."""
        if self.version >= 0:
            return self._read_from(self.version + 1)
        names = self.lake.list(self.log)
        if not names:
            return False
        checkpoint = self._checkpoint(names)
        if checkpoint is not None:
            self._read_checkpoint(checkpoint, names)
        newer = sorted(v for v in (int(m.group(1)) for m in map(_COMMIT.match, names) if m) if v > self.version)
        if newer and newer[0] != self.version + 1:
            raise UnreadableLog(f"{self.log}: commit {self.version + 1} is missing (found {newer[0]})")
        return self._read_from(self.version + 1) or checkpoint is not None

    def _read_from(self, version: int) -> bool:
        """Apply the commits from ``version`` on, as long as they follow one another."""
        read = False
        while True:
            data = self.lake.read(join(self.log, f"{version:020d}.json"))
            if data is None:
                return read
            self._apply(orjson.loads(line) for line in data.splitlines() if line.strip())
            self.version, read, version = version, True, version + 1

    def _checkpoint(self, names: list[str]) -> int | None:
        if "_last_checkpoint" not in names:
            return None
        data = self.lake.read(join(self.log, "_last_checkpoint"))
        return None if data is None else int(orjson.loads(data)["version"])

    def _read_checkpoint(self, version: int, names: list[str]) -> None:
        """A classic checkpoint, in one part or several (a V2 checkpoint, named by a UUID, is not read)."""
        single = re.compile(rf"^{version:020d}\.checkpoint(\.\d{{10}}\.\d{{10}})?\.parquet$")
        parts = sorted(n for n in names if single.match(n))
        if not parts:
            raise UnreadableLog(f"{self.log}: no classic checkpoint file of version {version}")
        for part in parts:
            table = self.lake.read_parquet(join(self.log, part))
            for column in ("protocol", "metaData", "txn", "add"):
                if column not in table.column_names:
                    continue
                for value in table.column(column).to_pylist():
                    if value is not None:
                        if column == "add":
                            value["partitionValues"] = dict(value.get("partitionValues") or ())
                        self._apply(({column: value},))
        self.version = version
        if "v2Checkpoint" in (self.protocol.get("readerFeatures") or ()):
            raise UnreadableLog(f"{self.log}: the table has V2 checkpoints")

    def _apply(self, actions: Iterable[dict[str, Any]]) -> None:
        for action in actions:
            if "add" in action:
                add = action["add"]
                self.files[add["path"]] = add
            elif "remove" in action:
                # a file is live by its path and deletion vector: a commit that gives a file a new deletion
                # vector adds it with the new one and removes it with the old one (in either order)
                remove = action["remove"]
                live = self.files.get(remove["path"])
                if live is not None and _vector_id(live) == _vector_id(remove):
                    del self.files[remove["path"]]
            elif "txn" in action:
                self.txns[action["txn"]["appId"]] = int(action["txn"]["version"])
            elif "metaData" in action:
                self.metadata, self._schema = action["metaData"], None
            elif "protocol" in action:
                self.protocol = action["protocol"]

    # --- what the state says

    @property
    def schema(self) -> dict[str, Any]:
        if self._schema is None:
            self._schema = orjson.loads(self.metadata["schemaString"])
        return self._schema

    def columns(self) -> list[tuple[str, str]]:
        """(name, Spark simpleString type) of each top-level column."""
        return [(f["name"], simple_type(f["type"])) for f in self.schema["fields"]]

    @property
    def configuration(self) -> dict[str, str]:
        return dict(self.metadata.get("configuration") or {})

    def rows(self) -> int:
        """The rows of its live files, from their statistics (a file without them: its size at 32 bytes a row, a
        rough guess): what a rewrite of the table costs (parking.py)."""
        total = 0
        for add in self.files.values():
            stats = add.get("stats")
            found = orjson.loads(stats).get("numRecords") if stats else None
            total += int(found) if found is not None else int(add.get("size") or 0) // 32
            total -= int((add.get("deletionVector") or {}).get("cardinality") or 0)
        return total

    def txn_version(self, app_id: str) -> int:
        """The last batch an application committed here (-1: none)."""
        return self.txns.get(app_id, -1)

    @property
    def writable(self) -> bool:
        """Whether this module's commits keep the table's protocol (else the JVM writes it)."""
        features = set(self.protocol.get("writerFeatures") or ())
        config = self.configuration
        return (self.protocol.get("minWriterVersion", 2) <= 2 or features <= WRITER_FEATURES) and \
            config.get("delta.enableChangeDataFeed", "false") != "true" and \
            config.get("delta.columnMapping.mode", "none") == "none" and \
            not any(k.startswith("delta.constraints.") for k in config)

    # --- writing

    def create_actions(self, schema: dict[str, Any], partition_by: list[str],
                       configuration: dict[str, str]) -> list[dict[str, Any]]:
        """The protocol and metadata actions of a new table (for the commit of its first files)."""
        if self.version >= 0:
            raise ValueError(f"{self.path}: the table exists")
        metadata = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                    "schemaString": orjson.dumps(schema).decode(), "partitionColumns": partition_by,
                    "configuration": configuration, "createdTime": int(time.time() * 1000)}
        return [{"protocol": table_protocol(schema, configuration)}, {"metaData": metadata}]

    def commit(self, actions: list[dict[str, Any]], operation: str, parameters: dict[str, Any],
               blind_append: bool) -> int:
        """Write ``actions`` as the next version; the version written. Raises CommitConflict where another
        writer wrote it first (the caller reads the log again and decides)."""
        if any("remove" in a for a in actions) and self.configuration.get("delta.appendOnly") == "true":
            raise ValueError(f"{self.path}: the table is append-only")
        version = self.version + 1
        now = int(time.time() * 1000)
        info = {"commitInfo": {"timestamp": now, "operation": operation, "operationParameters": parameters,
                               "readVersion": self.version, "isolationLevel": "Serializable",
                               "isBlindAppend": blind_append, "engineInfo": ENGINE, "txnId": str(uuid.uuid4())}}
        if version == 0:
            info["commitInfo"].pop("readVersion")
        data = b"\n".join(orjson.dumps(a) for a in (info, *actions)) + b"\n"
        # never two commits of one version: an atomic put-if-absent on local disk; on S3 the lake's one job
        # (lake/lease.py) commits each table from one thread
        if not self.lake.create(join(self.log, f"{version:020d}.json"), data):
            raise CommitConflict(f"Concurrent commit: version {version} of {self.path} was written by another "
                                 "writer")
        self._apply(actions)
        self.version = version
        return version
