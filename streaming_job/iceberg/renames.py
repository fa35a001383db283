"""Renamed columns in Iceberg tables (docs/LAND.md, "Iceberg"): Iceberg keys columns by field id, so a RENAME
COLUMN or CHANGE renames the lake column in place and the rows written before keep their values under the
new name, in the change log's images and in the mirror. A batch's images older than the statement carry the
old name: their value moves to the new one. The Delta side adds the new name as a new column instead
(evolution.py); so does this side where the old name comes back after the rename (a column added again under
it) or the types are no safe widening."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..batch.defaults import Default
from ..batch.evolution import SchemaGroup
from ..decode.lake_types import arrow_type

Renames = list[tuple[str, str]]  # (old name, new name), in source order


def in_place(renames: list[Default], schemas: Sequence[SchemaGroup]) -> Renames:
    """The renames a table takes in place: not those whose old name is in the batch's images after the
    statement again (a column added anew under it)."""
    return [(d.source, d.column) for d in renames
            if not any(g.first_seq > d.seq and d.source in dict(g.meta["columns"]) for g in schemas)]


def renamed(columns: list[tuple[str, str]], renames: Renames) -> list[tuple[str, str]]:
    """The union ``columns`` (old and new names) as the renamed table has them: each new name at the place of
    the first of the two (the lake's), with the new name's type."""
    out = list(columns)
    for old, new in renames:
        names = [n for n, _ in out]
        if old not in names or new not in names:
            continue
        i, j = sorted((names.index(old), names.index(new)))
        out[i] = (new, dict(out)[new])
        del out[j]
    return out


def renamed_images(batch: pa.RecordBatch, renames: Renames, columns: list[tuple[str, str]]) -> pa.RecordBatch:
    """Typed row changes (typed.typed_batches, in the union schema) with their images in the renamed
    ``columns``: an image older than a rename has the old name's value under the new one."""
    fields = [pa.field(n, arrow_type(t)) for n, t in columns]
    out = {}
    for image in ("before", "after"):
        struct = batch.column(image)
        values: dict[str, Any] = {f.name: struct.field(i) for i, f in enumerate(struct.type)}
        for old, new in renames:
            if old in values and new in values:
                moved = values.pop(old).cast(values[new].type)
                values[new] = pc.coalesce(values[new], moved)
        out[image] = pa.StructArray.from_arrays([values[f.name].cast(f.type) for f in fields], fields=fields,
                                                mask=pc.is_null(struct))
    arrays = [out.get(name, batch.column(i)) for i, name in enumerate(batch.schema.names)]
    names = batch.schema.names
    return pa.RecordBatch.from_arrays(arrays, names=names)


def field_paths(renames: Renames, present: Any, nested: bool) -> list[tuple[tuple[str, ...], str]]:
    """The table's fields to rename (``present(path)``: whether the table has the field): the images' fields
    of a change log (``nested``), a mirror's columns; none already renamed (a batch replayed)."""
    prefixes: list[tuple[str, ...]] = [("before",), ("after",)] if nested else [()]
    return [((*p, old), new) for old, new in renames for p in prefixes
            if present((*p, old)) and not present((*p, new))]


def has_field(tx: Any, path: tuple[str, ...]) -> bool:
    """Whether the table (as ``tx`` has staged it) has the field at ``path``."""
    try:
        tx.table_metadata.schema().find_field(".".join(path))
    except ValueError:
        return False
    return True


def moved(names: list[str], renames: Renames) -> list[str]:
    """Column ``names`` after the renames."""
    for old, new in renames:
        names = [new if n == old else n for n in names]
    return names
