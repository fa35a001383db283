"""The Kafka source's planning (streaming_job/source/kafka_source.py): a batch's offsets split into tasks, each
offset read once; offsets that cannot be a continuation stop the query with one line."""

from __future__ import annotations

import collections
import random

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


@pytest.mark.parametrize("split", [False, True])
def test_every_offset_of_a_batch_is_in_exactly_one_task(split: bool) -> None:
    rng = random.Random(7)
    spans = []
    for t in range(60):
        start = rng.randrange(0, 1000)
        spans.append(Span(f"p.db.t{t}", rng.randrange(3), start, start + rng.choice([1, 2, 5, 40, 700])))
    want = collections.Counter((s.topic, s.partition, o) for s in spans for o in range(s.start, s.end))
    for tasks in (1, 2, 3, 8):
        groups = plan(spans, tasks, split=split)
        assert 1 <= len(groups) <= tasks
        assert _offsets(groups) == want
        assert all(groups)  # no empty task
        loads = [sum(s.end - s.start for s in g) for g in groups]
        # largest first to the least loaded: no task holds more than its share plus one span
        biggest = max(s.end - s.start for g in groups for s in g)
        assert max(loads) <= sum(loads) / len(groups) + biggest


def test_min_partitions_splits_one_hot_partition_into_as_many_tasks() -> None:
    groups = plan([Span("p.db.hot", 0, 100, 1100)], 4, split=True)
    assert len(groups) == 4
    assert sorted((s.start, s.end) for g in groups for s in g) == [(100, 350), (350, 600), (600, 850), (850, 1100)]
    # without min_partitions a partition is read whole, by one task
    assert plan([Span("p.db.hot", 0, 100, 1100)], 4) == [(Span("p.db.hot", 0, 100, 1100),)]


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


def test_a_bounded_batch_takes_sparks_source_and_an_unbounded_one_binlakes() -> None:
    assert stream_source("k:9092", "p", None, 1000) == SparkKafka("k:9092", "p", 0, 1000)
    assert stream_source("k:9092", "p", None, 1000, "binlake") == SparkKafka("k:9092", "p", 0, 1000)
    assert stream_source("k:9092", "p", 4, None, "binlake") == BinlakeKafka("k:9092", "p", 4)
    assert stream_source("k:9092", "p", 4, None, "spark") == SparkKafka("k:9092", "p", 4)


def test_an_available_now_round_short_of_the_offsets_at_the_start_is_named() -> None:
    """The job's check after each available-now round (a Python source's runs one batch in Spark 4.0): the last
    batch's end offsets (either source's JSON, as its progress gives them) against Kafka's at the job's start."""
    from streaming_job.source.available_now import short_of

    target = {"p.a": {"0": 40, "1": 7}, "p.b": {"0": 3}}
    sparks = {"sources": [{"endOffset": '{"p.b":{"0":3},"p.a":{"1":7,"0":12}}'}]}  # a replayed batch of Spark's
    assert short_of(sparks, target) == ["p.a-0"]
    ours = {"sources": [{"endOffset": '{"p.a": {"0": 41, "1": 7}, "p.b": {"0": 3}, "p.c": {"0": 2}}'}]}
    assert short_of(ours, target) == []
    assert short_of({"sources": [{"endOffset": '{"p.a": {"0": 40}}'}]}, target) == ["p.a-1", "p.b-0"]
    assert short_of(None, target) == [] and short_of({"sources": [{"endOffset": "None"}]}, target) == []
