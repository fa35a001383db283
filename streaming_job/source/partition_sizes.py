"""The bytes per offset of a batch's topic partitions, where binlake's Kafka source (kafka_source.py) bounds a
batch in bytes: Kafka's log sizes are compressed sizes, and offsets also count transaction markers and aborted
records, so the records' own sizes are sampled where the batch starts, as the batch will hold them once read: a
snapshot's and verify's rows, zstd frames in the records (records/snapshot.py), at their decompressed size
(``held_bytes``; they compress 6-10x: a bound on the frames let one batch take 10,000,000 snapshot rows, or five
times its bound of verify rows, which ran the driver out of memory)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ingester.records.snapshot import held_bytes

_SAMPLE_BYTES = 1 << 20  # a partition's sample: its records from the batch's start, up to about this many bytes
# ... or this many offsets, or the batch's end there: the first fetch alone may hold a few small records only (a
# verify chunk's last entries, before the next chunk's large ones), which said nothing of the rest
_SAMPLE_OFFSETS = 64
_SAMPLE_WAIT_MS = 2000
_SAMPLE_TTL_S = 30.0  # a partition's sample serves the batches planned this long after it
_UNSAMPLED = 1024  # bytes per offset of a partition with no record to sample where it starts (markers, aborted ones)
_REACH_SLACK = 16  # offsets: a sample serves batches reaching up to twice as far as it did, and this many more


@dataclass
class Sample:
    """A partition's records fetched from ``start`` (the batch holding ``behind`` offsets there): their bytes, and
    the offsets they reach past the start; full at _SAMPLE_BYTES, _SAMPLE_OFFSETS or the batch's end there."""

    start: int
    behind: int
    size: int = 0
    offsets: int = 0

    def add(self, last_offset: int, size: int) -> None:
        """Records fetched up to ``last_offset``, of ``size`` bytes."""
        self.size += size
        self.offsets = last_offset + 1 - self.start

    @property
    def full(self) -> bool:
        return self.size >= _SAMPLE_BYTES or self.offsets >= min(_SAMPLE_OFFSETS, max(1, self.behind))


class PartitionSizes:
    """The bytes per offset of topic partitions where the next batch starts: their records' keys, values and headers
    (as the batch will hold them, uncompressed), from one fetch of about _SAMPLE_BYTES at that offset, kept for
    _SAMPLE_TTL_S while the batches planned from it reach no more than about twice as far past their start as the
    sample reached past its own (a quiet table's few small records say nothing of a bulk load's large ones after
    them; a steady stream's batches, alike, are not sampled again each time). A partition that
    gives no record there (only transaction markers or aborted records) counts at _UNSAMPLED per offset."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._sampler: Any = None
        # (bytes per offset, when sampled, offsets the sample reached)
        self._known: dict[tuple[str, int], tuple[float, float, int]] = {}

    def bytes_per_offset(self, starts: dict[tuple[str, int], int],
                         behind: dict[tuple[str, int], int] | None = None) -> dict[tuple[str, int], float]:
        """Per partition from ``starts`` (where the batch starts), the batch holding ``behind`` offsets of it."""
        now = time.monotonic()
        stale = {key: start for key, start in starts.items()
                 if key not in self._known or now - self._known[key][1] >= _SAMPLE_TTL_S
                 or (behind or {}).get(key, 0) > 2 * self._known[key][2] + _REACH_SLACK}
        if stale:
            sampled = self._sample(stale, {key: (behind or {}).get(key, 0) for key in stale})
            for key in stale:
                per_offset, reached = sampled.get(key, (_UNSAMPLED, (behind or {}).get(key, 0)))
                self._known[key] = (per_offset, now, reached)
        return {key: self._known[key][0] for key in starts}

    def _sample(self, starts: dict[tuple[str, int], int],
                behind: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[float, int]]:
        """Per partition that gave records: its bytes per offset from ``starts`` (``behind``: the offsets the batch
        holds there), and the offsets its fetches reached."""
        from kafka import KafkaConsumer, TopicPartition

        if self._sampler is None:
            self._sampler = KafkaConsumer(bootstrap_servers=self.bootstrap, isolation_level="read_uncommitted",
                                          enable_auto_commit=False, group_id=None, auto_offset_reset="earliest",
                                          max_partition_fetch_bytes=_SAMPLE_BYTES, fetch_max_bytes=64 << 20,
                                          fetch_max_wait_ms=10, retry_backoff_ms=10, client_id="binlake-land-sizes")
        wanted = {TopicPartition(t, p): start for (t, p), start in starts.items()}
        # a new assignment keeps a partition's state from the last one: paused, where a sample was cut short
        self._sampler.assign([])
        self._sampler.assign(list(wanted))
        for tp, start in wanted.items():
            self._sampler.seek(tp, start)
        samples = {(tp.topic, tp.partition): Sample(start, behind.get((tp.topic, tp.partition), 0))
                   for tp, start in wanted.items()}
        deadline = time.monotonic() + _SAMPLE_WAIT_MS / 1000
        empty = 0
        while any(not s.full for s in samples.values()) and time.monotonic() < deadline and empty < 3:
            polled = self._sampler.poll(timeout_ms=100)
            empty = 0 if polled else empty + 1  # (a partition with nothing to give: no more fetches come)
            for tp, records in polled.items():
                sample = samples[(tp.topic, tp.partition)]
                if records and not sample.full:
                    sample.add(records[-1].offset, sum(
                        held_bytes(r.value or b"") + len(r.key or b"") + sum(len(k) + len(v or b"")
                                                                             for k, v in r.headers)
                        for r in records))
                    if sample.full:
                        self._sampler.pause(tp)
        self._sampler.assign([])
        return {key: (s.size / max(1, s.offsets), s.offsets) for key, s in samples.items() if s.offsets}

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
