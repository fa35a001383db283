"""The mirror kept by the driver (mirror_driver.DriverMirror) against a model of the source table.

Batches of mirror candidates (what writer.land_partition hands the driver) with inserts, updates of keys
in older files, deletes, key moves and several changes of one key; some batches through Spark's MERGE
instead (its ``merge_bytes`` 0; with deletion vectors, their candidates through the lake's scratch files), so the
driver then reads files Spark wrote; a replayed batch. After
each batch the Delta table, read by delta-rs (and at the end by Spark), must equal the model: the rows a server
would hold. Once more with deletion vectors, on keys of every type the driver keeps: text (of several scripts, some of
32 UTF-8 bytes or more, whose files' ranges are open above), bytes (no statistics: any file may hold any key), dates,
timestamps (four a millisecond: Delta cuts their statistics to it), decimals with a scale, and a signed DECIMAL(20,0)
beyond 64 bits.
"""

from __future__ import annotations

import datetime
import random
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from tests.harness.delta_rs import delta_rs_rows, delta_rs_table

pytestmark = pytest.mark.integration
COLUMNS = [("id", "bigint"), ("v", "string"), ("ts", "timestamp"), ("d", "decimal(12,2)")]
UTC = datetime.UTC


def _text_key(key: int) -> str:
    """A model's integer key as a text key: its order is not the integers', some are 32 UTF-8 bytes or more."""
    return f"ключ {key % 7} {key:05d}" + ("😀ü" * 6 if key % 5 == 0 else "")


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
KEY_TYPES = {"bigint": lambda key: key, "string": _text_key,
             "binary": lambda key: b"\xff\x00" + key.to_bytes(3, "little"),
             "date": lambda key: datetime.date(1000, 1, 1) + datetime.timedelta(days=key * 13),
             # four keys a millisecond: Delta's statistics cut a timestamp to its millisecond
             "timestamp": lambda key: _EPOCH + datetime.timedelta(microseconds=key * 250 - 600_000),
             "decimal(12,3)": lambda key: Decimal(key - 5000) / 1000,
             "decimal(20,0)": lambda key: Decimal(key - 5000) if key % 3 else Decimal(2**64 - key)}  # signed, > 2^63
# the rewrite path (no vectors) on the first three; the others with deletion vectors only
_VECTOR_KEYS_ONLY = ("date", "timestamp", "decimal(12,3)", "decimal(20,0)")


def _batch(rnd: random.Random, model: dict[int, tuple], batch_id: int, n: int) -> list[tuple]:
    """``n`` random changes applied to ``model``, as candidate rows (key, v, ts, d, deleted, seq, index, sub,
    commit_ts) the way mirror.py builds them: a key move is a delete of the old key, then the new one."""
    out = []
    for i in range(n):
        seq = batch_id.to_bytes(4, "big") + i.to_bytes(4, "big")
        when = datetime.datetime(2026, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=batch_id * 1000 + i)
        image = (f"v{batch_id}.{i}", when - datetime.timedelta(microseconds=i), Decimal(f"{i}.{batch_id % 100:02d}"))
        kind = rnd.random()
        keys = sorted(model)
        if kind < 0.4 or not keys:  # insert: a new key, above or (re-inserted) below the largest
            key = (max(keys, default=0) + rnd.randint(1, 3)) if rnd.random() < 0.7 else rnd.randint(0, 5000)
            if key in model:
                continue
            model[key] = image
            out.append((key, *image, False, seq, 0, 1, when))
        elif kind < 0.7:  # update in place
            key = rnd.choice(keys)
            model[key] = image
            out.append((key, *image, False, seq, 0, 1, when))
        elif kind < 0.85:  # delete
            key = rnd.choice(keys)
            del model[key]
            out.append((key, None, None, None, True, seq, 0, 0, when))
        else:  # key move
            old, new = rnd.choice(keys), rnd.randint(0, 10_000)
            if new in model:
                continue
            del model[old]
            model[new] = image
            out += [(old, None, None, None, True, seq, 0, 0, when), (new, *image, False, seq, 0, 1, when)]
    rnd.shuffle(out)  # the driver orders them itself
    return out


def _mirror(spark, path: str) -> dict[Any, tuple]:
    # pyspark gives timestamps as naive local times, bytes as bytearray
    rows = spark.read.format("delta").load(path).collect()
    return {_key(r.id): (r.v, r.ts and r.ts.astimezone(UTC), r.d) for r in rows}


def _key(value: Any) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    return value.astimezone(UTC) if isinstance(value, datetime.datetime) else value


def _mirror_rs(path: str) -> dict[int, tuple]:
    """The mirror as delta-rs reads it (a reader other than Spark, and quicker on a small table)."""
    return {r["id"]: (r["v"], r["ts"], r["d"]) for r in delta_rs_table(Path(path)).to_pylist()}


def _operations(spark, path: str) -> list[str]:
    from delta.tables import DeltaTable

    return [r.operation for r in DeltaTable.forPath(spark, path).history().orderBy("version").collect()]


@pytest.mark.parametrize(("vectors", "key_type"), [("never", "bigint"), *(("always", k) for k in KEY_TYPES)])
def test_the_driver_keeps_the_mirror_equal_to_the_source(spark, tmp_path, vectors, key_type, monkeypatch) -> None:
    """``always``: the mirror has deletion vectors, and every file a batch changes gets one (no file is small)
    unless that would delete more than 60% of it (here: the batches change a third of this small table);
    Spark's MERGEs write theirs, which the driver reads next."""
    from streaming_job.batch.mirror import candidate_schema
    from streaming_job.delta import mirror_driver
    from streaming_job.format.mirror_read import KeyCut
    from streaming_job.lake import scratch
    from streaming_job.lake.delta_log import TableLog
    from streaming_job.land.sink import Lander

    monkeypatch.setattr(mirror_driver, "_REWRITE_SHARE", 0.6)
    if vectors == "always":  # Spark's batches get the candidates through the lake's scratch files (else local data)
        monkeypatch.setattr(scratch, "LOCAL_BYTES", 0)

    small = {"small_file_bytes": 1} if vectors == "always" else {}
    lander = Lander(spark, str(tmp_path / "lake"), str(tmp_path / "cp"), deletion_vectors=vectors, **small)
    path = lander.path("db", "t")
    columns = [("id", key_type), *COLUMNS[1:]]
    as_key = KEY_TYPES[key_type]
    schema = candidate_schema(columns)
    rnd = random.Random(20261123)
    model: dict[int, tuple] = {}
    spark_batches = {3, 4}
    for batch_id in range(8):
        changes = _batch(rnd, model, batch_id, 400 if batch_id == 0 else 150)
        table = pa.Table.from_pylist([dict(zip(schema.names, (as_key(c[0]), *c[1:]), strict=True)) for c in changes],
                                     schema=schema)
        lander.format.mirrors.driver.merge_bytes = 0 if batch_id in spark_batches else 256 << 20
        lander.format.mirrors.from_driver(table, "db", "t", columns, ["id"], batch_id)
        if batch_id == 6:  # replayed after a crash: the commit is there, nothing changes
            lander.format.mirrors.driver.files.clear()
            lander.format.mirrors.from_driver(table, "db", "t", columns, ["id"], batch_id)
        # delta-rs's query engine reads each version (it applies deletion vectors), Spark the last one
        rows = delta_rs_rows(path).to_pylist()
        read = {r["id"]: (r["v"], r["ts"], r["d"]) for r in rows}
        expected = {as_key(k): row for k, row in model.items()}
        assert read == expected and len(rows) == len(expected), batch_id  # no key twice
        vectored = [name for name, add in TableLog.read(path).files.items() if add.get("deletionVector")]
        assert bool(vectored) is (vectors == "always" and batch_id > 0), (batch_id, vectored)
    assert _mirror(spark, path) == expected
    assert not any((tmp_path / "lake" / scratch.SCRATCH).glob("*"))  # the scratch files are gone
    operations = _operations(spark, path)
    # created by the driver's append of the first batch, then its rewrites (UPDATE), Spark's MERGEs
    assert operations[:1] == ["WRITE"] and operations[1:3] == ["UPDATE", "UPDATE"], operations
    assert operations[3:5] == ["MERGE", "MERGE"] and operations[5:] == ["UPDATE"] * 3, operations
    # verify's read of the mirror by the driver (its files, without the rows their vectors delete)
    cut = KeyCut(dict(columns), ["v"], ["id"])
    assert sorted(lander.format.verify_mirror("db", "t").rows(cut).column("id").to_pylist()) == sorted(expected)


def test_a_batch_of_new_keys_reads_no_mirror_file(spark, tmp_path) -> None:
    """Keys committed out of order (several writers): a key below the mirror's largest that no file's
    range holds reads nothing; one that a file's range holds reads that file and leaves it as it is."""
    from streaming_job.batch.mirror import candidate_schema
    from streaming_job.land.sink import Lander

    lander = Lander(spark, str(tmp_path / "lake"), str(tmp_path / "cp"))
    path = lander.path("db", "t")
    schema = candidate_schema(COLUMNS)
    when = datetime.datetime(2026, 1, 1, tzinfo=UTC)

    def batch(keys: list[int], batch_id: int) -> None:
        rows = [(k, "x", when, Decimal("1.00"), False, batch_id.to_bytes(4, "big"), i, 1, when)
                for i, k in enumerate(keys)]
        table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
        lander.format.mirrors.from_driver(table, "db", "t", COLUMNS, ["id"], batch_id)

    batch([10, 11, 12, 20], 0)
    batch([13, 30], 1)  # 13 lies in the first file's range 10..20, which does not hold it
    batch([40], 2)
    assert sorted(_mirror(spark, path)) == [10, 11, 12, 13, 20, 30, 40]
    assert _operations(spark, path) == ["WRITE", "WRITE", "WRITE"]  # appends only, the first creating: none rewritten


def test_a_conflicting_commit_names_the_table_and_the_replay_lands_the_batch(spark, tmp_path,
                                                                            monkeypatch) -> None:
    """Another writer deletes a row of the file the driver is rewriting (a real Delta conflict, detected
    by Delta at commit): the query stops with the table and batch named, the mirror holds nothing of the
    batch, and the batch replayed lands on top of the other writer's change."""
    from delta.tables import DeltaTable

    from streaming_job.batch.mirror import candidate_schema
    from streaming_job.delta import mirror_driver
    from streaming_job.land.sink import Lander
    from streaming_job.runtime.errors import LandError

    lander = Lander(spark, str(tmp_path / "lake"), str(tmp_path / "cp"))
    path = lander.path("db", "t")
    schema = candidate_schema(COLUMNS)
    when = datetime.datetime(2026, 1, 1, tzinfo=UTC)

    def batch(keys: list[int], value: str, batch_id: int) -> None:
        rows = [(k, value, when, Decimal("1.00"), False, batch_id.to_bytes(4, "big"), i, 1, when)
                for i, k in enumerate(keys)]
        table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
        lander.format.mirrors.from_driver(table, "db", "t", COLUMNS, ["id"], batch_id)

    batch([10, 11, 12, 20], "a", 0)
    write = mirror_driver.write_mirror_file

    def other_writer_first(*args, **kwargs):
        monkeypatch.setattr(mirror_driver, "write_mirror_file", write)
        DeltaTable.forPath(spark, path).delete("id = 20")  # commits while the driver's transaction is open
        return write(*args, **kwargs)

    monkeypatch.setattr(mirror_driver, "write_mirror_file", other_writer_first)
    with pytest.raises(LandError, match=r"db\.t: the mirror's commit of batch 1 failed: .*Concurrent"):
        batch([11], "b", 1)
    assert {k: v[0] for k, v in _mirror(spark, path).items()} == {10: "a", 11: "a", 12: "a"}
    batch([11], "b", 1)  # the replay after a restart
    assert {k: v[0] for k, v in _mirror(spark, path).items()} == {10: "a", 11: "b", 12: "a"}


def test_warm_up_runs_and_workers_fork_from_the_daemon_with_the_decoder(spark, caplog) -> None:
    """job.warm_up starts the workers and Delta's commit path without a warning, and local workers are
    forked from streaming_job.land.worker (which imported the decoder), not pyspark's bare daemon."""
    import logging

    from streaming_job.land.job import warm_up

    def parent_command(batches):  # defined here: pickled by value, the workers cannot import this module
        import os

        for _ in batches:
            pass
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            yield pa.RecordBatch.from_pydict({"cmd": [f.read().replace(b"\0", b" ").decode()]})

    with caplog.at_level(logging.INFO, logger="binlake.land"):
        warm_up(spark)
    assert "warmed up Spark's Python workers and Delta" in caplog.text
    assert "warm-up failed" not in caplog.text
    parents = spark.range(2, numPartitions=2).mapInArrow(parent_command, "cmd string").collect()
    assert parents and all("-m streaming_job.land.worker" in r.cmd for r in parents), parents


def test_a_large_batch_is_written_as_files_of_consecutive_key_ranges(spark, tmp_path) -> None:
    """A batch of 120,000 new keys is written by two threads as two files of disjoint key ranges (their
    statistics say so); a later batch updating a key of each reads and rewrites both, and the mirror then
    equals the model."""
    import json

    from streaming_job.batch.mirror import candidate_schema
    from streaming_job.land.sink import Lander

    lander = Lander(spark, str(tmp_path / "lake"), str(tmp_path / "cp"))
    path = lander.path("db", "t")
    schema = candidate_schema(COLUMNS)
    when = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    n = 120_000
    same = {"ts": when, "d": Decimal("1.00"), "_binlake_deleted": False, "_binlake_seq": b"\0\0\0\0",
            "_binlake_sub": 1, "_binlake_commit_ts": when}  # id and _binlake_row_index: 0..n-1, v: "v<id>"
    arrays = {"v": pa.array([f"v{i}" for i in range(n)])}
    first = pa.Table.from_arrays([arrays.get(f.name) or (pa.array([same[f.name]] * n, f.type) if f.name in same
                                                        else pa.array(range(n), f.type)) for f in schema],
                                 schema=schema)
    lander.format.mirrors.from_driver(first, "db", "t", COLUMNS, ["id"], 0)
    adds = [json.loads(line)["add"] for line in (tmp_path / "lake/db/t/_delta_log/00000000000000000000.json")
            .read_text().splitlines() if '"add"' in line]
    stats = [json.loads(a["stats"]) for a in adds]
    ranges = sorted((s["minValues"]["id"], s["maxValues"]["id"]) for s in stats)
    assert ranges == [(0, 59_999), (60_000, n - 1)], ranges
    rows = [(k, "new", when, Decimal("2.00"), False, b"\0\0\0\1", i, 1, when) for i, k in enumerate((10, 100_000))]
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    lander.format.mirrors.from_driver(table, "db", "t", COLUMNS, ["id"], 1)
    mirror = {r.id: r.v for r in spark.read.format("delta").load(path).select("id", "v").collect()}
    assert mirror == {i: ("new" if i in (10, 100_000) else f"v{i}") for i in range(n)}
    assert _operations(spark, path) == ["WRITE", "UPDATE"]


def test_a_trickle_of_small_batches_keeps_few_mirror_files(spark, tmp_path) -> None:
    """Thirty small batches of new keys (each touches no file and would add one: the steady insert
    trickle), every seventh also updating and deleting an older key: once the mirror has
    ``compact_files`` small files the driver's commit rewrites them with the batch, so it keeps a
    handful of files, and after every batch it still equals the model (as delta-rs reads it; Spark at the end)."""
    from streaming_job.batch.mirror import candidate_schema
    from streaming_job.land.sink import Lander

    lander = Lander(spark, str(tmp_path / "lake"), str(tmp_path / "cp"), compact_files=4)
    path = lander.path("db", "t")
    schema = candidate_schema(COLUMNS)
    rnd = random.Random(20261124)
    when = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    model: dict[int, tuple] = {}
    most = 0
    for batch_id in range(30):
        seq = batch_id.to_bytes(4, "big")
        image = (f"v{batch_id}", when, Decimal(f"{batch_id}.00"))
        changes = [(k, *image, False, seq, i, 1, when) for i, k in enumerate(range(batch_id * 20, batch_id * 20 + 20))]
        if batch_id % 7 == 6:
            updated, deleted = rnd.sample(sorted(model), 2)
            changes += [(updated, "updated", when, Decimal("0.01"), False, seq, 20, 1, when),
                        (deleted, None, None, None, True, seq, 21, 0, when)]
            model[updated] = ("updated", when, Decimal("0.01"))
            del model[deleted]
        model.update({c[0]: image for c in changes[:20]})
        table = pa.Table.from_pylist([dict(zip(schema.names, c, strict=True)) for c in changes], schema=schema)
        lander.format.mirrors.from_driver(table, "db", "t", COLUMNS, ["id"], batch_id)
        assert _mirror_rs(path) == model, batch_id
        most = max(most, len(lander.format.mirrors.driver.files[("db", "t")].sizes))
    assert most <= 4 + 1, most  # four small files, and the batch's own until the next commit merges them
    assert _mirror(spark, path) == model
    assert len(spark.read.format("delta").load(path).inputFiles()) <= 5


def test_the_jvms_delta_commits_a_deletion_vector_the_driver_wrote(spark, tmp_path) -> None:
    """A table whose log the JVM's Delta writes (commit.DeltaCommit: e.g. one with a change data feed) takes the
    driver's deletion vectors the same way: Spark reads the file without the rows, and removes it with its vector."""
    import numpy as np

    from streaming_job.delta.commit import DeltaCommit, Vectored
    from streaming_job.delta.vector_files import VectorFiles
    from streaming_job.lake.files import LakeFiles

    path = str(tmp_path / "t")
    spark.range(0, 10, numPartitions=1).selectExpr("id", "CAST(id AS STRING) AS v").write.format("delta") \
        .option("delta.enableDeletionVectors", "true").save(path)
    commit = DeltaCommit(spark, path)
    assert commit.deletion_vectors()
    (file,) = commit.files()
    vector = VectorFiles(LakeFiles.on_disk()).write(path, [np.array([0, 4, 9], dtype=np.uint64)])[0]
    commit.append([], "app", 1, [], vectors=[Vectored(file, vector)])
    read = sorted(r.id for r in spark.read.format("delta").load(path).collect())
    assert read == [1, 2, 3, 5, 6, 7, 8] == sorted(delta_rs_rows(path).column("id").to_pylist())
    (file,) = DeltaCommit(spark, path).files()
    assert file.deletion_vector == vector
    DeltaCommit(spark, path).append([], "app", 2, [], [file.removed()])
    assert spark.read.format("delta").load(path).count() == 0


class _Killed(BaseException):
    """The process gone at this point (kill -9): no handler of the job's runs after it."""


def test_a_kill_mid_compaction_of_a_mirror_with_deletion_vectors_loses_nothing(spark, tmp_path, monkeypatch) -> None:
    """A mirror with deletion vectors under a trickle of new keys (a small file a batch) and updates and deletes of
    older keys (their files get vectors): the batch that compacts the small files is killed between writing its files
    (the compaction's, its rows', its vectors') and its commit. The mirror is as it was (the files it wrote named by no
    version), and the batch replayed by a new job lands once. After every batch delta-rs reads the model; Spark at
    the end."""
    from streaming_job.batch.mirror import candidate_schema
    from streaming_job.delta import mirror_driver
    from streaming_job.delta.commit import DeltaCommit, LogCommit
    from streaming_job.lake.delta_log import TableLog
    from streaming_job.land.sink import Lander

    monkeypatch.setattr(mirror_driver, "_VECTOR_ROWS", 1)  # no file too small for a vector

    def lander() -> Lander:
        return Lander(spark, str(tmp_path / "lake"), str(tmp_path / "cp"), deletion_vectors="always",
                      compact_files=4, small_file_bytes=1 << 20)

    job = lander()
    path = job.path("db", "t")
    schema = candidate_schema(COLUMNS)
    rnd = random.Random(20261130)
    when = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    model: dict[int, tuple] = {}

    def changes(batch_id: int, keys: list[int], deleted: set[int]) -> pa.Table:
        rows = []
        for i, key in enumerate(keys):
            seq = batch_id.to_bytes(4, "big") + i.to_bytes(4, "big")
            if key in deleted:
                model.pop(key, None)
                rows.append((key, None, None, None, True, seq, 0, 0, when))
            else:
                model[key] = (f"v{batch_id}.{i}", when, Decimal(f"{batch_id}.{i % 100:02d}"))
                rows.append((key, *model[key], False, seq, 0, 1, when))
        return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)

    removed: list = []

    def kill(commit, adds, app_id, batch, partition_by, removes=(), *rest, **kwargs):
        removed.extend(removes)
        raise _Killed

    killed = None
    for batch_id in range(16):
        new = list(range(batch_id * 500, batch_id * 500 + 500))  # the trickle: a file of new keys each batch
        older = rnd.sample(sorted(model), 6) if batch_id % 3 == 2 else []  # ... and, every third, older keys
        table = changes(batch_id, [*new, *older], set(older[:2]))
        before = TableLog.read(path).files if batch_id else {}
        with_vectors = [add for add in before.values() if add.get("deletionVector")]
        if killed is None and with_vectors and len(before) >= 4 and not older:  # a batch that compacts: killed after
            on_disk = set(Path(path).iterdir())  # writing its files (the compaction's too), before its commit
            with monkeypatch.context() as patch, pytest.raises(_Killed):
                for kind in (DeltaCommit, LogCommit):
                    patch.setattr(kind, "append", kill)
                job.format.mirrors.from_driver(table, "db", "t", COLUMNS, ["id"], batch_id)
            killed = batch_id
            assert len(removed) >= 4 and any(r.deletion_vector for r in removed), removed  # the files it compacted
            assert TableLog.read(path).files == before  # the mirror as it was ...
            assert any(p.suffix == ".parquet" for p in set(Path(path).iterdir()) - on_disk)  # ... its files unnamed
            job = lander()  # the restarted job replays the batch
        job.format.mirrors.from_driver(table, "db", "t", COLUMNS, ["id"], batch_id)
        read = {r["id"]: (r["v"], r["ts"], r["d"]) for r in delta_rs_rows(path).to_pylist()}
        assert read == model, batch_id
    assert killed is not None
    assert _mirror(spark, path) == model


def test_a_quiet_mirror_is_compacted_whole_unless_a_batch_changed_its_files_meanwhile(spark, tmp_path,
                                                                                      monkeypatch) -> None:
    """delta/tidy.py: a mirror kept with deletion vectors, once quiet (land.quiet_compaction), is rewritten without
    its deleted rows into one file by an OPTIMIZE commit of the same rows (dataChange false): delta-rs and Spark read
    the source's rows, and no deletion vector is left. A pass whose files a batch changed between its read and its
    commit is dropped (its files deleted); the upkeep's next pass does it."""
    import contextlib

    from streaming_job.batch.mirror import candidate_schema
    from streaming_job.delta import tidy as tidy_module
    from streaming_job.format.upkeep import Due
    from streaming_job.lake.delta_log import TableLog
    from streaming_job.land.sink import Lander

    lander = Lander(spark, str(tmp_path / "lake"), str(tmp_path / "cp"), deletion_vectors="always",
                    small_file_bytes=1, quiet_compaction=0.5)
    fmt = lander.format
    path = lander.path("db", "t")
    schema = candidate_schema(COLUMNS)
    rnd = random.Random(20261204)
    model: dict[int, tuple] = {}

    def land(batch_id: int, n: int) -> None:
        changes = _batch(rnd, model, batch_id, n)
        rows = pa.Table.from_pylist([dict(zip(schema.names, c, strict=True)) for c in changes], schema=schema)
        fmt.mirrors.from_driver(rows, "db", "t", COLUMNS, ["id"], batch_id)

    for batch_id in range(6):
        land(batch_id, 400 if batch_id == 0 else 100)
    assert any(a.get("deletionVector") for a in TableLog.read(path).files.values())
    written: list[str] = []
    write = tidy_module.write_mirror_file

    def recorded(*args: Any) -> Any:
        added = write(*args)
        written.append(added.path)
        return added

    monkeypatch.setattr(tidy_module, "write_mirror_file", recorded)
    pauses: list[int] = []

    def pause() -> None:  # its files read: a batch lands before it writes and commits
        pauses.append(1)
        if len(pauses) == 2:
            land(6, 100)

    version = TableLog.read(path).version
    assert fmt.tidy is not None
    assert not fmt.tidy.tidy(("db", "t"), path, pause, lambda name: contextlib.nullcontext())
    assert written and not any((Path(path) / name).exists() for name in written)  # dropped: its files deleted
    assert TableLog.read(path).version == version + 1  # (the batch's commit only)

    fmt.tidy.upkeep.touched(("db", "t"), Due(path, {}, []))  # what a batch's land() does: quiet from now
    deadline = time.monotonic() + 120
    while any(a.get("deletionVector") for a in TableLog.read(path).files.values()) or \
            len(TableLog.read(path).files) > 1:
        assert time.monotonic() < deadline, TableLog.read(path).files.keys()
        time.sleep(0.2)
    fmt.close()
    expected = dict(model)
    read = {r["id"]: (r["v"], r["ts"], r["d"]) for r in delta_rs_rows(path).to_pylist()}
    assert read == expected and _mirror(spark, path) == expected
    assert _operations(spark, path)[-1] == "OPTIMIZE"
    last = TableLog.read(path).version
    commit = Path(path) / "_delta_log" / f"{last:020d}.json"
    actions = [orjson.loads(line) for line in commit.read_bytes().splitlines()]
    changed = [a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a]
    assert changed and not any(changed) and not any("txn" in a for a in actions)
