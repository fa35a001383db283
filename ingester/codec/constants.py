"""Type codes and flags of the MySQL and MariaDB binlog formats."""

from __future__ import annotations

from enum import IntEnum

BINLOG_MAGIC = b"\xfebin"
HEADER_V1 = 13  # timestamp, type, server_id, event_size
HEADER_V3 = 19  # + log_pos, flags
LOG_EVENT_BINLOG_IN_USE_F = 0x1


class EventType(IntEnum):
    UNKNOWN_EVENT = 0
    START_EVENT_V3 = 1
    QUERY_EVENT = 2
    STOP_EVENT = 3
    ROTATE_EVENT = 4
    INTVAR_EVENT = 5
    LOAD_EVENT = 6
    SLAVE_EVENT = 7
    CREATE_FILE_EVENT = 8
    APPEND_BLOCK_EVENT = 9
    EXEC_LOAD_EVENT = 10
    DELETE_FILE_EVENT = 11
    NEW_LOAD_EVENT = 12
    RAND_EVENT = 13
    USER_VAR_EVENT = 14
    FORMAT_DESCRIPTION_EVENT = 15
    XID_EVENT = 16
    BEGIN_LOAD_QUERY_EVENT = 17
    EXECUTE_LOAD_QUERY_EVENT = 18
    TABLE_MAP_EVENT = 19
    PRE_GA_WRITE_ROWS_EVENT = 20
    PRE_GA_UPDATE_ROWS_EVENT = 21
    PRE_GA_DELETE_ROWS_EVENT = 22
    WRITE_ROWS_EVENT_V1 = 23
    UPDATE_ROWS_EVENT_V1 = 24
    DELETE_ROWS_EVENT_V1 = 25
    INCIDENT_EVENT = 26
    HEARTBEAT_LOG_EVENT = 27
    IGNORABLE_LOG_EVENT = 28
    ROWS_QUERY_LOG_EVENT = 29
    WRITE_ROWS_EVENT = 30
    UPDATE_ROWS_EVENT = 31
    DELETE_ROWS_EVENT = 32
    GTID_LOG_EVENT = 33
    ANONYMOUS_GTID_LOG_EVENT = 34
    PREVIOUS_GTIDS_LOG_EVENT = 35
    TRANSACTION_CONTEXT_EVENT = 36
    VIEW_CHANGE_EVENT = 37
    XA_PREPARE_LOG_EVENT = 38
    PARTIAL_UPDATE_ROWS_EVENT = 39
    TRANSACTION_PAYLOAD_EVENT = 40
    HEARTBEAT_LOG_EVENT_V2 = 41
    GTID_TAGGED_LOG_EVENT = 42
    # MariaDB
    ANNOTATE_ROWS_EVENT = 160
    BINLOG_CHECKPOINT_EVENT = 161
    GTID_EVENT = 162
    GTID_LIST_EVENT = 163
    START_ENCRYPTION_EVENT = 164
    QUERY_COMPRESSED_EVENT = 165
    WRITE_ROWS_COMPRESSED_EVENT_V1 = 166
    UPDATE_ROWS_COMPRESSED_EVENT_V1 = 167
    DELETE_ROWS_COMPRESSED_EVENT_V1 = 168
    WRITE_ROWS_COMPRESSED_EVENT = 169
    UPDATE_ROWS_COMPRESSED_EVENT = 170
    DELETE_ROWS_COMPRESSED_EVENT = 171
    PARTIAL_ROW_DATA_EVENT = 172


class ColumnType(IntEnum):
    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    # MariaDB column compression
    BLOB_COMPRESSED = 140
    VARCHAR_COMPRESSED = 141
    VECTOR = 242
    INVALID = 243
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


def event_type_name(code: int) -> str:
    """snake_case name of an event type code (``unknown`` when the code is not known)."""
    try:
        name = EventType(code).name
    except ValueError:
        return "unknown"
    for suffix in ("_LOG_EVENT", "_EVENT"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.lower().replace("_event_", "_")
