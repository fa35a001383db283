"""A parked table's Iceberg parts (streaming_job/statements/parking.py, sink_parks.py over iceberg_format.py; pyiceberg,
no Spark): what a rewrite costs (the mirror's rows, from its snapshot), the rewrite run on a thread of its own with the
writer identity its batch gave it while the batch's thread writes with its own, and the statement applied once (a second
run of the park's rewrite writes nothing). The job's park and catch-up as a whole, on Delta and Iceberg:
tests/integration/test_land_park.py."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

from ingester.records.format import Sequence
from ingester.records.statement import TableStatement
from streaming_job.batch.keys import key_property
from streaming_job.iceberg.tables import WantedTable, change_log_schema, columns_property, mirror_schema
from streaming_job.statements.statements import Action, ApplyPart, StatementAt, plan
from tests.harness.iceberg import catalog, local_format

LATIN1, BINARY = 8, 63
COLUMNS = [("id", "int"), ("v", "string")]


def _col(name: str, code: int, meta: int = 0, nullable: bool = True, collation: int | None = None) -> dict[str, Any]:
    return {"name": name, "type": code, "binlog_type": code, "meta": meta, "nullable": nullable, "unsigned": False,
            "collation": collation, "enum_values": None, "set_values": None, "geometry_type": None}


def _lake(fmt: Any, rows: int) -> None:
    """A table ``d.t`` of ``rows`` rows, its mirror and change log as a batch would have left them."""
    fmt.ready(WantedTable("d", "t__changes", change_log_schema(COLUMNS), COLUMNS,
                          lambda: columns_property(COLUMNS), partition="commit_date"))
    mirror = fmt.ready(WantedTable("d", "t", mirror_schema(COLUMNS), COLUMNS,
                                   lambda: {**columns_property(COLUMNS), **key_property(["id"])}))
    mirror.append(pa.table({"id": pa.array(range(rows), pa.int32()), "v": [f"caf\u00e9 {i}" for i in range(rows)],
                            "_binlake_seq": [i.to_bytes(16, "big") for i in range(rows)],
                            "_binlake_commit_ts": pa.array([0] * rows, pa.timestamp("us", tz="UTC"))}))


def _alter(pos: int = 100) -> Action:
    before = [_col("id", 3, nullable=False), _col("v", 15, 20, collation=LATIN1)]
    after = [_col("id", 3, nullable=False), _col("v", 15, 40, collation=BINARY)]
    statement = TableStatement("alter", "d", "t", "ALTER TABLE t MODIFY v VARBINARY(40)", default_database="d",
                               columns=after, primary_key=[[0, 0]], before=before, micros=1_700_000_000_000_000,
                               time_zone="+00:00", mariadb=True)
    at = StatementAt(statement, Sequence(1, pos).encode(), f"1:{pos}:0", "0-1-1", 1_700_000_000_000_000, "p.d.t", 0,
                     0, 7, 0)
    step = next(s for s in plan([at]) if isinstance(s, ApplyPart))
    return step.actions[0]


def test_a_rewrite_costs_the_mirrors_rows_and_a_rename_copies_them(tmp_path) -> None:
    fmt = local_format(tmp_path)
    tables = fmt.table_statements.tables
    assert tables.mirror_rows("d", "t") == 0  # no mirror yet
    _lake(fmt, 1500)
    assert tables.mirror_rows("d", "t") == 1500
    assert tables.copy_rows(("d", "t"), ("d", "t2")) == 1500  # Iceberg's rename writes the rows anew
    assert fmt.table_statements.rewrite_rows(_alter()) == 1500


def test_the_rewrite_runs_on_its_thread_with_its_batchs_identity_and_once(tmp_path) -> None:
    fmt = local_format(tmp_path, app_id="app")
    _lake(fmt, 1500)
    action = _alter()
    inside, done = threading.Event(), threading.Event()
    seen: dict[str, str] = {}

    def rewrite() -> None:  # as parking_work.Parking's rewrite thread runs sink_parks.ParkedTables._rewrite
        with fmt.identified("app~1.0"):
            seen["rewrite"] = fmt.identity
            inside.set()
            fmt.apply(action)
            done.wait(5)

    thread = threading.Thread(target=rewrite)
    with fmt.part("0"):  # a batch's part on this thread meanwhile
        thread.start()
        assert inside.wait(5)
        seen["batch"] = fmt.identity
        done.set()
        thread.join()
    assert seen == {"rewrite": "app~1.0", "batch": "app~0"} and fmt.identity == "app"

    mirror = catalog(tmp_path).load_table(("d", "t"))
    rows = mirror.scan().to_arrow()
    assert pa.types.is_binary(rows.schema.field("v").type) and len(rows) == 1500
    assert rows.sort_by("id").column("v")[1].as_py() == "caf\u00e9 1".encode("latin1")
    current = mirror.current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary.additional_properties.get("binlake.app-id") == "app~1.0"
    # the park's rewrite run again (a job killed before the park recorded it rewritten): applied already
    fmt.forget("d", "t")
    assert fmt.table_statements.rewrite_rows(action) == 0
    snapshots = len(list(catalog(tmp_path).load_table(("d", "t")).snapshots()))
    with fmt.identified("app~1.0"):
        fmt.apply(action)
    assert len(list(catalog(tmp_path).load_table(("d", "t")).snapshots())) == snapshots


def test_rows_written_anew_go_a_part_at_a_time_in_one_commit(tmp_path, monkeypatch) -> None:
    """A rewrite and a rename's copy read and write the mirror in parts of PART_ROWS rows (the driver never holds
    the whole mirror), every row once, all in one commit."""
    monkeypatch.setattr("streaming_job.iceberg.statements.PART_ROWS", 100)
    fmt = local_format(tmp_path)
    _lake(fmt, 1050)
    before = len(list(catalog(tmp_path).load_table(("d", "t")).snapshots()))
    fmt.apply(_alter())
    mirror = catalog(tmp_path).load_table(("d", "t"))
    rows = mirror.scan().to_arrow().sort_by("id")
    assert rows.column("id").to_pylist() == list(range(1050))
    assert rows.column("v").to_pylist() == [f"caf\u00e9 {i}".encode("latin1") for i in range(1050)]
    added = list(mirror.snapshots())[before:]
    appends = [s for s in added if s.summary is not None and s.summary.operation.value == "append"]
    assert len(appends) == 11  # ten parts of 100 rows and one of 50
    assert {s.summary.additional_properties.get("binlake.app-id") for s in added if s.summary} == {"app-1"}

    fmt.table_statements.tables.copy_mirror(("d", "t"), ("d", "t2"), {}, 1)
    copied = catalog(tmp_path).load_table(("d", "t2")).scan().to_arrow().sort_by("id")
    assert copied.select(["id", "v"]).equals(rows.select(["id", "v"]))
