"""The lake as delta-rs reads it (the `deltalake` package, the Delta reader of Polars and pandas users): its
protocols, and mirrors and change logs equal to what Spark read."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any


def delta_rs_table(path: Path, widened: bool = False) -> Any:
    """A table as delta-rs (the `deltalake` package, the Delta reader of Polars and pandas users) reads it,
    as an Arrow table. Its protocol is the lowest its columns need: reader 1 and writer 2, or with
    timestamp_ntz columns reader 3 and writer 7 with just that feature; it names Delta's typeWidening reader
    feature, which delta-rs cannot read, only once a column was ``widened`` (docs/LAND.md)."""
    import deltalake

    table = deltalake.DeltaTable(str(path))
    protocol = table.protocol()
    readers, writers = set(protocol.reader_features or ()), set(protocol.writer_features or ())
    assert ("typeWidening" in readers) is widened, (path, protocol)
    if not widened:
        legacy = {"invariants", "appendOnly"}  # writer 2's own, listed as features in a writer 7 protocol
        versions = (protocol.min_reader_version, protocol.min_writer_version)
        assert (readers, writers, versions) in (
            (set(), set(), (1, 2)), ({"timestampNtz"}, {"timestampNtz", *legacy}, (3, 7))), (path, protocol)
    return table.to_pyarrow_table()


def delta_rs_rows(path: Path | str) -> Any:
    """A table's live rows as delta-rs's query engine (DataFusion) reads them, as an Arrow table: it applies
    deletion vectors, which ``DeltaTable.to_pyarrow_table`` (and so pandas and Polars) refuses to read."""
    import deltalake

    return _rows(deltalake.DeltaTable(str(path)))


def _rows(delta: Any) -> Any:
    """delta_rs_rows of a table already open (a ``deltalake.DeltaTable``)."""
    import deltalake
    import pyarrow as pa

    table = pa.table(deltalake.QueryBuilder().register("t", delta).execute("SELECT * FROM t").read_all())
    table = table.select([f.name for f in delta.schema().fields])  # the table's order (partition columns too)
    return table.cast(pa.schema([pa.field(f.name, _plain(f.type), f.nullable) for f in table.schema]))


def _plain(kind: Any) -> Any:
    """An Arrow type without the query engine's own encodings (views, dictionaries), at any depth."""
    import pyarrow as pa

    if pa.types.is_string_view(kind):
        return pa.string()
    if pa.types.is_binary_view(kind):
        return pa.binary()
    if pa.types.is_dictionary(kind):
        return _plain(kind.value_type)
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in kind])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        return pa.list_(pa.field(kind.value_field.name, _plain(kind.value_type), kind.value_field.nullable))
    if pa.types.is_map(kind):
        return pa.map_(_plain(kind.key_type), pa.field(kind.item_field.name, _plain(kind.item_type),
                                                       kind.item_field.nullable))
    return kind


def delta_rs_frame(spark: Any, path: Path) -> Any:
    """A Delta table as delta-rs reads it, as a Spark DataFrame of its rows held by the driver; None for a table
    with a reader feature delta-rs cannot read (typeWidening). For checks that read what the job landed: Spark's
    own read of a Delta table just committed to replays its log in about five Spark jobs (~1 s in a busy JVM),
    which took a quarter of the land tests' time."""
    import json

    import deltalake
    from pyspark.sql.types import StructType

    table = deltalake.DeltaTable(str(path))
    if "typeWidening" in (table.protocol().reader_features or ()):
        return None
    # The log's schema is Spark's StructType in JSON: the frame's types are the table's (timestamp_ntz stays so)
    return spark.createDataFrame(_rows(table), StructType.fromJson(json.loads(table.schema().to_json())))


def plain_value(v: Any) -> Any:
    """A value as Arrow gives it (Spark gives binary as bytearray)."""
    return bytes(v) if isinstance(v, bytearray) else v


def assert_delta_rs_mirror(path: Path, spark_rows: dict, columns: list[str], key: list[str],
                           micros: set[str] | frozenset[str] = frozenset(), widened: bool = False) -> None:
    """delta-rs reads the mirror at ``path`` as Spark did (assert_arrow_mirror)."""
    assert_arrow_mirror(delta_rs_table(path, widened), f"{path} (delta-rs)", spark_rows, columns, key, micros)


def assert_arrow_mirror(table: Any, where: str, spark_rows: dict, columns: list[str], key: list[str],
                        micros: set[str] | frozenset[str] = frozenset()) -> None:
    """A reader other than Spark read a mirror (an Arrow ``table``) as Spark did: ``spark_rows`` (key tuple ->
    {column: value}, the ``micros`` columns as UTC microseconds). Arrow's values compare as Spark's do:
    timestamps (with a time zone: as microseconds; timestamp_ntz: naive datetimes), decimals, dates, binary
    (bytes, Spark's bytearray)."""
    import pyarrow as pa

    data = {c: (table.column(c).cast(pa.timestamp("us", "UTC")).cast(pa.int64()) if c in micros
                else table.column(c)).to_pylist() for c in columns}
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*data.values(), strict=True)]
    got = {tuple(r[k] for k in key): r for r in rows}
    assert len(got) == len(rows), f"{where}: duplicate keys"
    want = {k: {c: plain_value(v[c]) for c in columns} for k, v in spark_rows.items()}
    assert sorted(got) == sorted(want), where
    for k, row in want.items():
        assert got[k] == row, f"{where} {k}: {got[k]!r}, Spark {row!r}"


def assert_delta_rs_change_log(path: Path, spark_rows: list, widened: bool = False) -> None:
    """delta-rs reads the change log at ``path`` (every column, the nested images too) with the row
    changes Spark read (``change_log_rows``)."""
    assert_arrow_change_log(delta_rs_table(path, widened), str(path), spark_rows)


def assert_arrow_change_log(table: Any, where: str, spark_rows: list) -> None:
    """A change log read by a reader other than Spark (an Arrow ``table``) holds the row changes Spark read."""
    got = collections.Counter(zip(*(table.column(c).to_pylist() for c in ("op", "seq", "row_index", "gtid",
                                                                         "commit_date")), strict=True))
    want = collections.Counter((r.op, bytes(r.seq), r.row_index, r.gtid, r.commit_date) for r in spark_rows)
    assert got == want, where
