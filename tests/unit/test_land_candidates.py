"""The mirror's candidates (streaming_job/batch/mirror.py), computed on the executors: what each row change leaves
in the mirror, reduced to the last change per key of a chunk. Checked against a plain replay of the
same changes in source order (a dict keyed by primary key)."""

from __future__ import annotations

import random

import pyarrow as pa

from streaming_job.batch.mirror import ROW_INDEX, SEQ, SUB, candidate_schema, last_per_key, mirror_candidates
from streaming_job.decode.lake_types import arrow_type
from streaming_job.decode.typed import TYPED_HEAD

COLUMNS = [("id", "int"), ("k2", "string"), ("v", "bigint")]
PK = ["id", "k2"]


def _typed(changes: list[tuple[str, dict | None, dict | None]]) -> pa.RecordBatch:
    """A typed chunk (typed.typed_batches' schema) of (op, before, after) changes, seq in list order."""
    image = pa.struct([pa.field(n, arrow_type(t)) for n, t in COLUMNS])
    n = len(changes)
    head = {"op": [c[0] for c in changes], "seq": [i.to_bytes(4, "big") for i in range(n)],
            "position": ["f:4:0"] * n, "gtid": [None] * n, "commit_ts": [1_700_000_000_000_000 + i for i in range(n)],
            "row_index": [0] * n, "kafka_topic": ["t"] * n, "kafka_partition": [0] * n, "kafka_offset": [0] * n}
    arrays = [pa.array(head[name], arrow_type(dtype)) for name, dtype in TYPED_HEAD]
    arrays += [pa.array([c[1] for c in changes], image), pa.array([c[2] for c in changes], image)]
    names = [name for name, _ in TYPED_HEAD] + ["before", "after"]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _replay(changes: list[tuple[str, dict | None, dict | None]]) -> dict[tuple, dict]:
    state: dict[tuple, dict] = {}
    for _, before, after in changes:
        if before is not None:
            state.pop(tuple(before[k] for k in PK), None)
        if after is not None:
            state[tuple(after[k] for k in PK)] = after
    return state


def _apply(candidates: pa.Table, start: dict[tuple, dict]) -> dict[tuple, dict]:
    """What the MERGE does with the candidates: delete or upsert each key."""
    state = dict(start)
    rows = candidates.to_pylist()
    assert len({tuple(r[k] for k in PK) for r in rows}) == len(rows), "one candidate per key"
    for r in rows:
        key = tuple(r[k] for k in PK)
        if r["_binlake_deleted"]:
            assert all(r[n] is None for n, _ in COLUMNS if n not in PK)
            state.pop(key, None)
        else:
            state[key] = {n: r[n] for n, _ in COLUMNS}
    return state


def test_a_moved_key_deletes_the_old_row_and_the_last_change_per_key_wins() -> None:
    changes = [
        ("insert", None, {"id": 1, "k2": "a", "v": 10}),
        ("insert", None, {"id": 2, "k2": None, "v": 20}),  # a NULL key part compares equal to NULL
        ("update", {"id": 1, "k2": "a", "v": 10}, {"id": 1, "k2": "a", "v": 11}),
        ("update", {"id": 1, "k2": "a", "v": 11}, {"id": 3, "k2": "a", "v": 11}),  # the key moves
        ("update", {"id": 2, "k2": None, "v": 20}, {"id": 2, "k2": None, "v": 21}),
        ("delete", {"id": 3, "k2": "a", "v": 11}, None),
        ("insert", None, {"id": 3, "k2": "a", "v": 30}),
    ]
    found = mirror_candidates(_typed(changes), PK, candidate_schema(COLUMNS))
    by_key = {(r["id"], r["k2"]): r for r in found.to_pylist()}
    assert by_key[(1, "a")]["_binlake_deleted"] and by_key[(1, "a")]["v"] is None
    assert by_key[(2, None)]["v"] == 21 and not by_key[(2, None)]["_binlake_deleted"]
    assert by_key[(3, "a")]["v"] == 30
    # the old key of an existing mirror row goes away, as the source's own replay says
    start = {(1, "a"): {"id": 1, "k2": "a", "v": 0}}
    assert _apply(found, start) == _replay([("insert", None, start[(1, "a")]), *changes])


def test_random_changes_leave_what_a_replay_leaves() -> None:
    rng = random.Random(7)
    for _ in range(50):
        state: dict[tuple, dict] = {}
        changes = []
        for _ in range(rng.randint(1, 80)):
            key = (rng.randint(0, 6), rng.choice(["a", "b", None]))
            row = {"id": key[0], "k2": key[1], "v": rng.randint(-5, 5)}
            if key in state and rng.random() < 0.3:
                changes.append(("delete", state.pop(key), None))
            elif key in state:
                moved = (rng.randint(0, 6), key[1]) if rng.random() < 0.3 else key
                if moved != key and moved in state:
                    continue
                after = {**row, "id": moved[0]}
                changes.append(("update", state.pop(key), after))
                state[moved] = after
            else:
                changes.append(("insert", None, row))
                state[key] = row
        found = mirror_candidates(_typed(changes), PK, candidate_schema(COLUMNS))
        assert _apply(found, {}) == _replay(changes) == state
        # the same changes in batches of a few (only updates, only deletes, only inserts, one change...),
        # each applied to the mirror the earlier ones left
        mirror: dict[tuple, dict] = {}
        start = 0
        while start < len(changes):
            end = start + rng.randint(1, 4)
            mirror = _apply(mirror_candidates(_typed(changes[start:end]), PK, candidate_schema(COLUMNS)), mirror)
            assert mirror == _replay(changes[:end])
            start = end
        assert mirror == state


def test_last_per_key_of_an_integer_key_with_and_without_repeats() -> None:
    rnd = random.Random(5)
    n = 2000
    ids = list(range(n))
    rnd.shuffle(ids)
    seqs = [rnd.randrange(1 << 32).to_bytes(4, "big") for _ in range(n)]
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(range(n), pa.int64()),
                      SEQ: pa.array(seqs, pa.binary()), ROW_INDEX: pa.array([0] * n, pa.int32()),
                      SUB: pa.array([1] * n, pa.int32())})
    assert last_per_key(table, ["id"]) is table  # every key once: nothing to reduce
    repeated = table.set_column(0, "id", pa.array([i % 300 for i in ids], pa.int64()))
    last: dict[int, tuple[bytes, int]] = {}
    for i, v, seq in zip(repeated.column("id").to_pylist(), range(n), seqs, strict=True):
        if i not in last or seq >= last[i][0]:
            last[i] = (seq, v)
    got = last_per_key(repeated, ["id"])
    assert {r["id"]: r["v"] for r in got.to_pylist()} == {i: v for i, (_, v) in last.items()}
    assert len(got) == 300
