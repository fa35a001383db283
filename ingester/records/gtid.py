"""Executed-GTID sets: MySQL's (uuid[:tag] -> intervals) and MariaDB's (domain -> server, seq)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MysqlGtidSet:
    """uuid (with ``:tag`` for tagged GTIDs) -> sorted, merged [start, end) intervals."""

    sids: dict[str, list[list[int]]] = field(default_factory=dict)

    def add(self, sid: str, gno: int) -> None:
        intervals = self.sids.setdefault(sid, [])
        for iv in intervals:
            if iv[0] <= gno < iv[1]:
                return
            if gno == iv[1]:
                iv[1] += 1
                self._merge(intervals)
                return
            if gno + 1 == iv[0]:
                iv[0] -= 1
                self._merge(intervals)
                return
        intervals.append([gno, gno + 1])
        intervals.sort()

    @staticmethod
    def _merge(intervals: list[list[int]]) -> None:
        intervals.sort()
        merged = [intervals[0]]
        for start, end in intervals[1:]:
            if start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        intervals[:] = merged

    @classmethod
    def parse(cls, text: str) -> MysqlGtidSet:
        """MySQL's text form: ``uuid:1-5:7,uuid2:tag:1-3`` (whitespace and newlines ignored)."""
        out = cls()
        for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
            fields = part.split(":")
            sid = fields[0].lower()
            for item in fields[1:]:
                if item and not item[0].isdigit():
                    sid = f"{fields[0].lower()}:{item}"
                    continue
                lo, _, hi = item.partition("-")
                out.sids.setdefault(sid, []).append([int(lo), int(hi or lo) + 1])
        for intervals in out.sids.values():
            MysqlGtidSet._merge(intervals)
        return out

    def encode(self) -> bytes:
        """The binary set of COM_BINLOG_DUMP_GTID (and PREVIOUS_GTIDS): the tagged layout of MySQL
        8.3+ only when a tag is present, so older servers get the format they know."""
        entries = sorted(([*sid.split(":", 1), ""])[:2] for sid in self.sids)
        tagged = any(tag for _, tag in entries)
        out = bytearray()
        if tagged:
            out += b"\x01" + len(entries).to_bytes(6, "little") + b"\x01"
        else:
            out += len(entries).to_bytes(8, "little")
        for uuid, tag in entries:
            out += bytes.fromhex(uuid.replace("-", ""))
            if tagged:
                out += _serialized_uint(len(tag.encode())) + tag.encode()
            intervals = self.sids[f"{uuid}:{tag}" if tag else uuid]
            out += len(intervals).to_bytes(8, "little")
            for start, end in intervals:
                out += start.to_bytes(8, "little", signed=True) + end.to_bytes(8, "little", signed=True)
        return bytes(out)

    def __str__(self) -> str:
        parts = []
        for sid in sorted(self.sids):
            ranges = ":".join(f"{s}" if e == s + 1 else f"{s}-{e - 1}" for s, e in self.sids[sid])
            parts.append(f"{sid}:{ranges}")
        return ",".join(parts)


def _serialized_uint(n: int) -> bytes:
    """mysql::serialization's variable-length unsigned integer (the inverse of Cursor.serialized_uint)."""
    for extra in range(8):
        if n < 1 << (7 * (extra + 1)):
            value = (n << (extra + 1)) | ((1 << extra) - 1)
            return value.to_bytes(extra + 1, "little")
    return b"\xff" + n.to_bytes(8, "little")


@dataclass
class MariadbGtidState:
    """MariaDB's replication state: the last GTID applied per domain (``domain-server-seq``)."""

    domains: dict[int, tuple[int, int]] = field(default_factory=dict)

    def add(self, domain: int, server_id: int, sequence: int) -> None:
        self.domains[domain] = (server_id, sequence)

    @classmethod
    def parse(cls, text: str) -> MariadbGtidState:
        out = cls()
        for part in filter(None, (p.strip() for p in text.split(","))):
            domain, server, seq = (int(x) for x in part.split("-"))
            out.domains[domain] = (server, seq)
        return out

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{q}" for d, (s, q) in sorted(self.domains.items()))
