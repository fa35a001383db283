"""The type zoo in the lake: what each zoo column lands as, written down independently of
streaming_job/decode/lake_types.py, and the check that a landed zoo (with the mixed workload's tables) equals the
server's SELECT, computed by the server (HEX, +0, TIME_TO_SEC, UNIX_TIMESTAMP, ...)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.harness import zoo
from tests.harness.binlogs import verbose_counts
from tests.harness.delta_rs import (
    assert_arrow_change_log,
    assert_arrow_mirror,
    assert_delta_rs_change_log,
    assert_delta_rs_mirror,
)
from tests.harness.iceberg import pyiceberg_table
from tests.harness.land import assert_change_log, assert_change_rows, lake_frame, plain_rows
from tests.harness.workloads import mixed_workload, mixed_workload_tables

# What each zoo column lands as (docs/LAND.md), written down independently of streaming_job/decode/lake_types.py.
LAKE_TYPES = {
    "ti": "tinyint", "tiu": "smallint", "si": "smallint", "siu": "int", "mi": "int", "miu": "int", "i": "int",
    "iu": "bigint", "bi": "bigint", "biu": "decimal(20,0)", "b1": "bigint", "b17": "bigint", "b64": "bigint",
    "yr": "int", "bo": "tinyint",
    "f": "float", "d": "double", "d0": "decimal(10,0)", "d52": "decimal(5,2)", "d65": "string",
    "d189": "decimal(18,9)", "du": "decimal(12,4)",
    "dt": "date", "t0": "bigint", "t1": "bigint", "t3": "bigint", "t6": "bigint", "dt0": "timestamp_ntz",
    "dt2": "timestamp_ntz", "dt6": "timestamp_ntz", "ts0": "timestamp", "ts3": "timestamp", "ts6": "timestamp",
    "c": "string", "vc": "string", "vl": "string", "vb": "binary", "bn": "binary", "vbn": "binary",
    "tt": "string", "tx": "string", "mt": "string", "lt": "string", "tb": "binary", "bb": "binary",
    "mb": "binary", "lb": "binary", "e": "string", "s": "string", "j": "string", "cu": "string", "gk": "string",
    "vcc": "string", "bc": "binary", "c255": "string", "g": "binary", "p": "binary", "pg": "binary",
}
# Iceberg has no 8- or 16-bit integers: those land as its int (docs/LAND.md, "Iceberg")
ICEBERG_TYPES = {"tinyint": "int", "smallint": "int"}
TIMES = {"t0", "t1", "t3", "t6"}
DATETIMES = {"dt0", "dt2", "dt6"}
TIMESTAMPS = {"ts0", "ts3", "ts6"}
ZERO = ("0000-", "-00-", "-00 ")


def zoo_written(server, db: str):
    """The type zoo's and the mixed workload's tables created and written in a new database ``db``; the
    connection. (Run under BINLAKE_KAFKA_MAX_RECORD_BYTES=20000, the big rows go as chunks.)"""
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    conn = server.connect(db)
    zoo.create(conn, rows=False)
    mixed_workload_tables(conn)
    zoo.write(conn)
    mixed_workload(conn, tables=False)
    return conn


def _server_expr(col: str, sqltype: str) -> str:
    """The server computes the lake's value (as text where Python would otherwise do the work)."""
    q = f"`{col}`"
    if col in TIMES:
        return f"ROUND(TIME_TO_SEC({q}) * 1000000)"
    if col in TIMESTAMPS:
        return f"IF(CAST({q} AS CHAR) = '0000-00-00 00:00:00', NULL, ROUND(UNIX_TIMESTAMP({q}) * 1000000))"
    return zoo.select_expr(col, sqltype)


def _server_rows(conn, table: str, cols: list[tuple[str, str]]) -> dict[Any, dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"SELECT id, {', '.join(_server_expr(c, t) for c, t in cols)} FROM `{table}`")
        return {r[0]: dict(zip([c for c, _ in cols], r[1:], strict=True)) for r in cur.fetchall()}


def _expected(col: str, sqltype: str, v: Any) -> Any:
    """The server's value in the lake's representation."""
    if v is None:
        return None
    if col in zoo.BINARY:
        return v.upper()
    if col == "j":
        return ("json", json.loads(v))  # the document "null" is not SQL NULL
    if col in zoo.FLOAT32 or sqltype == "DOUBLE":
        return float(v)
    if col in TIMES or col in TIMESTAMPS:
        return int(v)
    if col == "dt" or col in DATETIMES:
        return None if any(z in v + " " for z in ZERO) else v
    return v if isinstance(v, int) else str(v)


def _lake(col: str, v: Any) -> Any:
    """The mirror's value (as collected by Spark) in the same representation."""
    if v is None:
        return None
    if col in zoo.BINARY:
        return bytes(v).hex().upper()
    if col in zoo.BITS:
        return v & (1 << 64) - 1
    if col == "j":
        return ("json", json.loads(v))
    if isinstance(v, Decimal):
        return int(v) if col == "biu" else format(v, "f")
    if col == "dt":
        return v.isoformat()
    if col in DATETIMES:
        return v
    return v


def _mirror(spark, lake: Path, db: str, table: str, cols: list[tuple[str, str]],
            lake_format: str, spark_reads: bool) -> tuple[dict, dict]:
    """Rows by id (timestamps as UTC microseconds, computed by Spark) and column types of a mirror."""
    from pyspark.sql import functions as F

    df = lake_frame(spark, lake, db, table, lake_format, spark_reads=spark_reads)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    exprs = [F.unix_micros(F.col(c)).alias(c) if c in TIMESTAMPS else F.col(c) for c, _ in cols]
    return {r["id"]: r.asDict() for r in df.select("id", *exprs).collect()}, types


def _compare_datetime(expected: Any, got: Any) -> bool:
    if expected is None or got is None:
        return expected is got
    return datetime.datetime.fromisoformat(expected) == got


def _other_reader_mirror(lake: Path, db: str, table: str, rows: dict, columns: list[str], key: list[str],
                         lake_format: str, micros: set[str] | frozenset[str] = frozenset()) -> None:
    """A reader other than Spark reads the mirror as Spark did: delta-rs (Polars', pandas' reader), or
    pyiceberg."""
    if lake_format == "iceberg":
        assert_arrow_mirror(pyiceberg_table(lake, db, table), f"{db}.{table} (pyiceberg)", rows, columns, key, micros)
    else:
        assert_delta_rs_mirror(lake / db / table, rows, columns, key, micros)


def _assert_zoo_mirror(conn, name: str, cols: list[tuple[str, str]], got: dict) -> None:
    """A zoo mirror's rows by id (timestamps as UTC microseconds) equal the server's SELECT."""
    expected = _server_rows(conn, name, cols)
    assert sorted(got) == sorted(expected), name
    for pk, row in expected.items():
        for col, sqltype in cols:
            want, have = _expected(col, sqltype, row[col]), _lake(col, got[pk][col])
            if col in DATETIMES:
                assert _compare_datetime(want, have), f"{name}.{col} id={pk}: {have!r} != {want!r}"
            else:
                assert have == want, f"{name}.{col} id={pk}: lake {have!r}, server {want!r}"


def assert_zoo_read(read: Callable[[str], Any], server, conn, db: str) -> None:
    """The zoo's and the workload's tables as a reader other than Spark reads them (``read(table name)``: an
    Arrow table, None where there is none), e.g. pyiceberg from a bucket: every mirror equals the server's
    SELECT, every change log holds the row changes mariadb-binlog --verbose counts, each once."""
    import pyarrow as pa

    for name, cols in zoo.TABLES.items():
        table = read(name)
        data = {c: (table.column(c).cast(pa.timestamp("us", "UTC")).cast(pa.int64()) if c in TIMESTAMPS
                    else table.column(c)).to_pylist() for c in ["id", *(c for c, _ in cols)]}
        rows = [dict(zip(data, values, strict=True)) for values in zip(*data.values(), strict=True)]
        _assert_zoo_mirror(conn, name, cols, {r["id"]: r for r in rows})
    for table, key in (("acct", "id"), ("ledger", "a,b")):
        names = key.split(",")
        got = {tuple(r[k] for k in names): {c: v for c, v in r.items() if not c.startswith("_binlake")}
               for r in read(table).to_pylist()}
        assert got == plain_rows(conn, table, key), table
    assert read("nopk") is None  # no primary key: change log only
    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    for table in [*zoo.TABLES, "acct", "ledger", "nopk"]:
        changes = read(f"{table}__changes")
        assert_change_rows(table, counts, [SimpleNamespace(**r) for r in changes.select(
            ["op", "seq", "row_index", "gtid", "commit_ts", "commit_date"]).to_pylist()])


def assert_zoo_landed(spark, lake: Path, server, conn, db: str, lake_format: str = "delta",
                      spark_reads: bool = True) -> None:
    """The type zoo's and the workload's mirrors equal the server's SELECT (read by Spark and by delta-rs or
    pyiceberg; a Delta lake without ``spark_reads``: by delta-rs alone, lake_frame), and their change logs hold
    the row changes mariadb-binlog --verbose counts, each once."""
    lake_types = {c: ICEBERG_TYPES.get(t, t) if lake_format == "iceberg" else t for c, t in LAKE_TYPES.items()}
    for name, cols in zoo.TABLES.items():
        got, types = _mirror(spark, lake, db, name, cols, lake_format, spark_reads)
        assert {c: types[c] for c, _ in cols} == {c: lake_types[c] for c, _ in cols}, name
        _other_reader_mirror(lake, db, name, {(k,): v for k, v in got.items()}, ["id", *(c for c, _ in cols)],
                             ["id"], lake_format, TIMESTAMPS)
        _assert_zoo_mirror(conn, name, cols, got)
    for table, key in (("acct", "id"), ("ledger", "a,b")):
        df = lake_frame(spark, lake, db, table, lake_format, spark_reads=spark_reads)
        mirror = {tuple(r[k] for k in key.split(",")): {c: r[c] for c in df.columns if not c.startswith("_binlake")}
                  for r in df.collect()}
        assert mirror == plain_rows(conn, table, key), table
        _other_reader_mirror(lake, db, table, mirror, [c for c in df.columns if not c.startswith("_binlake")],
                             key.split(","), lake_format)
    # no primary key: change log only
    assert not (lake / db / "nopk").exists() and (lake_format == "delta" or pyiceberg_table(lake, db, "nopk") is None)

    server.flush_logs()
    counts = verbose_counts(server.binlog_files()[:-1], db)
    changes = assert_change_log(spark, lake, db, counts, [*zoo.TABLES, "acct", "ledger", "nopk"], lake_format,
                                spark_reads=spark_reads)
    for table, rows in changes.items():
        if lake_format == "iceberg":
            assert_arrow_change_log(pyiceberg_table(lake, db, f"{table}__changes"), f"{db}.{table}__changes", rows)
        else:
            assert_delta_rs_change_log(lake / db / f"{table}__changes", rows)
