"""The cost of an ALTER's mirror rewrite (streaming_job/statements/schema_alter.py; docs/LAND.md, "Schema changes"): a
mirror of ``--rows`` rows rewritten by the land job's own writes, Delta (the driver's pyarrow rewrite, file by file, one
commit; and Spark's overwrite, the path of a lake only Spark reaches) and Iceberg (pyiceberg, one transaction).

The mirror: id INT key, v VARCHAR (ASCII, ~24 characters), d DECIMAL(10,4), n INT, t DATETIME(6), and binlake's
_binlake_seq / _binlake_commit_ts, written as the driver writes a mirror (files of 1,000,000 rows at most). The
statements, each on a fresh copy of the mirror:

- ``add default``: ADD COLUMN g DATETIME(3) DEFAULT '2020-02-02 02:02:02.123' (every row gets the value);
- ``drop``: DROP COLUMN n;
- ``convert``: MODIFY v VARBINARY(40) (utf8mb4 text to bytes) and MODIFY d DECIMAL(10,2), both whole arrays by
  Arrow's kernels (schema_changes.vector_converter);
- ``convert per value``: the same of a latin1 column (its bytes per value in Python: the server's cp1252 table) and
  MODIFY n ENUM('1', '7') (integers into ENUM by index), as the per-value path (schema_changes.converter) does
  every other conversion;
- ``add null``: ADD COLUMN z INT (no value: a schema change alone).

Local disk, Spark local[2]; the report in results/schema-rewrite.md.

    .venv/bin/python bench/run_schema_rewrite.py [--rows N]
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ingester.codec.constants import ColumnType as T
from ingester.codec.table_map import Column
from streaming_job.statements.column_kinds import Statement
from streaming_job.statements.schema_alter import AlterPlan, plan_alter, transform

RESULTS = Path(__file__).resolve().parent / "results" / "schema-rewrite.md"
COLUMNS = [("id", "int"), ("v", "string"), ("d", "decimal(10,4)"), ("n", "int"), ("t", "timestamp_ntz")]
META = ["_binlake_seq", "_binlake_commit_ts"]
BEFORE = {"id": Column(0, "id", T.LONG, T.LONG, 0, False, unsigned=False),
          "v": Column(1, "v", T.VARCHAR, T.VARCHAR, 160, True, collation=45),
          "d": Column(2, "d", T.NEWDECIMAL, T.NEWDECIMAL, 10 << 8 | 4, True, unsigned=False),
          "n": Column(3, "n", T.LONG, T.LONG, 0, True, unsigned=False),
          "t": Column(4, "t", T.DATETIME2, T.DATETIME2, 6, True)}


def rows(n: int) -> pa.Table:
    ids = pa.array(range(n), pa.int32())
    base = datetime.datetime(2024, 1, 1)
    return pa.table({
        "id": ids,
        "v": pa.array([f"value-{i:012d}-abcdef" for i in range(n)]),
        "d": pa.array([Decimal(i % 100000) / 10000 for i in range(n)], pa.decimal128(10, 4)),
        "n": pa.array([i * 7 % 1000 for i in range(n)], pa.int32()),
        "t": pa.array([base + datetime.timedelta(seconds=i) for i in range(n)], pa.timestamp("us")),
        "_binlake_seq": pa.array([i.to_bytes(16, "big") for i in range(n)], pa.binary()),
        "_binlake_commit_ts": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
    })


def plans() -> dict[str, tuple[AlterPlan, dict[str, Any]]]:
    stmt = Statement(1_700_000_000_000_000, 0, True)
    after = list(BEFORE.values())
    lake = list(COLUMNS)
    g = Column(5, "g", T.DATETIME2, T.DATETIME2, 3, True)
    z = Column(5, "z", T.LONG, T.LONG, 0, True, unsigned=False)
    conv = [after[0], Column(1, "v", T.VARCHAR, T.VARCHAR, 40, True, collation=63),
            Column(2, "d", T.NEWDECIMAL, T.NEWDECIMAL, 10 << 8 | 2, True, unsigned=False), after[3], after[4]]
    from streaming_job.batch import defaults as D

    value = datetime.datetime(2020, 2, 2, 2, 2, 2, 123000)
    latin1 = {**BEFORE, "v": Column(1, "v", T.VARCHAR, T.VARCHAR, 40, True, collation=8),
              "n": Column(3, "n", T.LONG, T.LONG, 0, True, unsigned=False)}
    per_value = [after[0], Column(1, "v", T.VARCHAR, T.VARCHAR, 40, True, collation=63), after[2],
                 Column(3, "n", T.ENUM, T.STRING, 247 << 8 | 1, True, enum_values=["1", "7"]), after[4]]
    return {
        "convert per value": (plan_alter(lake, latin1, per_value, [lake[0], ("v", "binary"), lake[2], ("n", "string"),
                                                                   lake[4]], {}, {}, stmt), {}),
        "add default": (plan_alter(lake, BEFORE, [*after, g], [*lake, ("g", "timestamp_ntz")], {},
                                   {"g": D.Default("g", b"", "", "")}, stmt), {"g": pa.scalar(value)}),
        "drop": (plan_alter(lake, BEFORE, [c for c in after if c.name != "n"],
                            [c for c in lake if c[0] != "n"], {}, {}, stmt), {}),
        "convert": (plan_alter(lake, BEFORE, conv, [lake[0], ("v", "binary"), ("d", "decimal(10,2)"), *lake[3:]],
                               {}, {}, stmt), {}),
        "add null": (plan_alter(lake, BEFORE, [*after, z], [*lake, ("z", "int")], {}, {"z": None}, stmt), {}),
    }


def delta_mirror(spark: Any, path: Path, data: pa.Table) -> None:
    from streaming_job.delta.mirror_driver import _write_mirror_files
    from streaming_job.delta.tables import DeltaTables
    from streaming_job.lake.files import LakeFiles

    tables = DeltaTables(spark, "bench", LakeFiles.on_disk())
    commit = tables.transaction(str(path))
    meta = [("_binlake_seq", "binary"), ("_binlake_commit_ts", "timestamp")]
    ddl = ", ".join(f"`{n}` {t}" for n, t in [*COLUMNS, *meta])
    commit.create(ddl, [], {"binlake.key": '["id"]'})
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        adds = _write_mirror_files(LakeFiles.on_disk(), str(path), data, "id", pool, 2)
    commit.append(adds, "bench", 0, [], [])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    from streaming_job.delta.evolution import DeltaEvolution
    from streaming_job.delta.schema import DeltaMirrorRewrite
    from streaming_job.delta.statements import DeltaStatementTables
    from streaming_job.delta.tables import DeltaTables
    from streaming_job.lake.files import LakeFiles
    from streaming_job.land.job import build_session

    spark = build_session("local[2]", 2, "binlake-bench-schema-rewrite", iceberg={})
    data = rows(args.rows)
    results: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base" / "db" / "t"
        delta_mirror(spark, base, data)
        for label, (plan, values) in plans().items():
            for path_kind in ("driver", "spark"):
                lake = Path(tmp) / f"{label}-{path_kind}".replace(" ", "-")
                shutil.copytree(base.parent.parent, lake)
                files = LakeFiles.on_disk() if path_kind == "driver" else None
                delta = DeltaTables(spark, "bench", files)
                tables = DeltaStatementTables(spark, str(lake), delta, DeltaEvolution(spark, delta), files)
                rewrite = DeltaMirrorRewrite(tables)
                start = time.monotonic()
                if plan.rewrite:
                    rewrite.rewrite_mirror("db", "t", plan.lake_columns, ["id"], transform(plan, values, META),
                                           {"binlake.statement": "00:0"}, 1)
                else:
                    rewrite.add_mirror_columns("db", "t", [(c.name, c.dtype) for c in plan.columns
                                                          if c.action == "add"], {"binlake.statement": "00:0"}, 1)
                seconds = time.monotonic() - start
                read = spark.read.format("delta").load(str(lake / "db" / "t"))
                assert read.count() == args.rows and [c for c in read.columns if not c.startswith("_")] == [
                    c.name for c in plan.columns], (label, read.columns)
                results.append(("Delta", f"{label} ({'driver, pyarrow' if files else 'Spark overwrite'})", seconds))
                print(results[-1], flush=True)
        results += iceberg(Path(tmp), data, spark)
    write_report(args.rows, results)
    spark.stop()
    return 0


def iceberg(tmp: Path, data: pa.Table, spark: Any) -> list[tuple[str, str, float]]:
    from streaming_job.batch.keys import key_property
    from streaming_job.iceberg.catalog import IcebergCatalog
    from streaming_job.iceberg.format import IcebergFormat
    from streaming_job.iceberg.schema import IcebergMirrorRewrite
    from streaming_job.iceberg.statements import IcebergStatementTables
    from streaming_job.iceberg.tables import WantedTable, mirror_properties, mirror_schema

    out = []
    for label, (plan, values) in plans().items():
        lake = tmp / f"ice-{label}".replace(" ", "-")
        fmt = IcebergFormat(IcebergCatalog(str(lake)), "bench", None, None, spark)
        table = fmt.create(WantedTable("db", "t", mirror_schema(COLUMNS), COLUMNS,
                                       lambda: mirror_properties(COLUMNS, key_property(["id"]), ["id"])))
        with table.transaction() as tx:
            tx.append(data.cast(mirror_schema(COLUMNS)))
        fmt.forget("db", "t")
        rewrite = IcebergMirrorRewrite(IcebergStatementTables(fmt))
        start = time.monotonic()
        if plan.rewrite:
            rewrite.rewrite_mirror("db", "t", plan.lake_columns, ["id"], transform(plan, values, META),
                                   {"binlake.statement": "00:0"}, 1)
        else:
            rewrite.add_mirror_columns("db", "t", [(c.name, c.dtype) for c in plan.columns if c.action == "add"],
                                       {"binlake.statement": "00:0"}, 1)
        seconds = time.monotonic() - start
        fmt.forget("db", "t")
        found = fmt.table("db", "t")
        assert found is not None and len(found.scan().to_arrow()) == len(data), label
        out.append(("Iceberg", f"{label} (pyiceberg)", seconds))
        print(out[-1], flush=True)
    return out


def _machine() -> str:
    import subprocess

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=RESULTS.parent).stdout.strip()
    return f"{revision} on {cpu}"


def write_report(n: int, results: list[tuple[str, str, float]]) -> None:
    lines = [
        "# An ALTER's mirror rewrite",
        "",
        f"`bench/run_schema_rewrite.py --rows {n}` at {_machine()} (2 cores), local disk, "
        "Spark local[2]. Each statement on a fresh copy of the mirror (docs/LAND.md, \"Schema changes\").",
        "",
        "| format | statement (path) | seconds | rows/s |",
        "|---|---|---:|---:|",
    ]
    lines += [f"| {f} | {label} | {s:.2f} | {n / s:,.0f} |" for f, label, s in results]
    RESULTS.write_text("\n".join(lines) + "\n")
    print(RESULTS.read_text())


if __name__ == "__main__":
    sys.exit(main())
