"""Fuzz target: any bytes, read as a binlog file, end in output or the codec's BinlogError.

Each input goes through every path `binlake dump` has: the Python decoder with the text renderer
(hexdump included), the Python JSONL renderer and the native C emitter, which must give the same
lines and the same error as Python. Any other exception, a hang (libFuzzer's -timeout) or runaway
memory (-rss_limit_mb) is a finding. Run:

    .venv/bin/python -m fuzz.codec [libFuzzer flags] [CORPUS_DIR ...]

With no directory it writes the seed corpus (windows of the real binlogs) to .fuzz/seeds first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

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

    with atheris.instrument_imports(include=["ingester"]):
        import ingester.cli.dump
        import ingester.codec
        import ingester.dump.native
        import ingester.dump.text  # noqa: F401
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
