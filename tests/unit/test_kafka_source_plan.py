"""The Kafka source's planning (streaming_job/source/kafka_source.py): a batch's offsets split into tasks, each
offset read once; offsets that cannot be a continuation stop the query with one line."""

from __future__ import annotations

import collections
import json
import random
from types import SimpleNamespace

import pytest

from streaming_job.source.kafka_source import (
    BinlakeKafka,
    KafkaStreamReader,
    SourceError,
    Span,
    SparkKafka,
    plan,
    stream_source,
)


def _offsets(groups: list[tuple[Span, ...]]) -> collections.Counter:
    return collections.Counter((s.topic, s.partition, o) for g in groups for s in g for o in range(s.start, s.end))


@pytest.mark.parametrize("least", [1, 16, 10_000])
def test_every_offset_of_a_batch_is_in_exactly_one_task(least: int) -> None:
    rng = random.Random(7)
    spans = []
    for t in range(60):
        start = rng.randrange(0, 1000)
        spans.append(Span(f"p.db.t{t}", rng.randrange(3), start, start + rng.choice([1, 2, 5, 40, 700])))
    want = collections.Counter((s.topic, s.partition, o) for s in spans for o in range(s.start, s.end))
    for tasks in (1, 2, 3, 8):
        groups = plan(spans, tasks, least)
        assert 1 <= len(groups) <= tasks
        assert _offsets(groups) == want
        assert all(groups)  # no empty task
        loads = [sum(s.end - s.start for s in g) for g in groups]
        # largest first to the least loaded: no task holds more than its share plus one span
        biggest = max(s.end - s.start for g in groups for s in g)
        assert max(loads) <= sum(loads) / len(groups) + biggest


def test_one_hot_partition_is_read_by_every_task_in_pieces_of_at_least_a_few_records() -> None:
    groups = plan([Span("p.db.hot", 0, 100, 1100)], 4)
    assert len(groups) == 4
    assert sorted((s.start, s.end) for g in groups for s in g) == [(100, 350), (350, 600), (600, 850), (850, 1100)]
    # a few records are read by one task (LEAST_PIECE), unless min_partitions asks for pieces of any size
    hot = "p.db.hot"
    assert plan([Span(hot, 0, 100, 120)], 4) == [(Span(hot, 0, 100, 116),), (Span(hot, 0, 116, 120),)]
    assert plan([Span("p.db.hot", 0, 100, 110)], 4) == [(Span("p.db.hot", 0, 100, 110),)]
    assert len(plan([Span("p.db.hot", 0, 100, 110)], 4, least=1)) == 4
    # a hot partition beside quiet ones is cut to the share of a task
    groups = plan([Span("p.db.hot", 0, 0, 1000), *(Span(f"p.db.t{i}", 0, 0, 10) for i in range(10))], 2)
    assert sorted(sum(s.end - s.start for s in g) for g in groups) == [550, 550]


def test_an_empty_batch_has_no_tasks() -> None:
    assert plan([], 2) == []


def _reader(tasks: int = 2) -> KafkaStreamReader:
    return KafkaStreamReader("127.0.0.1:9", r"p\..*", tasks, 0)  # planning asks Kafka nothing


def test_a_batch_reads_from_each_partitions_last_end_and_new_partitions_from_zero() -> None:
    splits = _reader(1).partitions({"p.a": {"0": 5, "1": 7}}, {"p.a": {"0": 9, "1": 7}, "p.b": {"0": 3}})
    (only,) = splits
    assert set(only.spans) == {Span("p.a", 0, 5, 9), Span("p.b", 0, 0, 3)}  # p.a-1: nothing new


def test_a_partition_whose_end_is_before_what_was_read_stops_the_query() -> None:
    with pytest.raises(SourceError, match=r"p\.a-0 ends at offset 2, before offset 5 .* recreated"):
        _reader().partitions({"p.a": {"0": 5}}, {"p.a": {"0": 2}})


def test_a_partition_left_out_of_a_batchs_end_stops_the_query_unless_nothing_was_read_of_it() -> None:
    with pytest.raises(SourceError, match=r"p\.a-1 are missing from the batch's end offsets"):
        _reader().partitions({"p.a": {"0": 5, "1": 3}}, {"p.a": {"0": 6}})
    # a partition with nothing read yet (offset 0) is found again from 0 by a later batch: nothing lost
    assert _reader().partitions({"p.a": {"0": 5, "1": 0}}, {"p.a": {"0": 6}})


def test_a_bound_in_records_takes_sparks_source_a_running_job_bounded_in_bytes_binlakes(monkeypatch) -> None:
    """Spark's source for a bound in records; binlake's for a running job bounded in bytes (a backlog built while it
    runs would be one batch of Spark's); a one-shot run (available-now) takes Spark's where what Kafka holds past the
    checkpoint is one batch at most, and a run without a bound where the topics have few partitions."""
    import streaming_job.source.kafka_source as kafka_source

    assert stream_source("k:9092", "p", None, 1000) == SparkKafka("k:9092", "p", 0, 1000)
    assert stream_source("k:9092", "p", None, 1000, "binlake", 1 << 20) == SparkKafka("k:9092", "p", 0, 1000)
    assert stream_source("k:9092", "p", 4, None, "binlake", 1 << 20) == BinlakeKafka("k:9092", "p", 4, 1 << 20)
    assert stream_source("k:9092", "p", 4, None, "spark", 1 << 20) == SparkKafka("k:9092", "p", 4)
    asked = []
    for needed in (True, False):
        monkeypatch.setattr(kafka_source, "_binlakes_needed", lambda *args, needed=needed: asked.append(args) or needed)
        found = stream_source("k:9092", "p", None, None, "auto", 1 << 20, {"p.a": {"0": 7}}, once=True)
        assert found == (BinlakeKafka("k:9092", "p", 0, 1 << 20) if needed else SparkKafka("k:9092", "p", 0))
        unbounded = stream_source("k:9092", "p", None, None, "auto", 0)
        assert unbounded == (BinlakeKafka("k:9092", "p", 0, 0) if needed else SparkKafka("k:9092", "p", 0))
    assert asked[0] == ("k:9092", "p", 1 << 20, {"p.a": {"0": 7}})  # from where the checkpoint's next batch starts
    asked.clear()
    running = stream_source("k:9092", "p", None, None, "auto", 1 << 20, {"p.a": {"0": 7}})
    assert running == BinlakeKafka("k:9092", "p", 0, 1 << 20) and not asked  # Kafka not even asked


class _Sizes:
    """The partitions' samples, as PartitionSizes gives them (bytes per offset); None: no sample came."""

    def __init__(self, per_offset: dict[tuple[str, int], float] | None) -> None:
        self.per_offset = per_offset
        self.asked: list[dict[tuple[str, int], int]] = []

    def bytes_per_offset(self, starts, behind=None):  # type: ignore[no-untyped-def]
        self.asked.append(dict(starts))
        from streaming_job.source.partition_sizes import _UNSAMPLED

        return {k: (self.per_offset or {}).get(k, _UNSAMPLED) for k in starts}

    def close(self) -> None:
        pass


def _bounded_reader(max_bytes: int, sizes: dict[tuple[str, int], float] | None) -> KafkaStreamReader:
    reader = KafkaStreamReader("127.0.0.1:9", r"p\..*", 2, 0, max_bytes)
    reader._sizes = _Sizes(sizes)  # type: ignore[assignment]
    return reader


def test_a_backlog_within_the_bound_is_one_batch() -> None:
    reader = _bounded_reader(1000, {("p.a", 0): 10.0, ("p.b", 0): 10.0})
    reader.partitions({"p.a": {"0": 5}, "p.b": {"0": 0}}, {"p.a": {"0": 5}, "p.b": {"0": 0}})  # a restart's call
    latest = {"p.a": {"0": 55}, "p.b": {"0": 50}}  # 500 + 500 bytes
    assert reader._bounded(latest) == latest


def test_a_backlog_past_the_bound_is_cut_in_proportion_from_where_the_next_batch_starts() -> None:
    """After a restart Spark hands the source the last batch's end (AcceptsLatestSeenOffset: partitions(end, end));
    the next batch starts there, and each partition gives its share of the bound, at least one record."""
    reader = _bounded_reader(10_000, {("p.a", 0): 100.0, ("p.b", 0): 1000.0, ("p.c", 0): 50.0})
    seen = {"p.a": {"0": 100}, "p.b": {"0": 0}, "p.c": {"0": 7}, "p.d": {"0": 3}}
    reader.partitions(seen, seen)
    latest = {"p.a": {"0": 1100}, "p.b": {"0": 90}, "p.c": {"0": 8}, "p.d": {"0": 3}}
    # behind: a 1,000 x 100 B, b 90 x 1,000 B, c 1 x 50 B = 190,050 B; the bound's share 10,000 / 190,050
    cut = reader._bounded(latest)
    assert cut == {"p.a": {"0": 100 + 52}, "p.b": {"0": 4}, "p.c": {"0": 8}, "p.d": {"0": 3}}
    held = 52 * 100 + 4 * 1000 + 1 * 50
    assert held <= 10_000
    # the next batch starts at the cut (the source remembers what it gave): the rest, cut again
    reader._remember(cut)
    assert reader._bounded(latest)["p.a"]["0"] == 152 + int(948 * 10_000 / (948 * 100 + 86 * 1000 + 0))


def test_partitions_without_a_sample_count_as_small_records_and_samples_serve_a_while() -> None:
    """A partition with no record where the batch starts (only markers, aborted records) counts at _UNSAMPLED per
    offset; a sample serves the batches planned within _SAMPLE_TTL_S that reach no more than about twice as far past
    their start as it reached past its own: a quiet table's few small records say nothing of the bulk load after
    them."""
    from streaming_job.source.partition_sizes import _UNSAMPLED, PartitionSizes

    sizes = PartitionSizes("127.0.0.1:9")
    asked = []
    answers = iter([{("p.a", 0): (500.0, 40)}, {("p.a", 0): (900_000.0, 2)}])
    sizes._sample = lambda starts, behind: asked.append(dict(starts)) or next(answers)  # type: ignore[method-assign]
    assert sizes.bytes_per_offset({("p.a", 0): 3, ("p.b", 0): 0}, {("p.a", 0): 40, ("p.b", 0): 5}) == {
        ("p.a", 0): 500.0, ("p.b", 0): _UNSAMPLED}
    assert sizes.bytes_per_offset({("p.a", 0): 9}, {("p.a", 0): 96}) == {("p.a", 0): 500.0}  # 2 x 40 + 16
    assert sizes.bytes_per_offset({("p.b", 0): 0}, {("p.b", 0): 5}) == {("p.b", 0): _UNSAMPLED}
    assert asked == [{("p.a", 0): 3, ("p.b", 0): 0}]  # sampled where the batch starts, once
    # 97 offsets past the start now: sampled again, there
    assert sizes.bytes_per_offset({("p.a", 0): 43}, {("p.a", 0): 97}) == {("p.a", 0): 900_000.0}
    assert asked[1:] == [{("p.a", 0): 43}]


def test_a_batch_always_moves_on_even_when_one_record_is_larger_than_the_bound() -> None:
    reader = _bounded_reader(10, {("p.a", 0): 900_000.0, ("p.b", 0): 900_000.0})
    reader.partitions({"p.a": {"0": 4}, "p.b": {"0": 0}}, {"p.a": {"0": 4}, "p.b": {"0": 0}})
    assert reader._bounded({"p.a": {"0": 9}, "p.b": {"0": 2}}) == {"p.a": {"0": 5}, "p.b": {"0": 1}}


def test_an_available_now_round_short_of_the_offsets_at_the_start_is_named() -> None:
    """The job's check after each available-now round (a Python source's runs one batch in Spark 4.0): the last
    batch's end offsets (either source's JSON, as its progress gives them) against Kafka's at the job's start."""
    from streaming_job.source.available_now import short_of

    target = {"p.a": {"0": 40, "1": 7}, "p.b": {"0": 3}}
    sparks = {"sources": [{"endOffset": {"p.b": {"0": 3}, "p.a": {"1": 7, "0": 12}}}]}  # a replayed batch of Spark's
    assert short_of(sparks, target) == ["p.a-0"]
    ours = {"sources": [{"endOffset": {"p.a": {"0": 41, "1": 7}, "p.b": {"0": 3}, "p.c": {"0": 2}}}]}
    assert short_of(ours, target) == []
    assert short_of({"sources": [{"endOffset": {"p.a": {"0": 40}}}]}, target) == ["p.a-1", "p.b-0"]
    assert short_of(None, target) == [] and short_of({"sources": [{"endOffset": "None"}]}, target) == []


class _Query:
    """A StreamingQuery whose last progress (its JVM object's JSON) is of a batch that ended at ``end``."""

    def __init__(self, end: dict | None) -> None:
        progress = None if end is None else SimpleNamespace(json=lambda: json.dumps(
            {"batchId": 1, "sources": [{"endOffset": end}]}))
        self._jsq = SimpleNamespace(lastProgress=lambda: progress)

    def awaitTermination(self, timeout: float) -> bool:
        return True


class _Writer:
    """A DataStreamWriter whose runs end their one batch at the given offsets in turn."""

    def __init__(self, ends: list[dict | None]) -> None:
        self.ends = ends
        self.runs = 0

    def start(self) -> _Query:
        self.runs += 1
        return _Query(self.ends[min(self.runs, len(self.ends)) - 1])


def test_available_now_runs_the_query_again_while_its_bounded_batches_move_on_short_of_the_start() -> None:
    from streaming_job.source.available_now import run_rounds

    target = {"p.a": {"0": 30}, "p.b": {"0": 4}}
    steps = [{"p.a": {"0": n}, "p.b": {"0": 4}} for n in (8, 16, 24, 31)]
    writer = _Writer([*steps, None])
    done: list[object] = []
    run_rounds(writer, target, done.append)
    assert writer.runs == 4 and len(done) == 4  # the fourth batch reached the offsets Kafka held at the start
    stuck = _Writer([steps[0], steps[0], steps[1]])  # a run whose batch ended where the one before did: no more
    run_rounds(stuck, target, lambda q: None)
    assert stuck.runs == 2
    once = _Writer([None])  # nothing to land: no batch
    run_rounds(once, target, lambda q: None)
    assert once.runs == 1


def test_a_sample_goes_on_past_a_few_small_records_to_the_large_ones_after_them() -> None:
    """A batch starting at a verify chunk's last small entries (its changed keys, its bounds) before the next
    chunk's entries of 900,000 bytes: the first fetch's two records alone said ~100 bytes per offset, and a batch
    five times past the bound was taken. The sample goes on to _SAMPLE_BYTES, _SAMPLE_OFFSETS or the batch's end."""
    from streaming_job.source.partition_sizes import _SAMPLE_OFFSETS, Sample

    sample = Sample(start=100, behind=500)
    sample.add(101, 200)  # two small records
    assert not sample.full
    sample.add(103, 900_000 * 2)  # then the next chunk's first two
    assert sample.full and (sample.size, sample.offsets) == (1_800_200, 4)
    small = Sample(start=0, behind=500)
    small.add(_SAMPLE_OFFSETS - 2, 64 * 100)
    assert not small.full
    small.add(_SAMPLE_OFFSETS - 1, 100)
    assert small.full
    short = Sample(start=7, behind=3)  # the batch holds three offsets there: they are the sample
    short.add(9, 300)
    assert short.full and short.offsets == 3


class _Late(_Query):
    """A query that fails as Spark 4.0's does when the source's Python process did not connect back in time."""

    def awaitTermination(self, timeout: float) -> bool:
        raise RuntimeError("[STREAM_FAILED] ... org.apache.spark.SparkException: Python worker failed to connect back.")


class _LateWriter(_Writer):
    """A DataStreamWriter whose first ``late`` runs fail to start (after ``begun()`` a batch each, if given)."""

    def __init__(self, late: int, begun: list[int] | None = None) -> None:
        super().__init__([None])
        self.late, self.begun = late, begun

    def start(self) -> _Query:
        self.runs += 1
        if self.runs > self.late:
            return _Query(None)
        if self.begun is not None:
            self.begun[0] += 1
        return _Late(None)


def test_a_query_whose_python_source_did_not_connect_back_in_time_is_started_again_twice_at_most() -> None:
    """Spark 4.0 waits a fixed 10 s for the Python process of a Python data source (binlake's Kafka source); on a
    busy machine the query failed at its start with nothing planned. It is started again, twice at most, and only
    where no batch began in it; any other failure is raised at once."""
    import pytest

    from streaming_job.source.available_now import StartRetry, run_rounds

    calls = [0]
    twice = _LateWriter(2)
    run_rounds(twice, None, lambda q: None, retry=StartRetry(lambda: calls[0]))
    assert twice.runs == 3
    thrice = _LateWriter(3)
    with pytest.raises(RuntimeError, match="connect back"):
        run_rounds(thrice, None, lambda q: None, retry=StartRetry(lambda: calls[0]))
    assert thrice.runs == 3
    begun = _LateWriter(1, calls)  # a batch had begun in the query that failed: not started again
    with pytest.raises(RuntimeError, match="connect back"):
        run_rounds(begun, None, lambda q: None, retry=StartRetry(lambda: calls[0]))
    assert begun.runs == 1
    with pytest.raises(RuntimeError, match="connect back"):  # no retry asked for
        run_rounds(_LateWriter(1), None, lambda q: None)
    failing = _LateWriter(1)
    with pytest.raises(RuntimeError, match="connect back"):  # the work beside the batches failed meanwhile
        run_rounds(failing, None, lambda q: None, lambda: ValueError("parked"), StartRetry(lambda: calls[0]))
