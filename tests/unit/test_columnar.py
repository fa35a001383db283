"""The columnar rows decoder (codec.rows.RowImages, used by the land job) against the row-dict decoder.

Differential: every rows event of every real binlog in the corpus decodes to the same values, value for
value and type for type, and malformed data fails with the same message and position; the land job's
Arrow images equal the ones built from the row dicts the way decode.py built them before the columnar
decoder (tests/harness/columnar.py). The type zoo on a real MariaDB runs the same checks
(tests/integration/test_type_zoo.py).
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from fuzz.codec import lake_values
from ingester.codec import BinlogDecoder, BinlogError
from ingester.codec import events as E
from ingester.daemon.table_reader import _b64
from ingester.records.builder import Record
from ingester.sources.binlog_file import binlog_frames
from streaming_job.decode import arrow_rows
from streaming_job.decode.decode import _Out, decode_partition, decode_record
from tests.corpus import BROKEN, CORPUS, manifest
from tests.harness.columnar import (
    assert_columnar_equals_dicts,
    assert_land_images_equal_reference,
    assert_record_images,
    typed,
)
from tests.harness.records import build_records, json_null_record, snapshot_record

ENTRIES = manifest()


def test_columnar_rows_equal_row_dicts_in_the_whole_corpus() -> None:
    """Every file; pre-GA, v1, v2 and partial JSON rows events all among them (MariaDB compressed rows
    events: the type zoo)."""
    compared: collections.Counter = collections.Counter()
    for entry in ENTRIES:
        compared += assert_columnar_equals_dicts(entry.path)
    assert set(compared) == {20, 21, 22, 23, 24, 25, 30, 31, 32, 39} and sum(compared.values()) > 10_000


@pytest.mark.parametrize("name", ["zendesk-maxwell/binlog.000004", "rust-mysql-common/mariadb-bin.000001",
                                  "rust-mysql-common/json.binlog.000001"])
def test_corrupted_rows_fail_alike(name) -> None:
    """Every single-byte corruption of a file's first rows events gives the same rows or the same error
    (message and byte position) in both decoders."""
    assert_corruptions_alike(CORPUS / name, True, lambda ev: typed(list(ev.rows)), 1500)


def assert_corruptions_alike(path: Path, columnar: Any, values: Any, most: int) -> None:
    """Flip each byte of the file's first rows events: the row-dict decoder (``columnar=False``) or the
    Python columnar one (else) and a decoder with ``columnar`` give the same ``values(event)`` or fail
    alike (the codec's message and position, or the same lake conversion error)."""
    reference = BinlogDecoder(str(path), verify_checksums=False, columnar=columnar is not True)
    other = BinlogDecoder(str(path), verify_checksums=False, columnar=columnar)
    tried = errors = 0
    for pos, raw in binlog_frames(path, BinlogDecoder(str(path))):
        ev = reference.decode(raw, pos)
        other.decode(raw, pos)
        if not isinstance(ev, E.RowsEvent) or tried > most:
            continue
        for i in range(19, len(raw)):
            bad = bytearray(raw)
            bad[i] ^= 0xFF if i % 2 else 0x01
            outcome = []
            for dec in (reference, other):
                try:
                    outcome.append(values(dec.decode(bytes(bad), pos)))
                except BinlogError as exc:
                    outcome.append(("error", str(exc), exc.position))
                except (ValueError, pa.ArrowException) as exc:  # the lake cannot hold a value: an error row
                    outcome.append(("lake", type(exc).__name__))
            assert outcome[0] == outcome[1], f"byte {i} of the event at {pos}"
            tried += 1
            errors += outcome[0][0] == "error"
    assert tried > 50 and errors > 5


# --- the land job's images --------------------------------------------------------------------


def test_land_images_equal_the_row_dict_reference() -> None:
    """Every corpus file with rows, as records (the sakila dump aside: gzip, and slow)."""
    total = sum(assert_land_images_equal_reference(e.path) for e in ENTRIES
                if e.path.name not in BROKEN and e.path.suffix != ".gz")
    assert total > 400


def test_snapshot_rows_land_like_before() -> None:
    """Snapshot entries hold row dicts (no binlog rows event): decode.py turns those into columns."""
    headers, value = snapshot_record([[[1, "a", _b64(b"\x00\xff")], [2, None, None]], [[3, "ç", _b64(b"")]], []])
    assert assert_record_images("db.t", headers, value) == 3


def test_snapshot_json_null_documents_land_as_text_null() -> None:
    """A snapshot's JSON null document lands as the JSON text "null", SQL NULL as the lake's NULL."""
    headers, value = json_null_record()
    rows = _Out()
    decode_record(rows, "db.t", 0, 0, headers, value)
    after = pa.ipc.open_stream(rows.rows[0].data).read_all()["after"].combine_chunks()
    assert after.field("j").to_pylist() == ["null", None, "[null]", '"null"']
    assert assert_record_images("db.t", headers, value) == 4


@pytest.mark.parametrize("name", ["zendesk-maxwell/binlog.000004", "alibaba-canal/mysql-bin.000001",
                                  "apecloud-mysql-binlog-connector-rust/mysql-bin.000080"])
def test_corrupted_rows_land_alike(name) -> None:
    """Every single-byte corruption of a file's first rows events gives the same lake values or the same
    error (message and position) through the C walker as through the Python columnar decoder."""
    assert_corruptions_alike(CORPUS / name, arrow_rows.compile_arrow_rows, lake_values, 2000)


def test_a_task_shipping_to_the_driver_stops_past_its_share() -> None:
    """decode_partition(ship=N): the whole output while it holds at most N row changes; past that, one
    ``withheld`` row and nothing more (the driver then decodes the batch the cached way)."""
    _, out, _ = build_records(CORPUS / "alibaba-canal" / "mysql-bin.000001", max_record_bytes=2000)
    records = [r for r in out if isinstance(r, Record)]
    batch = pa.RecordBatch.from_pylist([
        {"topic": r.topic, "partition": 0, "offset": i, "headers": [{"key": k, "value": v} for k, v in r.headers],
         "value": r.value} for i, r in enumerate(records)])
    whole = pa.Table.from_batches(list(decode_partition([batch])))
    total = sum(whole.column("rows").to_pylist()[i] or 0 for i in range(len(whole)))
    assert len(records) > 5 and total > 20
    assert pa.Table.from_batches(list(decode_partition([batch], ship=total))).equals(whole)
    cut = pa.Table.from_batches(list(decode_partition([batch], ship=total // 2)))
    assert cut.column("kind").to_pylist()[-1] == "withheld" and len(cut) == 1
