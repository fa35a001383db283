"""Table statements on a Delta lake only Spark reaches (a file:// URI: no driver commits of the log, Spark's writer
and SQL instead; the driver's own commits are test_land_statements.py's): create, truncate, rename, drop, create again
with a conflicting column give the tables they give there, read back by Spark, and each applied twice changes
nothing the second time."""

from __future__ import annotations

import pytest

from ingester.records.format import Sequence
from ingester.records.statement import TableStatement
from streaming_job.delta.evolution import DeltaEvolution
from streaming_job.delta.statements import DeltaStatementTables
from streaming_job.delta.tables import DeltaTables
from streaming_job.lake.generations import ChangeLogGenerations
from streaming_job.statements.statements import ApplyPart, StatementAt, plan
from streaming_job.statements.table_statements import TableStatements

pytestmark = pytest.mark.integration


def _columns(*pairs: tuple[str, int, int]) -> list[dict]:
    return [{"name": n, "type": t, "binlog_type": t, "meta": m, "nullable": i > 0, "unsigned": False,
             "collation": 63 if t != 15 else 45, "enum_values": None, "set_values": None, "geometry_type": None}
            for i, (n, t, m) in enumerate(pairs)]


INT, VARCHAR, VARBINARY = (3, 0), (15, 40), (15, 40)


def _at(op: str, table: str, pos: int, **more) -> StatementAt:
    statement = TableStatement(op, "d", table, f"{op} {table}", default_database="d", **more)
    return StatementAt(statement, Sequence(1, pos).encode(), f"1:{pos}:0", "", 1_700_000_000_000_000, f"p.d.{table}",
                       0, pos, pos, 0)


def test_statements_on_a_delta_lake_only_spark_reaches(spark, tmp_path) -> None:
    lake, files = (tmp_path / "lake").as_uri(), None
    delta = DeltaTables(spark, "app", files)
    evolution = DeltaEvolution(spark, delta)
    tables = DeltaStatementTables(spark, lake, delta, evolution, files)
    statements = TableStatements(tables, ChangeLogGenerations(tables.properties),
                                 lambda db, table: evolution.forget(db, table))

    def apply(*entries: StatementAt) -> None:
        for step in plan(list(entries)):
            if isinstance(step, ApplyPart):
                for action in step.actions:
                    statements.apply(action)

    def rows(name: str) -> list:
        return sorted(tuple(r) for r in spark.read.format("delta").load(f"{lake}/d/{name}").collect())

    first = _columns(("id", 3, 0), ("v", 15, 40))
    create = _at("create", "t", 100, columns=first, primary_key=[[0, 0]])
    apply(create)
    assert rows("t") == [] and [r[0] for r in rows("t__changes")] == ["create"]
    spark.createDataFrame([(1, "a", b"s", None), (2, "b", b"s", None)],
                          "id int, v string, _binlake_seq binary, _binlake_commit_ts timestamp").write.format(
        "delta").mode("append").save(f"{lake}/d/t")
    apply(_at("truncate", "t", 200))
    assert rows("t") == []
    spark.createDataFrame([(3, "c", b"s", None)], "id int, v string, _binlake_seq binary, _binlake_commit_ts "
                          "timestamp").write.format("delta").mode("append").save(f"{lake}/d/t")
    rename = [_at("rename", "t", 300, to=("d", "u")), _at("rename", "u", 300, source=("d", "t"))]
    apply(*rename)
    assert rows("t") == [] and [(r[0], r[1]) for r in rows("u")] == [(3, "c")]
    assert statements.ended("d", "t") and not statements.ended("d", "u")
    apply(_at("drop", "u", 400))
    second = _columns(("id", 3, 0), ("v", 15, 40))
    second[1]["collation"] = 63  # VARBINARY: binary, which no string widens into
    apply(_at("create", "u", 500, columns=second, primary_key=[[0, 0]]))
    assert statements.change_log("d", "u") == "u__changes__v2"
    assert dict(spark.read.format("delta").load(f"{lake}/d/u").dtypes)["v"] == "binary"
    ops = [(r.op, r.rename_from, r.rename_to) for r in spark.read.format("delta").load(
        f"{lake}/d/u__changes").orderBy("seq").collect()]
    assert ops == [("rename", "d.t", "d.u"), ("drop", None, None)]
    assert [r.op for r in spark.read.format("delta").load(f"{lake}/d/u__changes__v2").collect()] == ["create"]
    before = {name: rows(name) for name in ("t", "u", "t__changes", "u__changes", "u__changes__v2")}
    apply(create, _at("truncate", "t", 200), *rename, _at("drop", "u", 400),
          _at("create", "u", 500, columns=second, primary_key=[[0, 0]]))  # all again: nothing changes
    assert {name: rows(name) for name in before} == before
