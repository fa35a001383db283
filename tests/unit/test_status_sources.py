"""The pure parts of ``binlake status``: binlog distance from SHOW BINARY LOGS sizes, and the landed offsets
read from a Spark checkpoint directory laid out as Spark writes it (offsets/<batch>: a version line, the
batch's metadata, one line of offsets per source; commits/<batch> once the batch committed)."""

from __future__ import annotations

from ingester.sources.position import bytes_after
from streaming_job.lake.files import LakeFiles
from streaming_job.source.progress import read_landed

LOGS = [("binlog.000001", 1000), ("binlog.000002", 700), ("binlog.000003", 256)]


def test_binlog_bytes_after_a_position() -> None:
    assert bytes_after(LOGS, "binlog.000003", 256) == 0
    assert bytes_after(LOGS, "binlog.000003", 200) == 56
    assert bytes_after(LOGS, "binlog.000001", 900) == 100 + 700 + 256
    assert bytes_after(LOGS, "binlog.000000", 4) is None  # purged, or another server's


def test_the_newest_committed_batch_of_a_checkpoint(tmp_path) -> None:
    files = LakeFiles.on_disk()
    assert read_landed(files, str(tmp_path)) is None  # nothing yet
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, ends in ((0, '{"p.db.a":{"0":3}}'), (1, '{"p.db.a":{"0":5},"p.db.b":{"0":2,"1":7}}'),
                        (2, '{"p.db.a":{"0":9},"p.db.b":{"0":2,"1":7}}')):
        (tmp_path / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{1700000000000 + batch},"conf":{{}}}}\n{ends}')
    for batch in (0, 1):  # batch 2 was planned, not committed: a crash in it
        (tmp_path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    landed = read_landed(files, str(tmp_path))
    assert landed is not None
    assert (landed.batch, landed.time_ms) == (1, 1700000000001)
    assert landed.offsets == {"p.db.a": {0: 5}, "p.db.b": {0: 2, 1: 7}}
