"""A Delta mirror's defaults of added columns given to the rows already there (batch/defaults.py: the defaults
themselves): one UPDATE, marked pending in the table's properties first so that a crash in between is finished at
the next start."""

from __future__ import annotations

from typing import Any

import orjson

from ..batch import defaults as D
from ..batch.defaults import quote_string
from ..decode.lake_types import quote


def give_existing_rows(spark: Any, path: str, defaults: list[D.Default]) -> None:
    """The defaults for the mirror rows last changed before their ADD COLUMN (idempotent: only NULLs of
    rows older than the statement change), then the pending mark goes."""
    table = f"delta.{quote(path)}"
    columns = set(spark.read.format("delta").load(path).columns)
    exprs: dict[str, str] = {}
    conditions = []
    for d in defaults:
        if d.column not in columns or (d.source and d.source not in columns):
            continue
        c = quote(d.column)
        older = f"{c} IS NULL AND _binlake_seq < X'{d.seq.hex()}'"
        value = f"CAST(({exprs[d.source]}) AS {d.sql})" if d.source in exprs else d.value()
        exprs[d.column] = f"CASE WHEN {older} THEN {value} ELSE {c} END"
        conditions.append(f"({older})")
    if exprs:  # one UPDATE for all columns: each rewrites the files it touches
        sets = ", ".join(f"{quote(n)} = {e}" for n, e in exprs.items())
        spark.sql(f"UPDATE {table} SET {sets} WHERE {' OR '.join(conditions)}")
    spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES IF EXISTS ('{D.PROPERTY}')")


def mark_pending(spark: Any, path: str, defaults: list[D.Default]) -> None:
    """Before the columns are added: a crash between adding them and ``give_existing_rows`` must not
    leave the rows null, so the mirror says what is pending (``pending``, at the next start)."""
    value = orjson.dumps([d.to_json() for d in defaults]).decode()
    spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('{D.PROPERTY}' = {quote_string(value)})")


def pending(spark: Any, path: str) -> list[D.Default]:
    from delta.tables import DeltaTable

    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    assert detail is not None  # a Delta table's detail is one row
    return D.pending_in(detail[0] or {})
