"""MySQL's partial JSON updates (binlog_row_value_options=PARTIAL_JSON): the diff vector of a JSON column in an
update's after-image, decoded for display and applied to a document as the server applies it."""

from __future__ import annotations

import copy
import json
import re
from typing import NamedTuple

from .errors import BinlogError
from .jsonb import MAX_DEPTH, decode_value, malformed

_DIFF_OPERATIONS = ("REPLACE", "INSERT", "REMOVE")
# Array indexes are 32-bit in MySQL; the cap also keeps int() away from huge digit strings.
_PATH_LEG = re.compile(r'\.(?:([^.\[\]"*\s]+)|("(?:[^"\\]|\\.)*"))|\[([0-9]{1,10})\]')


class DiffStep(NamedTuple):
    """One diff of the vector: its operation, its path (text and legs) and its value (None for REMOVE)."""

    operation: str
    path: str
    legs: list[str | int]
    value: object | None


def _packed_integer(data: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer (net_field_length); 0xFB (NULL) and 0xFF are not lengths."""
    if pos >= len(data):
        raise malformed("JSON diff is truncated before a length", pos)
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if width is None:
        raise malformed(f"JSON diff has an invalid length prefix 0x{first:02x}", pos)
    if width > len(data) - pos - 1:
        raise malformed("JSON diff is truncated inside a length", pos)
    return int.from_bytes(data[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


def _parse_path(path: str, offset: int) -> list[str | int]:
    """Legs of a concrete path as MySQL writes them in diffs: ``$``, ``.name``, ``."quoted"``, ``[n]``."""
    if not path.startswith("$"):
        raise malformed(f"JSON diff path {path!r} does not start with '$'", offset)
    legs: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _PATH_LEG.match(path, pos)
        if match is None:
            raise malformed(f"JSON diff path {path!r} has an unsupported leg at character {pos}", offset)
        bare, quoted, index = match.groups()
        if index is not None:
            legs.append(int(index))
        elif bare is not None:
            legs.append(bare)
        else:
            try:
                name = json.loads(quoted)
                name.encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                raise malformed(f"JSON diff path {path!r} has a malformed quoted name", offset) from None
            legs.append(name)
        pos = match.end()
    if not legs:
        raise malformed("JSON diff path addresses the whole document", offset)
    return legs


def _read_diffs(diff: bytes | memoryview) -> list[DiffStep]:
    """Parse the diff vector, one step per diff."""
    data = bytes(diff)
    diffs = []
    pos = 0
    while pos < len(data):
        start = pos
        if data[pos] >= len(_DIFF_OPERATIONS):
            raise malformed(f"unknown JSON diff operation {data[pos]}", pos)
        operation = _DIFF_OPERATIONS[data[pos]]
        length, pos = _packed_integer(data, pos + 1)
        if length > len(data) - pos:
            raise malformed(f"JSON diff path of {length} bytes exceeds the diff", pos)
        try:
            path = data[pos : pos + length].decode("utf-8")
        except UnicodeDecodeError:
            raise malformed("JSON diff path is not valid UTF-8", pos) from None
        legs = _parse_path(path, pos)
        pos += length
        value = None
        if operation != "REMOVE":
            length, pos = _packed_integer(data, pos)
            if length > len(data) - pos:
                raise malformed(f"JSON diff value of {length} bytes exceeds the diff", pos)
            try:
                value = decode_value(data[pos : pos + length])  # never a whole document: nulls are None
            except BinlogError as exc:
                raise BinlogError(f"{exc.reason} in the value of the JSON diff at offset {start}") from None
            pos += length
        diffs.append(DiffStep(operation, path, legs, value))
    return diffs


def decode_json_diff(diff: bytes | memoryview) -> list[tuple[str, str, object | None]]:
    """The diffs of a partial JSON update as (``REPLACE``/``INSERT``/``REMOVE``, path, value) for display.

    ``diff`` is the diff vector after its 4-byte little-endian length in the row image (the caller
    reads that length to find the vector's end): per diff, one operation byte, a length-encoded path
    length and the path text, then for REPLACE and INSERT a length-encoded size and a binary JSON value.
    """
    return [(step.operation, step.path, step.value) for step in _read_diffs(diff)]


def _nesting(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


def _mysql_key_order(key: str) -> tuple[int, bytes]:
    encoded = key.encode("utf-8")
    return len(encoded), encoded


def apply_json_diff(document: object, diff: bytes | memoryview) -> object:
    """Apply a partial-update diff vector (as for :func:`decode_json_diff`) to a copy of ``document``.

    Mirrors the server: REPLACE needs an existing member or element, INSERT a new member or an array
    position (past the end appends), REMOVE an existing one; anything else is a BinlogError. Objects
    keep MySQL's key order (byte length, then bytes), so inserted members are sorted in.
    """
    diffs = _read_diffs(diff)
    result = copy.deepcopy(document)
    for step in diffs:
        if step.operation != "REMOVE" and len(step.legs) + _nesting(step.value) > MAX_DEPTH:
            raise BinlogError(f"JSON diff at {step.path} would nest the document deeper than {MAX_DEPTH} levels")
        parent = result
        for leg in step.legs[:-1]:
            parent = _child(parent, leg, step.path)
        _edit(parent, step.operation, step.legs[-1], step.value, step.path)
    return result


def _child(container: object, leg: str | int, path: str) -> object:
    if isinstance(container, dict) and isinstance(leg, str) and leg in container:
        return container[leg]
    if isinstance(container, list) and isinstance(leg, int) and leg < len(container):
        return container[leg]
    raise BinlogError(f"JSON diff path {path} does not exist in the document")


def _edit(parent: object, operation: str, leg: str | int, value: object, path: str) -> None:
    if isinstance(parent, dict) and isinstance(leg, str):
        if operation == "INSERT" and leg not in parent:
            members = sorted([*parent.items(), (leg, value)], key=lambda item: _mysql_key_order(item[0]))
            parent.clear()
            parent.update(members)
            return
        if operation == "REPLACE" and leg in parent:
            parent[leg] = value
            return
        if operation == "REMOVE" and leg in parent:
            del parent[leg]
            return
    elif isinstance(parent, list) and isinstance(leg, int):
        if operation == "INSERT":
            parent.insert(min(leg, len(parent)), value)
            return
        if leg < len(parent):
            if operation == "REPLACE":
                parent[leg] = value
            else:
                del parent[leg]
            return
    raise BinlogError(f"JSON diff {operation} at {path} does not fit the document")
