"""Fuzz target: any bytes, read as a binlog file, end in output or the codec's BinlogError.

Each input goes through every path `binlake dump` has: the Python decoder with the text renderer
(hexdump included), the Python JSONL renderer and the native C emitter, which must give the same
lines and the same error as Python; and both paths of the land job's decoder: the Python columnar
decoder and the C column walker (streaming_job/decode/arrow_rows.py), which must give the same lake values.
Any other exception, a hang (libFuzzer's -timeout) or runaway
memory (-rss_limit_mb) is a finding. Run:

    .venv/bin/python -m fuzz.codec [libFuzzer flags] [CORPUS_DIR ...]

With no directory it writes the seed corpus (windows of the real binlogs) to .fuzz/seeds first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
_WORK = _ROOT / ".fuzz"
_NAME = "fuzz-input"


def one_input(data: bytes) -> None:
    """Decode ``data`` every way the codec can; raise only on a finding (not on BinlogError)."""
    from ingester.cli.dump import render
    from ingester.codec import BinlogDecoder, BinlogError
    from ingester.dump import native
    from ingester.dump.jsonl import frame_lines
    from ingester.sources.binlog_file import _check_header, frames_in

    def text() -> Iterator[bytes]:
        dec = BinlogDecoder(_NAME, verify_checksums=False)
        _check_header(data, dec, _NAME)
        yield from render(dec, frames_in(data, 4, None, dec, _NAME), hexdump=True)

    def jsonl_python() -> Iterator[bytes]:
        dec = BinlogDecoder(_NAME, verify_checksums=False)
        _check_header(data, dec, _NAME)
        yield from frame_lines(dec, frames_in(data, 4, None, dec, _NAME))

    def jsonl_native() -> Iterator[bytes]:
        dec = BinlogDecoder(_NAME, verify_checksums=False)
        _check_header(data, dec, _NAME)
        yield from native.render_jsonl(dec, data, 4, None, _NAME)

    def outcome(lines: Callable[[], Iterator[bytes]]) -> tuple[bytes, str | None]:
        out = []
        try:
            for line in lines():
                out.append(line)
        except BinlogError as exc:
            if exc.position is None or _NAME not in str(exc):
                raise AssertionError(f"BinlogError without stream and position: {exc!r}") from exc
            return b"".join(out), str(exc)
        return b"".join(out), None

    outcome(text)
    reference = outcome(jsonl_python)
    if native.native is not None:
        emitted = outcome(jsonl_native)
        if emitted != reference:
            raise AssertionError(f"native emitter differs from Python: error {emitted[1]!r} vs {reference[1]!r}, "
                                 f"{len(emitted[0])} vs {len(reference[0])} bytes")
    land_alike(data)


def land_alike(data: bytes) -> None:
    """The land job's two row decoders give the same lake values, or fail alike."""
    from ingester.codec import BinlogDecoder
    from streaming_job.decode import arrow_rows

    if arrow_rows.native is None:
        return
    python = land_outcome(data, BinlogDecoder(_NAME, verify_checksums=False, columnar=True))
    walked = land_outcome(data, BinlogDecoder(_NAME, verify_checksums=False, columnar=arrow_rows.compile_arrow_rows))
    if walked != python:
        raise AssertionError(f"C column walker differs from Python: {walked[-1:]!r} vs {python[-1:]!r} "
                             f"after {len(python)} events")


def land_outcome(data: bytes, dec: Any) -> list[Any]:
    """Each rows event's lake values, then the error that stopped decoding (if one did)."""
    import pyarrow as pa

    from ingester.codec import BinlogError
    from ingester.codec.events import RowsEvent
    from ingester.sources.binlog_file import _check_header, frames_in

    out: list[Any] = []
    try:
        _check_header(data, dec, _NAME)
        for pos, raw in frames_in(data, 4, None, dec, _NAME):
            out += [lake_values(ev) for ev in dec.events(raw, pos) if isinstance(ev, RowsEvent)]
    except BinlogError as exc:
        out.append(("error", str(exc), exc.position))
    except (ValueError, pa.ArrowException) as exc:  # a value the lake cannot hold: the land job's error row
        out.append(("lake", type(exc).__name__))
    return out


def lake_values(ev: Any) -> list[tuple[str, str]]:
    """An event's images as (lake type, repr of the values) per present column in table order (repr: NaN
    equals NaN), whichever land decoder built them."""
    from streaming_job.decode.arrow_rows import ArrowImages, LakeColumn

    rows, columns = ev.rows, ev.table_map.columns
    arrays = []
    if isinstance(rows, ArrowImages):
        for slots, aligned in (image for image in rows.images() if image is not None):
            for i, walker in enumerate(aligned):
                if walker is not None:
                    arrays.append(LakeColumn(columns[i], ev.table_map.is_mariadb).array(slots[i]) if walker.raw else
                                  walker.array([(len(rows), slots[i])], len(rows)))
    else:
        for present, cols in ((ev.columns_before, rows.before), (ev.columns_after, rows.after)):
            arrays += [LakeColumn(columns[i], ev.table_map.is_mariadb).array(col)
                       for i, col in zip(present, cols or (), strict=True)]
    return [(str(a.type), repr(_plain(a).to_pylist())) for a in arrays]


def _plain(array: Any) -> Any:
    """Temporal values as their stored integers: a synthetic row may hold a date Arrow keeps but Python's
    datetime cannot (past year 9999), and both decoders must still agree on it."""
    import pyarrow as pa

    if pa.types.is_date32(array.type):
        return array.view(pa.int32())
    if pa.types.is_timestamp(array.type) or pa.types.is_time64(array.type) or pa.types.is_date64(array.type):
        return array.view(pa.int64())
    return array


def seeds(max_size: int = 4096) -> Iterator[bytes]:
    """Real binlogs cut into small valid files: magic + the events up to the format description,
    then windows of consecutive events (table maps come with their rows events)."""
    from ingester.codec import BinlogDecoder, BinlogError
    from ingester.codec.constants import EventType
    from ingester.sources.binlog_file import binlog_frames
    from tests.corpus import CORPUS

    for path in sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name != "MANIFEST.md"):
        data = path.read_bytes()
        if not data.startswith(b"\xfebin"):
            continue
        if len(data) <= max_size:
            yield data
        frames: list[tuple[int, bytes]] = []
        try:
            for pos, raw in binlog_frames(path, BinlogDecoder(str(path), verify_checksums=False)):
                frames.append((pos, bytes(raw)))
        except BinlogError:
            pass
        head = next((i + 1 for i, (_, raw) in enumerate(frames) if raw[4] == EventType.FORMAT_DESCRIPTION_EVENT), 0)
        prefix = b"\xfebin" + b"".join(raw for _, raw in frames[:head])
        step = max(1, (len(frames) - head) // 300)  # at most ~300 windows a file
        for start in range(head, len(frames), step):
            window = prefix
            for _, raw in frames[start : start + 8]:
                if len(window) + len(raw) > max_size:
                    break
                window += raw
            if len(window) > len(prefix):
                yield window


def write_seeds(folder: Path) -> Path:
    """Write the seed corpus into ``folder`` (one file per seed, named by index)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(dict.fromkeys(seeds())):
        (folder / f"seed-{i:05d}").write_bytes(seed)
    return folder


def main(argv: list[str]) -> None:
    """libFuzzer's command line; the seed corpus and fuzz/regressions are added when no folder is given."""
    import atheris

    with atheris.instrument_imports(include=["ingester", "streaming_job"]):
        import ingester.cli.dump
        import ingester.codec
        import ingester.dump.native
        import ingester.dump.text  # noqa: F401
        import streaming_job.decode.arrow_rows  # noqa: F401
    args = list(argv)
    if not any(not a.startswith("-") for a in args[1:]):
        live = _WORK / "corpus"
        live.mkdir(parents=True, exist_ok=True)
        args += [str(live), str(write_seeds(_WORK / "seeds")), str(_ROOT / "fuzz" / "regressions")]
    if not any(a.startswith("-max_len") for a in args):
        args.append("-max_len=8192")
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
