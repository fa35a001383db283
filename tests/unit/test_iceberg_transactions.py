"""iceberg/transactions.py: a transaction that keeps its staged metadata between changes, committed through the job's
catalogs (Hadoop and SQL, staging commits without copies), commits what pyiceberg's own transaction and SQL catalog
commit (read back by pyiceberg from the catalog anew), and its metadata follows every staged change: an append, a
delete, a property set, in one transaction and in several. ``staged_metadata`` is pyiceberg's
``update_table_metadata`` without the deep copy: equal results, the base left as it was, unchanged parts shared."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Transaction
from pyiceberg.table.update import update_table_metadata
from pyiceberg.types import LongType

from streaming_job.iceberg.transactions import KeptTransaction, staged_metadata, transaction
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
    plain = SqlCatalog("plain", uri=f"sqlite:///{tmp_path}/plain.db", warehouse=(tmp_path / "plain").as_uri())
    catalogs = {"pyiceberg": (plain, Transaction), "hadoop": (catalog(tmp_path / "hadoop"), KeptTransaction),
                "sql": (catalog(tmp_path / "sql", f"sqlite:///{tmp_path}/sql.db"), KeptTransaction)}
    results = {}
    for name, (cat, kind) in catalogs.items():
        assert name == "pyiceberg" or type(cat).__name__ != "SqlCatalog"  # the job's catalogs stage commits
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
        results[name] = _state(cat, "db.t")
    assert results["hadoop"] == results["pyiceberg"] == results["sql"]
    rows, properties, ops = results["hadoop"]
    assert len(rows) == 27 and (3, "s0-3") not in rows and properties == {"t.0": "0", "t.1": "1", "t.2": "2"}
    assert ops[0] == "append" and len(ops) >= 6
    assert isinstance(transaction(table), KeptTransaction)


def test_staged_metadata_is_pyicebergs_without_the_copy(tmp_path) -> None:
    cat = catalog(tmp_path)
    cat.create_namespace("db")
    table = cat.create_table("db.t", _SCHEMA)
    for step in range(3):
        table.append(_rows(range(step * 5, step * 5 + 5), "a"))
    base = table.metadata
    dumped = base.model_dump()
    tx = table.transaction()
    with tx.update_schema() as schema:
        schema.add_column("w", LongType())
    tx.append(pa.table({"id": pa.array([100], pa.int64()), "v": ["x"], "w": pa.array([7], pa.int64())}))
    tx.set_properties({"k": "v"})
    tx.delete(EqualTo("id", 2))
    updates = tx._updates
    ours = staged_metadata(base, updates, table.metadata_location)
    theirs = update_table_metadata(base, updates, metadata_location=table.metadata_location)
    assert ours.model_dump() == theirs.model_dump()
    assert len(ours.snapshots) >= 5 and ours.schema().find_field("w") and ours.metadata_log[-1].metadata_file == \
        table.metadata_location
    assert base.model_dump() == dumped  # the base as it was
    assert ours.snapshots[0] is base.snapshots[0] and theirs.snapshots[0] is not base.snapshots[0]  # shared, copied
