"""A mirror's rows as ``binlake verify`` compares them (verify.py), whatever the lake's format: the format
(lake_format.LakeFormat.verify_mirror) opens a table's mirror as a ``MirrorRead``, which gives its columns
and the rows a cut of keys (``KeyCut``) may hold. Delta's mirrors: delta/verify.py; Iceberg's:
iceberg/verify.py (pyiceberg's scan)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..batch.key_range import KeyRange
from ..batch.mirror import SEQ
from ..decode.lake_types import arrow_type


@dataclass
class KeyCut:
    """The mirror rows a batch's verify chunks of one table cover: the ``compared`` columns (and the key's) and
    the row's sequence (``_binlake_seq``) of the keys in ``(low, high]`` (``keys`` None: an order the lake cuts as MySQL
    does; low/high None: from the table's start, to its end), or of the keys ``keys`` (an order it does not:
    the chunks' rows looked up by key)."""

    types: dict[str, str]  # the mirror's columns' lake (Spark DDL) types
    compared: list[str]
    pk: list[str]
    low: tuple[Any, ...] | None = None
    high: tuple[Any, ...] | None = None
    keys: list[tuple[Any, ...]] | None = None

    @property
    def names(self) -> list[str]:
        """The columns read: the compared ones and the key's."""
        return [*self.compared, *(k for k in self.pk if k not in self.compared)]

    @property
    def schema(self) -> pa.Schema:
        """The rows' Arrow schema: the columns read, then the sequence."""
        return pa.schema([*(pa.field(n, arrow_type(self.types[n])) for n in self.names), pa.field(SEQ, pa.binary())])

    def key_table(self) -> pa.Table:
        """``keys`` as a table of the key's columns."""
        schema = pa.schema([pa.field(k, arrow_type(self.types[k])) for k in self.pk])
        return pa.Table.from_pylist([dict(zip(self.pk, key, strict=True)) for key in self.keys or []], schema=schema)

    def bounds(self) -> KeyRange:
        """The range of the key's first column the cut may hold (a superset: its low end is included)."""
        return KeyRange(None if self.low is None else self.low[0], None if self.high is None else self.high[0])

    def filter(self, rows: pa.Table) -> pa.Table:
        """``rows`` (the cut's schema or wider) kept where their first key column may be in the cut: a
        superset of its rows (verify.py keeps the rows each chunk covers)."""
        keys = rows.column(self.pk[0])
        if self.keys is not None:
            wanted = pa.array(list({key[0] for key in self.keys}), keys.type)
            return rows.filter(pc.is_in(keys, value_set=wanted))
        low, high = self.bounds()
        above = pc.greater_equal(keys, pa.scalar(low, keys.type)) if low is not None else None
        below = pc.less_equal(keys, pa.scalar(high, keys.type)) if high is not None else None
        if above is None and below is None:
            return rows
        return rows.filter(below if above is None else above if below is None else pc.and_(above, below))


class MirrorRead(ABC):
    """A table's mirror, opened for a batch's verify chunks."""

    columns: list[tuple[str, str]]  # its row columns (no _binlake_ ones), with their lake types

    @abstractmethod
    def rows(self, cut: KeyCut) -> pa.Table:
        """The mirror's rows of ``cut`` (a superset of them at most): ``cut.names`` and the sequence, with the
        values of ``cut.schema``'s types."""
