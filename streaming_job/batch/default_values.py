"""Defaults after ADD COLUMN in an Iceberg mirror (docs/LAND.md, "Schema changes"): rows last changed before
a column was added -- the mirror's rows when it gains the column, and a batch's images older than the
statement -- get the column's default (defaults.Default: a Spark SQL value, evaluated once to an Arrow
scalar of the column's type). Renamed columns keep their values by Iceberg's field ids (iceberg/renames.py)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..decode.lake_types import arrow_type, quote
from . import defaults as D


def default_values(spark: Any, fills: list[D.Default], types: dict[str, str]) -> dict[str, pa.Scalar]:
    """Each default's value, computed by Spark (the same SQL the Delta side writes), as an Arrow scalar."""
    if not fills:
        return {}
    row = spark.sql("SELECT " + ", ".join(f"{d.value()} AS {quote(f'v{i}')}" for i, d in enumerate(fills))).toArrow()
    return {d.column: row.column(i).cast(arrow_type(types[d.column]))[0] for i, d in enumerate(fills)}


def fill_older(rows: pa.Table, fills: list[D.Default], values: dict[str, pa.Scalar], seq: str) -> pa.Table:
    """``rows`` whose sequence (column ``seq``) is older than a column's ADD COLUMN get its default where the
    column is null (idempotent: a row given its value, or changed since, keeps it)."""
    for d in fills:
        if d.column not in rows.column_names or d.column not in values:
            continue
        i = rows.schema.get_field_index(d.column)
        column = rows.column(i)
        older = pc.and_(pc.less(rows.column(seq), pa.scalar(d.seq, pa.binary())), pc.is_null(column))
        rows = rows.set_column(i, rows.field(i), pc.if_else(older, values[d.column], column))
    return rows


def with_columns(rows: pa.Table, names: list[str], schema: pa.Schema) -> pa.Table:
    """``rows`` with the columns ``names`` in that order, those it lacks null (their types: ``schema``'s)."""
    return pa.table({n: rows.column(n) if n in rows.column_names else pa.nulls(len(rows), schema.field(n).type)
                     for n in names})
