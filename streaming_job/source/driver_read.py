"""A small micro-batch read from Kafka by the driver itself, not by a Spark job.

Whatever its size, a batch read and decoded by Spark's tasks costs a job: its tasks scheduled, a Python worker
each for the source's read and another for the decode, the records passed through the JVM twice. For the batches
of a job keeping up with its source (a few thousand row changes a second, a batch a second) that fixed cost,
~0.4-0.5 s here, was most of a batch's time and so of the lake's lag behind the source.

The driver knows a batch's offsets without Spark: Spark writes them to the checkpoint (``offsets/<N>``: where batch N
ends; ``offsets/<N-1>``: where it starts) before it hands the batch to the sink. So a batch of at most
``DRIVER_READ_RECORDS`` records is read here, by the driver's own consumer (kafka_tasks.read_spans, the source's
tasks' read: read_committed, in offset order), and its DataFrame is never run. A batch that turns out to hold more
than ``DRIVER_READ_BYTES``, or whose read fails or stalls for ``_QUIET_S`` (Kafka away, records gone), goes to
Spark's tasks as before, which read it again and say what is wrong as they always did. The first batch of a query
(no ``offsets/<N-1>``: it starts at the topics' first offsets) is Spark's too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pyarrow as pa

from ..lake.files import LakeFiles
from .kafka_source import Offsets, batch_spans
from .kafka_tasks import SCHEMA, Span, read_spans
from .progress import read_planned

log = logging.getLogger("binlake.land")

DRIVER_READ_RECORDS = 10_000  # a batch of at most this many records (offsets) is read by the driver
DRIVER_READ_BYTES = 16 << 20  # ... unless it holds more than this
_QUIET_S = 5.0  # a read given nothing for this long while records are due goes to Spark's tasks


@dataclass
class DriverRead:
    """The driver's reads of small batches from Kafka at ``bootstrap``, of the query checkpointed at ``checkpoint``
    (its files: ``files``)."""

    bootstrap: str
    files: LakeFiles
    checkpoint: str

    def spans(self, batch_id: int) -> list[Span] | None:
        """Batch ``batch_id``'s spans as Spark planned them; None for a query's first batch, or where the checkpoint
        does not say."""
        if batch_id < 1:
            return None
        end = read_planned(self.files, self.checkpoint, batch_id)
        start = read_planned(self.files, self.checkpoint, batch_id - 1)
        if end is None or start is None:
            return None
        return batch_spans(_offsets(start.offsets), _offsets(end.offsets))

    def records(self, batch_id: int) -> pa.Table | None:
        """Batch ``batch_id``'s records (kafka_tasks.SCHEMA), read here; None where Spark's tasks are to read it."""
        try:
            spans = self.spans(batch_id)
            if spans is None or sum(s.end - s.start for s in spans) > DRIVER_READ_RECORDS:
                return None
            batches = list(read_spans(self.bootstrap, spans, _QUIET_S, DRIVER_READ_BYTES))
        except Exception as exc:  # (Spark's tasks read it again, and stop the query if it is for good)
            log.debug("batch %d: not read by the driver: %s", batch_id, exc)
            return None
        return pa.Table.from_batches(batches, schema=SCHEMA)


def _offsets(planned: dict[str, dict[int, int]]) -> Offsets:
    return {topic: {str(p): o for p, o in parts.items()} for topic, parts in planned.items()}
