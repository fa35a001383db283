"""What the land job has landed, read from its Spark checkpoint alone (no Spark, no running job): the last
committed micro-batch, its time, and the Kafka offsets it landed up to.

Spark's checkpoint keeps ``offsets/<batch>`` (written when a batch is planned: a version line, the batch's
metadata as JSON, then one JSON line per source with its end offsets) and ``commits/<batch>`` (written once
the batch's sink has committed). Landed is the newest batch with both. The Kafka sources of both kinds
(kafka_source.py) write their offsets as ``{"<topic>": {"<partition>": <offset>}}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from ..lake.files import LakeFiles
from ..lake.paths import join


@dataclass
class Landed:
    batch: int
    time_ms: int  # when the batch was planned (Spark's batchTimestampMs)
    offsets: dict[str, dict[int, int]]  # topic -> partition -> the next offset to land


def read_landed(files: LakeFiles, checkpoint: str) -> Landed | None:
    """The newest committed micro-batch of the checkpoint, or None where none has committed yet."""
    return _newest(files, checkpoint, "commits")


def _newest(files: LakeFiles, checkpoint: str, log: str) -> Landed | None:
    """The newest micro-batch with a file in the checkpoint's ``log`` (commits/ or offsets/), as planned."""
    for batch in sorted((int(n) for n in files.list(join(checkpoint, log)) if n.isdigit()), reverse=True):
        found = read_planned(files, checkpoint, batch)
        if found is not None:  # (None: cleaned up by Spark while we listed: an older one)
            return found
    return None


def read_planned(files: LakeFiles, checkpoint: str, batch: int) -> Landed | None:
    """A micro-batch as Spark planned it (its offsets file, written before the batch runs: committed or not); None
    where the checkpoint has no such file."""
    data = files.read(join(checkpoint, "offsets", str(batch)))
    if data is None:
        return None
    lines = data.decode().splitlines()
    meta = orjson.loads(lines[1]) if len(lines) > 1 else {}
    offsets: dict[str, dict[int, int]] = {}
    for line in lines[2:]:
        if line.strip() and line.strip() != "-":
            for topic, parts in orjson.loads(line).items():
                offsets[topic] = {int(p): int(o) for p, o in parts.items()}
    return Landed(batch, int(meta.get("batchTimestampMs", 0)), offsets)


def read_newest_planned(files: LakeFiles, checkpoint: str) -> Landed | None:
    """The newest micro-batch Spark planned (committed or to be run again), where the query's next new batch
    starts; None where the checkpoint has planned none."""
    return _newest(files, checkpoint, "offsets")
