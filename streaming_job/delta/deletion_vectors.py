"""Delta's deletion vectors (PROTOCOL.md, "Deletion Vectors"): the rows of a data file that a commit marks
deleted without rewriting the file. Sans-I/O: row positions <-> the bytes of a deletion vector file and the
descriptor an ``add`` action carries; the caller reads and writes the files.

A deletion vector is a set of row positions (0-based, 64-bit) as a 64-bit Roaring bitmap in the "portable"
layout (little-endian: the magic number, the number of 32-bit buckets, then each bucket's high half and its
32-bit Roaring bitmap), which Spark's Delta writes. Delta's older "native" layout (big-endian: magic, number of
bitmaps, each one's size and bitmap) is read too. A deletion vector file holds one or more of them, each framed
by its size and a CRC-32 (big-endian), after a version byte. Files are named by a UUID, which the descriptor
carries in Z85 (``storageType`` "u": the file lies in the table's directory)."""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import BitMap

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
FILE_VERSION = 1
TABLE_FEATURE = "deletionVectors"
ENABLE_PROPERTY = "delta.enableDeletionVectors"
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUES = {c: i for i, c in enumerate(_Z85)}


class DeletionVectorError(ValueError):
    """Bytes that are not a deletion vector of the layouts this module reads (what and where in the message)."""


def z85_encode(data: bytes) -> str:
    """ZeroMQ's Base85 (RFC 32) of bytes whose length is a multiple of 4."""
    if len(data) % 4:
        raise ValueError("Z85 encodes whole 4-byte words")
    out = []
    for (word,) in struct.iter_unpack(">I", data):
        chars = []
        for _ in range(5):
            word, digit = divmod(word, 85)
            chars.append(_Z85[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def z85_decode(text: str) -> bytes:
    if len(text) % 5:
        raise DeletionVectorError(f"a Z85 text of {len(text)} characters (not whole 5-character groups)")
    words = []
    for start in range(0, len(text), 5):
        word = 0
        for char in text[start:start + 5]:
            digit = _Z85_VALUES.get(char)
            if digit is None:
                raise DeletionVectorError(f"{char!r} is not a Z85 character")
            word = word * 85 + digit
        if word >= 1 << 32:
            raise DeletionVectorError(f"the Z85 group {text[start:start + 5]!r} exceeds 32 bits")
        words.append(word)
    return struct.pack(f">{len(words)}I", *words)


def encode(rows: np.ndarray | Sequence[int]) -> bytes:
    """Row positions (any order, no duplicates needed) as a deletion vector in the portable layout."""
    positions = np.unique(np.asarray(rows, dtype=np.uint64))
    highs = positions >> np.uint64(32)
    buckets = np.unique(highs)
    if len(buckets) and int(buckets[-1]) >= 1 << 31:
        raise ValueError("a row position beyond 2^63")
    parts = [struct.pack("<IQ", PORTABLE_MAGIC, len(buckets))]
    for high in buckets:
        low = (positions[highs == high] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        bitmap = BitMap(low)
        bitmap.run_optimize()
        parts += [struct.pack("<I", int(high)), bitmap.serialize()]
    return b"".join(parts)


def decode(data: bytes) -> np.ndarray:
    """A deletion vector's row positions (sorted uint64), from either layout."""
    if len(data) < 8:
        raise DeletionVectorError(f"a deletion vector of {len(data)} bytes")
    if struct.unpack_from("<I", data)[0] == PORTABLE_MAGIC:
        return _decode_portable(data)
    if struct.unpack_from(">I", data)[0] == NATIVE_MAGIC:
        return _decode_native(data)
    raise DeletionVectorError(f"a deletion vector starting {data[:4].hex()} (neither Delta's portable nor its "
                              "native magic number)")


def _bitmap(data: bytes, at: int) -> tuple[BitMap, int]:
    try:
        bitmap = BitMap.deserialize(data[at:])
    except ValueError:
        raise DeletionVectorError(f"no Roaring bitmap at byte {at} of a deletion vector") from None
    return bitmap, at + len(bitmap.serialize())


def _decode_portable(data: bytes) -> np.ndarray:
    (buckets,) = struct.unpack_from("<Q", data, 4)
    at, parts = 12, []
    for _ in range(buckets):
        if at + 4 > len(data):
            raise DeletionVectorError(f"a deletion vector of {len(data)} bytes ends within its {buckets} buckets")
        (high,) = struct.unpack_from("<I", data, at)
        bitmap, at = _bitmap(data, at + 4)
        parts.append(np.asarray(bitmap.to_array(), dtype=np.uint64) | np.uint64(high << 32))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def _decode_native(data: bytes) -> np.ndarray:
    (count,) = struct.unpack_from(">i", data, 4)
    at, parts = 8, []
    for high in range(count):
        if at + 4 > len(data):
            raise DeletionVectorError(f"a deletion vector of {len(data)} bytes ends within its {count} bitmaps")
        bitmap, end = _bitmap(data, at + 4)  # (each bitmap's size first)
        at = at + 4 + struct.unpack_from(">i", data, at)[0]
        if end > at:
            raise DeletionVectorError(f"a bitmap of a deletion vector runs past its size, at byte {at}")
        parts.append(np.asarray(bitmap.to_array(), dtype=np.uint64) | np.uint64(high << 32))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def file_bytes(vectors: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """A deletion vector file holding ``vectors`` (each ``encode``'s bytes), and each one's offset in it."""
    parts, offsets, at = [bytes([FILE_VERSION])], [], 1
    for data in vectors:
        offsets.append(at)
        parts += [struct.pack(">I", len(data)), data, struct.pack(">I", zlib.crc32(data))]
        at += len(data) + 8
    return b"".join(parts), offsets


def from_file(data: bytes, offset: int, size: int, where: str) -> bytes:
    """The deletion vector at ``offset`` of a file's bytes (``where``: the file, for errors), its checksum
    checked."""
    if not data or data[0] != FILE_VERSION:
        raise DeletionVectorError(f"{where}: not a deletion vector file of version {FILE_VERSION}")
    if offset + 4 + size + 4 > len(data):
        raise DeletionVectorError(f"{where}: a deletion vector of {size} bytes at {offset} runs past the file's "
                                  f"{len(data)} bytes")
    (stored,) = struct.unpack_from(">I", data, offset)
    vector = data[offset + 4:offset + 4 + size]
    (crc,) = struct.unpack_from(">I", data, offset + 4 + size)
    if stored != size or zlib.crc32(vector) != crc:
        raise DeletionVectorError(f"{where}: the deletion vector at {offset} is damaged (its size or checksum "
                                  "does not match)")
    return vector


@dataclass(frozen=True)
class Descriptor:
    """An ``add`` or ``remove`` action's ``deletionVector``."""

    storage_type: str  # "u": a file named by a UUID in the table's directory; "i": inline; "p": an absolute path
    path_or_inline: str
    offset: int | None
    size: int
    cardinality: int

    @classmethod
    def in_file(cls, file_id: uuid.UUID, offset: int, size: int, cardinality: int) -> Descriptor:
        return cls("u", z85_encode(file_id.bytes), offset, size, cardinality)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Descriptor:
        offset = value.get("offset")
        return cls(str(value["storageType"]), str(value["pathOrInlineDv"]),
                   None if offset is None else int(offset), int(value["sizeInBytes"]), int(value["cardinality"]))

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline}
        if self.offset is not None:
            out["offset"] = self.offset
        return {**out, "sizeInBytes": self.size, "cardinality": self.cardinality}

    @property
    def unique_id(self) -> str:
        """What tells two deletion vectors of one data file apart (the log's key, with the file's path)."""
        base = f"{self.storage_type}{self.path_or_inline}"
        return base if self.offset is None else f"{base}@{self.offset}"

    def file(self) -> str | None:
        """The file holding it: relative to the table for "u" (``<prefix>/deletion_vector_<uuid>.bin``), as
        stored for "p"; None when it is inline."""
        if self.storage_type == "i":
            return None
        if self.storage_type == "p":
            return self.path_or_inline
        if self.storage_type != "u" or len(self.path_or_inline) < 20:
            raise DeletionVectorError(f"a deletion vector stored as {self.storage_type!r} at "
                                      f"{self.path_or_inline!r}")
        prefix, encoded = self.path_or_inline[:-20], self.path_or_inline[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return f"{prefix}/{name}" if prefix else name

    def inline(self) -> bytes:
        """An inline deletion vector's bytes."""
        return z85_decode(self.path_or_inline)[:self.size]


def keep_mask(rows: int, deleted: np.ndarray) -> np.ndarray:
    """A boolean mask of a data file's ``rows`` rows: False at the positions of its deletion vector."""
    mask = np.ones(rows, dtype=bool)
    if len(deleted):
        if int(deleted[-1]) >= rows:
            raise DeletionVectorError(f"a deletion vector names row {int(deleted[-1])} of a file of {rows} rows")
        mask[deleted.astype(np.int64)] = False
    return mask
