"""Access to the real binlog corpus in ../shared/corpus/real and the facts its MANIFEST states."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


def _find_corpus() -> Path:
    """shared/ sits beside the repository (CI clones main next to it); BINLAKE_SHARED overrides."""
    if os.environ.get("BINLAKE_SHARED"):
        return Path(os.environ["BINLAKE_SHARED"]) / "corpus" / "real"
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "corpus" / "real"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("../shared/corpus/real not found beside the repository; set BINLAKE_SHARED")


CORPUS = _find_corpus()
# Files broken on purpose (in rust-mysql-common/): name -> the byte position where decoding fails
BROKEN = {
    "binlog_truncated_event.000001": 4,
    "binlog_truncated_prev_gtid_event.000001": 120,
    "corrupt-relay-bin.000624": 91236,
}

# MANIFEST event-type abbreviations -> type codes
ABBREVIATIONS = {
    "FDE": 15, "QUERY": 2, "PREV_GTIDS": 35, "XID": 16, "TM": 19, "ROTATE": 4, "WR2": 30, "UR2": 31,
    "DR2": 32, "WR1": 23, "UR1": 24, "DR1": 25, "GTID": 33, "ANON_GTID": 34, "STOP": 3, "INTVAR": 5,
    "USER_VAR": 14, "ROWS_QUERY": 29, "RAND": 13, "MARIA_GTID_LIST": 163, "MARIA_CHECKPOINT": 161,
    "MARIA_GTID": 162, "MARIA_ANNOTATE": 160, "EXECUTE_LOAD_QUERY": 18, "BEGIN_LOAD_QUERY": 17,
    "TX_PAYLOAD": 40, "APPEND_BLOCK": 9, "PRE_GA_WRITE_ROWS": 20, "PRE_GA_UPDATE_ROWS": 21,
    "PRE_GA_DELETE_ROWS": 22, "PARTIAL_UR": 39, "INCIDENT": 26, "GTID_TAGGED": 42,
}


@dataclass
class ManifestEntry:
    path: Path
    server_version: str
    checksum: str  # "CRC32", "off", "n/a", "?"
    events: int | None
    in_use: bool | None
    types: dict[int, int]


def manifest() -> list[ManifestEntry]:
    text = (CORPUS / "MANIFEST.md").read_text()
    entries: list[ManifestEntry] = []
    folder = None
    for line in text.splitlines():
        m = re.match(r"^## \d+\. `([^`]+)/`", line)
        if m:
            folder = m.group(1)
            continue
        if not line.startswith("| `") or folder is None:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name, _size, version, checksum, events, in_use, types = cells[:7]
        counts: dict[int, int] = {}
        for part in filter(None, (p.strip() for p in types.split(","))):
            abbr, n = part.split("\u00d7")  # MANIFEST counts read TYPE, multiplication sign, N
            code = int(abbr) if abbr.isdigit() else ABBREVIATIONS[abbr]
            counts[code] = int(n)
        entries.append(ManifestEntry(
            path=CORPUS / folder / name.strip("`"),
            server_version=version.strip("`"),
            checksum=checksum.split(" ")[0],
            events=int(events.replace(",", "")) if events.replace(",", "").isdigit() else None,
            in_use={"set": True, "clear": False}.get(in_use),
            types=counts,
        ))
    return entries
