"""Typed binlog events: what the codec returns, one class per kind of event.

Every event carries its header and the stream position it started at. ``to_dict`` gives the
stable JSON form documented in docs/JSONL.md (bytes are left as bytes; the writer encodes them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from .constants import EventType as ET
from .constants import event_type_name

if TYPE_CHECKING:
    from .rows import RowImages
    from .table_map import TableMap


@dataclass(slots=True, kw_only=True, eq=False)
class Event:
    """Header fields common to every event."""

    type_code: int
    timestamp: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int
    position: int
    in_payload: bool = False


    def to_dict(self) -> dict[str, Any]:
        build = _DICT_BUILDERS.get(type(self)) or _dict_builder(type(self))
        d = build(self)
        if self.in_payload:
            d["in_payload"] = True
        return d


EVENT_NAMES: dict[int, str] = {int(code): event_type_name(code) for code in ET}
EVENT_NAMES.update({
    **dict.fromkeys((20, 23, 30, 166, 169), "write_rows"),
    **dict.fromkeys((21, 24, 31, 39, 167, 170), "update_rows"),
    **dict.fromkeys((22, 25, 32, 168, 171), "delete_rows"),
    41: "heartbeat", 162: "mariadb_gtid", 163: "mariadb_gtid_list", 165: "query",
})

_DICT_BUILDERS: dict[type, Any] = {}


def _dict_builder(cls: type[Event]) -> Any:
    """A per-class function returning the event's dict with one dict display (no loops)."""
    body = [f.name for f in dataclasses.fields(cls) if f.name not in _HEADER_FIELDS and f.repr]
    items = ", ".join(f"{name!r}: e.{name}" for name in (*_JSON_HEADER, *body))
    ns: dict[str, Any] = {"NAMES": EVENT_NAMES}
    exec(f"def build(e):\n    return {{'type': NAMES.get(e.type_code, 'unknown'), {items}}}", ns)
    _DICT_BUILDERS[cls] = ns["build"]
    return ns["build"]


_JSON_HEADER = ("type_code", "position", "log_pos", "timestamp", "server_id", "flags")
_HEADER_FIELDS = frozenset(
    ("type_code", "timestamp", "server_id", "event_size", "log_pos", "flags", "position", "in_payload")
)


@dataclass(slots=True, kw_only=True, eq=False)
class UnknownEvent(Event):
    """An event type this codec does not know: surfaced with its body, never dropped."""

    body: bytes


@dataclass(slots=True, kw_only=True, eq=False)
class FormatDescriptionEvent(Event):
    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: list[int]
    checksum_algorithm: int | None  # None: pre-5.6 FDE without the field; 0 off; 1 CRC32


@dataclass(slots=True, kw_only=True, eq=False)
class StartV3Event(Event):
    binlog_version: int
    server_version: str
    create_timestamp: int


@dataclass(slots=True, kw_only=True, eq=False)
class QueryEvent(Event):
    thread_id: int
    exec_time: int
    error_code: int
    database: str
    query: str
    status_vars: dict[str, Any]
    compressed: bool = False


@dataclass(slots=True, kw_only=True, eq=False)
class RotateEvent(Event):
    next_position: int
    next_file: str


@dataclass(slots=True, kw_only=True, eq=False)
class StopEvent(Event):
    """StopEvent."""


@dataclass(slots=True, kw_only=True, eq=False)
class XidEvent(Event):
    xid: int


@dataclass(slots=True, kw_only=True, eq=False)
class IntvarEvent(Event):
    kind: str  # LAST_INSERT_ID or INSERT_ID
    value: int


@dataclass(slots=True, kw_only=True, eq=False)
class RandEvent(Event):
    seed1: int
    seed2: int


@dataclass(slots=True, kw_only=True, eq=False)
class UserVarEvent(Event):
    name: str
    value_type: str | None  # string, real, int, row, decimal; None when the value is NULL
    charset: int | None
    value: Any
    unsigned: bool = False


@dataclass(slots=True, kw_only=True, eq=False)
class IncidentEvent(Event):
    incident: int
    message: str


@dataclass(slots=True, kw_only=True, eq=False)
class HeartbeatEvent(Event):
    log_file: str
    log_position: int | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class IgnorableEvent(Event):
    body: bytes


@dataclass(slots=True, kw_only=True, eq=False)
class RowsQueryEvent(Event):
    query: str


@dataclass(slots=True, kw_only=True, eq=False)
class AnnotateRowsEvent(Event):
    query: str


@dataclass(slots=True, kw_only=True, eq=False)
class TableMapEvent(Event):
    table_map: TableMap = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = Event.to_dict(self)
        d.update(self.table_map.to_dict())
        return d


@dataclass(slots=True, kw_only=True, eq=False)
class RowsEvent(Event):
    """WRITE/UPDATE/DELETE rows (v0, v1, v2, MariaDB compressed, MySQL partial JSON update).

    ``rows`` holds one dict per row: ``{"after": image}`` (write), ``{"before": image}`` (delete)
    or ``{"before": image, "after": image}`` (update), each image mapping the names of the present
    columns, in column order, to values. The decoder builds this shape directly: it is the
    JSONL contract too, so rendering copies nothing. A columnar decoder (``BinlogDecoder(columnar=True)``)
    holds a ``codec.rows.RowImages`` instead, whose iteration yields those same dicts.
    """

    kind: ClassVar[str] = ""
    table_id: int
    rows_flags: int
    extra_data: bytes | None
    column_count: int
    columns_before: tuple[int, ...]  # indexes of the columns present in the before image
    columns_after: tuple[int, ...]  # ... and in the after image
    table_map: TableMap = field(repr=False)
    rows: list[Any] | RowImages = field(repr=False)

    @property
    def database(self) -> str:
        return self.table_map.database

    @property
    def table(self) -> str:
        return self.table_map.table

    def row_dicts(self) -> Iterator[dict[str, dict[str, Any]]]:
        return iter(self.rows)

    def to_dict(self) -> dict[str, Any]:
        tm = self.table_map
        d = {
            "type": EVENT_NAMES.get(self.type_code, "unknown"), "type_code": self.type_code,
            "position": self.position, "log_pos": self.log_pos, "timestamp": self.timestamp,
            "server_id": self.server_id, "flags": self.flags, "database": tm.database, "table": tm.table,
            "table_id": self.table_id, "column_count": self.column_count, "rows_flags": self.rows_flags,
            "rows": self.rows if isinstance(self.rows, list) else list(self.rows),
        }
        if self.extra_data:
            d["extra_data"] = self.extra_data
        if self.in_payload:
            d["in_payload"] = True
        return d


@dataclass(slots=True, kw_only=True, eq=False)
class WriteRowsEvent(RowsEvent):
    kind: ClassVar[str] = "write"


@dataclass(slots=True, kw_only=True, eq=False)
class SnapshotRowsEvent(WriteRowsEvent):
    """Rows read by a snapshot (binlake's own event, type code 250, never a server's): a consumer lands
    them like inserted rows and tells them apart by ``kind``. Its table map comes from
    information_schema and its values have exactly the binlog decoder's representation."""

    kind: ClassVar[str] = "read"
    # where its rows are in the snapshot (binlake run's snapshot; None: not said): whether its first row is
    # its table's first, its last row the table's last, and whether the table is the snapshot's first, last
    marks: tuple[bool, bool, bool, bool] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = RowsEvent.to_dict(self)
        d["type"] = "read_rows"
        return d


@dataclass(slots=True, kw_only=True, eq=False)
class VerifyRowsEvent(SnapshotRowsEvent):
    """A chunk of a table's rows read by ``binlake verify`` at a known point of the stream: compared with
    the lake's rows there, never applied. ``verify`` says which run and chunk, the chunk's key range and
    the keys changed while it was read (excluded from the comparison)."""

    kind: ClassVar[str] = "verify"
    verify: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = RowsEvent.to_dict(self)
        d["type"] = "verify_rows"
        d["verify"] = self.verify
        return d


@dataclass(slots=True, kw_only=True, eq=False)
class UpdateRowsEvent(RowsEvent):
    kind: ClassVar[str] = "update"


@dataclass(slots=True, kw_only=True, eq=False)
class DeleteRowsEvent(RowsEvent):
    kind: ClassVar[str] = "delete"


@dataclass(slots=True, kw_only=True, eq=False)
class GtidEvent(Event):
    """MySQL GTID / ANONYMOUS_GTID / GTID_TAGGED: starts a transaction."""

    gtid_flags: int
    uuid: str
    gno: int
    tag: str | None = None
    last_committed: int | None = None
    sequence_number: int | None = None
    immediate_commit_timestamp: int | None = None  # microseconds since the epoch
    original_commit_timestamp: int | None = None
    transaction_length: int | None = None
    immediate_server_version: int | None = None
    original_server_version: int | None = None
    commit_group_ticket: int | None = None

    @property
    def gtid(self) -> str:
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"


@dataclass(slots=True, kw_only=True, eq=False)
class AnonymousGtidEvent(GtidEvent):
    """AnonymousGtidEvent."""


@dataclass(slots=True, kw_only=True, eq=False)
class GtidTaggedEvent(GtidEvent):
    """GtidTaggedEvent."""


@dataclass(slots=True, kw_only=True, eq=False)
class PreviousGtidsEvent(Event):
    gtid_set: str  # MySQL text form, e.g. "uuid:1-5:7,uuid2:tag:1-3"
    sids: list[dict[str, Any]]


@dataclass(slots=True, kw_only=True, eq=False)
class TransactionContextEvent(Event):
    server_uuid: str
    thread_id: int
    gtid_specified: bool
    snapshot_version: bytes
    write_set: list[bytes]
    read_set: list[bytes]


@dataclass(slots=True, kw_only=True, eq=False)
class ViewChangeEvent(Event):
    view_id: str
    seq_number: int
    certification_info: dict[str, bytes]


@dataclass(slots=True, kw_only=True, eq=False)
class XaPrepareEvent(Event):
    one_phase: bool
    format_id: int
    gtrid: bytes
    bqual: bytes


@dataclass(slots=True, kw_only=True, eq=False)
class TransactionPayloadEvent(Event):
    """MySQL 8.0.20+ compressed transaction; the decoder yields the inner events after it."""

    compression_type: int  # 0 zstd, 255 none
    payload_size: int
    uncompressed_size: int | None
    payload: bytes = field(repr=False)


@dataclass(slots=True, kw_only=True, eq=False)
class LoadEvent(Event):
    """LOAD_EVENT, NEW_LOAD_EVENT and CREATE_FILE_EVENT (MySQL 3.23-5.0 LOAD DATA)."""

    thread_id: int
    exec_time: int
    skip_lines: int
    database: str
    table: str
    file_name: str
    fields: list[str]
    field_term: bytes
    enclosed: bytes
    line_term: bytes
    line_start: bytes
    escaped: bytes
    opt_flags: int
    empty_flags: int
    file_id: int | None = None
    block: bytes | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class AppendBlockEvent(Event):
    """APPEND_BLOCK_EVENT and BEGIN_LOAD_QUERY_EVENT: a chunk of a LOAD DATA file."""

    file_id: int
    block: bytes


@dataclass(slots=True, kw_only=True, eq=False)
class FileIdEvent(Event):
    """EXEC_LOAD_EVENT and DELETE_FILE_EVENT."""

    file_id: int


@dataclass(slots=True, kw_only=True, eq=False)
class ExecuteLoadQueryEvent(QueryEvent):
    file_id: int
    fn_pos_start: int
    fn_pos_end: int
    dup_handling: int


@dataclass(slots=True, kw_only=True, eq=False)
class MariadbGtidEvent(Event):
    domain_id: int
    sequence: int
    gtid_flags: int
    commit_id: int | None = None
    xid: dict[str, Any] | None = None
    flags_extra: int | None = None
    extra_engines: int | None = None
    sa_seq_no: int | None = None
    extra: bytes | None = None

    @property
    def gtid(self) -> str:
        return f"{self.domain_id}-{self.server_id}-{self.sequence}"


@dataclass(slots=True, kw_only=True, eq=False)
class MariadbGtidListEvent(Event):
    list_flags: int
    gtids: list[str]


@dataclass(slots=True, kw_only=True, eq=False)
class BinlogCheckpointEvent(Event):
    log_file: str


@dataclass(slots=True, kw_only=True, eq=False)
class SlaveEvent(Event):
    body: bytes
