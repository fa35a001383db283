"""iceberg/transactions.py: a transaction that keeps its staged metadata between changes commits what pyiceberg's own
commits (read back by pyiceberg from the catalog anew), and its metadata follows every staged change: an append, a
delete, a property set, in one transaction and in several."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Transaction

from streaming_job.iceberg.transactions import KeptTransaction, transaction
from tests.harness.iceberg import catalog

_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(ids: range, tag: str) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [f"{tag}{i}" for i in ids]}, schema=_SCHEMA)


def _state(cat, name: str) -> tuple[list, dict, list]:
    table = cat.load_table(name)
    rows = sorted((r["id"], r["v"]) for r in table.scan().to_arrow().to_pylist())
    ops = [s.summary.operation.value for s in table.snapshots()]
    return rows, {k: v for k, v in table.properties.items() if k.startswith("t.")}, ops


def test_kept_metadata_follows_each_staged_change_and_commits_what_pyicebergs_transaction_does(tmp_path) -> None:
    results = []
    for kind in (Transaction, KeptTransaction):
        cat = catalog(tmp_path / kind.__name__)
        cat.create_namespace("db")
        table = cat.create_table("db.t", _SCHEMA)
        for step in range(3):
            with kind(table) as tx:
                before = tx.table_metadata
                assert tx.table_metadata is before or kind is Transaction  # kept while nothing changes
                tx.append(_rows(range(step * 10, step * 10 + 10), f"s{step}-"))
                staged = tx.table_metadata
                assert staged is not before and len(staged.snapshots) == len(before.snapshots) + 1
                tx.delete(EqualTo("id", step * 10 + 3))
                tx.set_properties({f"t.{step}": str(step)})
                assert tx.table_metadata.properties[f"t.{step}"] == str(step)
                assert len(tx.table_metadata.snapshots) > len(staged.snapshots)
            assert table.metadata.properties[f"t.{step}"] == str(step)
        results.append(_state(cat, "db.t"))
    assert results[0] == results[1]
    rows, properties, ops = results[1]
    assert len(rows) == 27 and (3, "s0-3") not in rows and properties == {"t.0": "0", "t.1": "1", "t.2": "2"}
    assert ops[0] == "append" and len(ops) >= 6
    assert isinstance(transaction(table), KeptTransaction)
