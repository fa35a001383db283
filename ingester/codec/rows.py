"""Row image decoders, compiled once per (table map, present columns, event kind).

For each table map the codec generates the Python source of a function that walks a whole
rows-event body: null bitmap, then each present column with the exact code for its type, with
runs of fixed-width numeric columns unpacked by one precompiled ``struct`` call. Nothing is
dispatched per value, which is what makes the decoder fast.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from . import values as V
from .charset_notices import notice_unknown_charsets
from .charsets import charset_for, decoder_for, keeps_bytes
from .compression import mariadb_uncompress_column
from .constants import ColumnType as T
from .errors import BinlogError
from .json_diff import apply_json_diff, decode_json_diff
from .jsonb import decode_json_binary
from .table_map import Column, TableMap

RowsDecoder = Callable[[bytes, int, int], Any]  # list of row dicts, or RowImages
# (table map, kind, before columns, after columns, partial JSON, pre-GA) -> the decoder of such events' bodies
RowsCompiler = Callable[[TableMap, str, tuple[int, ...], tuple[int, ...], bool, bool], RowsDecoder]

# struct codes of fixed-width types that a single unpack can read: (signed, unsigned, size)
_STRUCT: dict[int, tuple[str, str, int]] = {
    T.TINY: ("b", "B", 1),
    T.SHORT: ("h", "H", 2),
    T.LONG: ("i", "I", 4),
    T.LONGLONG: ("q", "Q", 8),
    T.FLOAT: ("f", "f", 4),
    T.DOUBLE: ("d", "d", 8),
}
_UTF8_CHARSETS = frozenset(("utf8mb4", "utf8mb3", "utf8"))
class JsonDiff:
    """A partial JSON update whose before value was not in the row image."""

    __slots__ = ("decoded", "diff")

    def __init__(self, diff: bytes) -> None:
        self.diff = diff
        # Parsed while the row is decoded, so a malformed diff fails there, at the event's position.
        self.decoded = decode_json_diff(diff)

    def to_json(self) -> dict[str, Any]:
        return {"$json_diff": [{"op": op, "path": path, "value": value} for op, path, value in self.decoded]}


class _Gen:
    """Accumulates generated source and the constants it refers to."""

    def __init__(self, tm: TableMap) -> None:
        self.tm = tm
        self.ns: dict[str, Any] = {
            "V": V,
            "BinlogError": BinlogError,
            "from_bytes": int.from_bytes,
            "U16": struct.Struct("<H").unpack_from,
            "U32": struct.Struct("<I").unpack_from,
            "I16": struct.Struct("<h").unpack_from,
            "I32": struct.Struct("<i").unpack_from,
            "FLT": struct.Struct("<f").unpack_from,
            "DBL": struct.Struct("<d").unpack_from,
            "json_binary": decode_json_binary,
            "mariadb_uncompress": mariadb_uncompress_column,
            "JsonDiff": JsonDiff,
            "DATES": V.DATES,
            "HOUR_MINUTE": V.HOUR_MINUTE,
            "SECOND": V.SECOND,
        }
        self.lines: list[str] = []
        self._n = 0

    def const(self, value: Any) -> str:
        self._n += 1
        name = f"K{self._n}"
        self.ns[name] = value
        return name

    def emit(self, indent: int, *lines: str) -> None:
        self.lines.extend("    " * indent + line for line in lines)


def _length_prefix(g: _Gen, ind: int, nbytes: int) -> None:
    if nbytes == 1:
        g.emit(ind, "n = b[p]", "p += 1")
    elif nbytes == 2:
        g.emit(ind, "n = U16(b, p)[0]", "p += 2")
    elif nbytes == 4:
        g.emit(ind, "n = U32(b, p)[0]", "p += 4")
    else:
        g.emit(ind, f"n = from_bytes(b[p:p + {nbytes}], 'little')", f"p += {nbytes}")
    g.emit(ind, "if p + n > end:", "    raise BinlogError(f'value length {n} runs past the event', p)")


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def text_decoder(col: Column, mariadb: bool) -> Callable[[bytes], Any]:
    """How a text column's bytes become its value: str per its collation (bytes for binary ones, and for
    those whose charset is unknown: ``keeps_bytes``)."""
    collation = col.collation
    if collation is None or keeps_bytes(collation, mariadb):
        return bytes
    if charset_for(collation, mariadb) in _UTF8_CHARSETS:
        return _utf8
    return decoder_for(collation, mariadb)


def _text(g: _Gen, ind: int, var: str, col: Column) -> None:
    """Assign ``var`` from the bytes in ``raw`` per the column's collation (``text_decoder``)."""
    decode = text_decoder(col, g.tm.is_mariadb)
    if decode is bytes:
        g.emit(ind, f"{var} = raw")
    elif decode is _utf8:
        g.emit(ind, f"{var} = raw.decode('utf-8', 'replace')")  # inline: the common case
    else:
        g.emit(ind, f"{var} = {g.const(decode)}(raw)")


def _column(g: _Gen, ind: int, var: str, col: Column, json_partial_bit: int | None) -> None:
    """Emit code that reads one non-NULL value of ``col`` at ``p`` into ``var``."""
    t, meta, unsigned = col.type, col.meta, bool(col.unsigned)
    if t in (T.TIMESTAMP2, T.DATETIME2, T.TIME2) and not 0 <= meta <= 6:
        raise BinlogError(f"column {col.name} of `{g.tm.database}`.`{g.tm.table}` has fractional precision {meta}")
    if t in _STRUCT:
        code, ucode, size = _STRUCT[t]
        fn = g.const(struct.Struct("<" + (ucode if unsigned else code)).unpack_from)
        g.emit(ind, f"{var} = {fn}(b, p)[0]", f"p += {size}")
    elif t == T.INT24:
        g.emit(ind, f"{var} = from_bytes(b[p:p + 3], 'little', signed={not unsigned})", "p += 3")
    elif t == T.YEAR:
        g.emit(ind, f"{var} = b[p]", f"if {var}:", f"    {var} += 1900", "p += 1")
    elif t == T.NEWDECIMAL:
        size, lines = V.decimal_code(meta >> 8, meta & 0xFF, var)
        g.emit(ind, *lines, f"p += {size}")
    elif t == T.DATE or t == T.NEWDATE:
        g.emit(ind, f"{var} = V.date3(from_bytes(b[p:p + 3], 'little'))", "p += 3")
    elif t == T.TIME:
        g.emit(ind, f"{var} = V.old_time(from_bytes(b[p:p + 3], 'little', signed=True))", "p += 3")
    elif t == T.DATETIME:
        g.emit(ind, f"{var} = V.old_datetime(from_bytes(b[p:p + 8], 'little'))", "p += 8")
    elif t == T.TIMESTAMP:
        g.emit(ind, f"{var} = V.utc_datetime(U32(b, p)[0])", "p += 4")
    elif t == T.TIMESTAMP2:
        fsp = meta
        g.emit(ind, f"{var} = V.utc_datetime(from_bytes(b[p:p + 4], 'big'))")
        if fsp:
            g.emit(ind, f"{var} += V.fraction(V.read_frac(b, p + 4, {fsp}), {fsp})")
        g.emit(ind, f"p += {4 + V.frac_bytes(fsp)}")
    elif t == T.DATETIME2:  # inlined, from lookup tables: the most common temporal type
        fsp = meta
        nfrac = V.frac_bytes(fsp)
        frac = ""
        if fsp:
            scale = (10_000, 100, 1)[nfrac - 1]
            frac = f' + f".{{from_bytes(b[p + 5:p + {5 + nfrac}], \'big\') * {scale}:06d}}"'
            if fsp < 6:
                frac += f"[:{fsp + 1}]"
        g.emit(ind, "x = from_bytes(b[p:p + 5], 'big') - 0x8000000000", "if x < 0:",
               f"    {var} = V.datetime2(b, p, {fsp})", "else:",
               "    d = DATES.get(x >> 17)", "    if d is None:", "        d = V.date_prefix(x >> 17)",
               f"    {var} = d + HOUR_MINUTE[x >> 6 & 2047] + SECOND[x & 63]{frac}",
               f"p += {5 + nfrac}")
    elif t == T.TIME2:
        g.emit(ind, f"{var} = V.time2(b, p, {meta})", f"p += {3 + V.frac_bytes(meta)}")
    elif t == T.BIT:
        nbytes = (meta >> 8) + (1 if meta & 0xFF else 0)
        if not 1 <= nbytes <= 8 or meta & 0xFF > 7:
            raise BinlogError(f"column {col.name} of `{g.tm.database}`.`{g.tm.table}` is BIT with metadata "
                              f"0x{meta:04x} (at most 64 bits)")
        g.emit(ind, f"{var} = from_bytes(b[p:p + {nbytes}], 'big')", f"p += {nbytes}")
    elif t == T.ENUM:
        size = meta & 0xFF
        if not 1 <= size <= 8:
            raise BinlogError(f"column {col.name} of `{g.tm.database}`.`{g.tm.table}` is ENUM of {size} bytes "
                              f"(1 to 8)")
        g.emit(ind, f"{var} = from_bytes(b[p:p + {size}], 'little')", f"p += {size}")
        if col.enum_values is not None:
            labels = g.const(("", *col.enum_values))
            g.emit(ind, f"{var} = {labels}[{var}] if {var} < {len(col.enum_values) + 1} else {var}")
    elif t == T.SET:
        size = meta & 0xFF
        if not 1 <= size <= 8:
            raise BinlogError(f"column {col.name} of `{g.tm.database}`.`{g.tm.table}` is SET of {size} bytes "
                              f"(1 to 8)")
        g.emit(ind, f"{var} = from_bytes(b[p:p + {size}], 'little')", f"p += {size}")
        if col.set_values is not None:
            g.emit(ind, f"{var} = {g.const(_set_labels(col.set_values))}({var})")
    elif t in (T.VARCHAR, T.VAR_STRING, T.STRING):
        max_len = col.max_length
        _length_prefix(g, ind, 1 if max_len < 256 else 2)
        g.emit(ind, "raw = b[p:p + n]", "p += n")
        if t == T.STRING and col.collation == 63:
            g.emit(ind, f"if n < {max_len}:", f"    raw = raw + bytes({max_len} - n)")
        _text(g, ind, var, col)
    elif t in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.GEOMETRY):
        _length_prefix(g, ind, meta)
        g.emit(ind, "raw = b[p:p + n]", "p += n")
        if t == T.GEOMETRY:
            g.emit(ind, f"{var} = raw")
        else:
            _text(g, ind, var, col)
    elif t in (T.VARCHAR_COMPRESSED, T.BLOB_COMPRESSED):
        _length_prefix(g, ind, meta if t == T.BLOB_COMPRESSED else (1 if meta < 256 else 2))
        g.emit(ind, "raw = mariadb_uncompress(b[p:p + n])", "p += n")
        _text(g, ind, var, col)
    elif t == T.JSON:
        if json_partial_bit is not None:
            g.emit(ind, f"if pbits & {1 << json_partial_bit}:")
            _length_prefix(g, ind + 1, meta)
            g.emit(ind + 1, f"{var} = JsonDiff(b[p:p + n])", "p += n")
            g.emit(ind, "else:")
            ind += 1
        _length_prefix(g, ind, meta)
        g.emit(ind, f"{var} = json_binary(b[p:p + n])", "p += n")
    elif t == T.VECTOR:
        _length_prefix(g, ind, meta)
        g.emit(ind, "if n % 4:", "    raise BinlogError(f'VECTOR value of {n} bytes', p)")
        g.emit(ind, f"{var} = list(struct.unpack_from(f'<{{n // 4}}f', b, p))", "p += n")
        g.ns["struct"] = struct
    elif t == T.NULL:
        g.emit(ind, f"{var} = None")
    else:
        raise BinlogError(f"column {col.name} of `{g.tm.database}`.`{g.tm.table}` has unsupported type {t}")


def _set_labels(labels: list[str]) -> Callable[[int], str]:
    def label(mask: int) -> str:
        return ",".join(name for i, name in enumerate(labels) if mask >> i & 1)

    return label


def _packed(b: bytes, p: int) -> tuple[int, int]:
    first = b[p]
    if first < 0xFB:
        return first, p + 1
    if first == 0xFC:
        return int.from_bytes(b[p + 1 : p + 3], "little"), p + 3
    if first == 0xFD:
        return int.from_bytes(b[p + 1 : p + 4], "little"), p + 4
    if first == 0xFE:
        return int.from_bytes(b[p + 1 : p + 9], "little"), p + 9
    raise BinlogError(f"invalid length-encoded integer prefix 0x{first:02x}", p)


def _fixed_runs(cols: list[Column]) -> list[list[int]]:
    """Group consecutive struct-readable columns (positions in ``cols``) into runs."""
    runs: list[list[int]] = []
    cur: list[int] = []
    for k, c in enumerate(cols):
        if c.type in _STRUCT:
            cur.append(k)
        else:
            if cur:
                runs.append(cur)
            cur = []
            runs.append([k])
    if cur:
        runs.append(cur)
    return runs


def _null_bits(tm: TableMap, cols: list[Column], pre_ga: bool) -> tuple[int, list[int | None]]:
    """Null bitmap size and each present column's bit in it.

    From 5.1 GA on, the bitmap has one bit per present column. Pre-GA (v0) rows events copy the
    table's record header instead: bits only for nullable columns, after a reserved first bit
    when the table has fixed-length records (no VARCHAR/BLOB columns).
    """
    if not pre_ga:
        return (len(cols) + 7) >> 3, list(range(len(cols)))
    variable = any(c.type in _VARIABLE_RECORD for c in tm.columns)
    bit = 0 if variable else 1
    bits: list[int | None] = []
    for c in cols:
        if c.nullable:
            bits.append(bit)
            bit += 1
        else:
            bits.append(None)
    return (bit + 7) >> 3, bits


_VARIABLE_RECORD = frozenset((T.VARCHAR, T.VAR_STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
                              T.GEOMETRY, T.JSON))


def _image(g: _Gen, ind: int, cols: list[Column], prefix: str, partial: bool,
           pre_ga: bool = False) -> list[str]:
    """Emit one row image (null bitmap + values); returns the value variable names."""
    nbytes, null_bit = _null_bits(g.tm, cols, pre_ga)
    names = [f"{prefix}{k}" for k in range(len(cols))]
    json_bits: dict[int, int] = {}
    if partial:
        json_cols = [k for k, c in enumerate(cols) if c.type == T.JSON]
        json_bits = {k: j for j, k in enumerate(json_cols)}
        g.emit(ind, "opts, p = packed(b, p)")
        g.emit(ind, "pbits = 0", "if opts & 1:")
        nj = (len(json_cols) + 7) >> 3
        g.emit(ind + 1, f"pbits = from_bytes(b[p:p + {nj}], 'little')", f"p += {nj}")
    g.emit(ind, f"nb = from_bytes(b[p:p + {nbytes}], 'little')", f"p += {nbytes}")
    for run in _fixed_runs(cols):
        if len(run) > 1:
            codes = "".join(_STRUCT[cols[k].type][1] if cols[k].unsigned else _STRUCT[cols[k].type][0] for k in run)
            unpack = g.const(struct.Struct("<" + codes).unpack_from)
            size = sum(_STRUCT[cols[k].type][2] for k in run)
            mask = sum(1 << b for b in (null_bit[k] for k in run) if b is not None)
            g.emit(ind, f"if not nb & {mask}:")
            g.emit(ind + 1, f"{', '.join(names[k] for k in run)}, = {unpack}(b, p)", f"p += {size}")
            g.emit(ind, "else:")
            inner = ind + 1
        else:
            inner = ind
        for k in run:
            bit = null_bit[k]
            if bit is None:
                _column(g, inner, names[k], cols[k], json_bits.get(k))
                continue
            g.emit(inner, f"if nb & {1 << bit}:", f"    {names[k]} = None", "else:")
            _column(g, inner + 1, names[k], cols[k], json_bits.get(k))
    return names


def _image_dict(cols: list[Column], names: list[str]) -> str:
    """Source of a dict display {column name: value variable} (constant keys: one opcode)."""
    return "{" + ", ".join(f"{col.name!r}: {var}" for col, var in zip(cols, names, strict=True)) + "}"


class RowImages:
    """A rows event's images as columns: ``before``/``after`` hold one tuple of values per present
    column (``columns_before``/``columns_after`` order), or None for an image the kind has not.

    The columnar decoder builds this for readers that want columns (the land job): no dict per row,
    no lookup per value. Iterating yields the same dicts the row decoder builds, so every consumer of
    ``RowsEvent.rows`` keeps working."""

    __slots__ = ("after", "after_names", "before", "before_names", "count")

    def __init__(self, count: int, before: list[tuple[Any, ...]] | None, before_names: tuple[str, ...],
                 after: list[tuple[Any, ...]] | None, after_names: tuple[str, ...]) -> None:
        self.count = count
        self.before, self.before_names = before, before_names
        self.after, self.after_names = after, after_names

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[dict[str, dict[str, Any]]]:
        images = [(key, names, cols) for key, names, cols in (("before", self.before_names, self.before),
                                                              ("after", self.after_names, self.after))
                  if cols is not None]
        for i in range(self.count):
            yield {key: {name: col[i] for name, col in zip(names, cols, strict=True)} for key, names, cols in images}


def _columns_of(rows: list[tuple[Any, ...]], width: int) -> list[tuple[Any, ...]]:
    """Row tuples -> one tuple per column (zip transposes in C)."""
    if not rows:
        return [() for _ in range(width)]
    return list(zip(*rows, strict=True))


def compile_rows(tm: TableMap, kind: str, before: tuple[int, ...], after: tuple[int, ...],
                 partial: bool = False, pre_ga: bool = False, columnar: bool = False) -> RowsDecoder:
    """Compile (and cache on the table map) the decoder of a rows-event body: one dict per row, or
    with ``columnar`` a ``RowImages`` (the same generated value code, each row kept as a tuple)."""
    key = (kind, before, after, partial, pre_ga, columnar)
    fn = tm._decoders.get(key)
    if fn is not None:
        return fn
    g, images = _generate(tm, kind, before, after, partial, pre_ga, columnar)
    source = "\n".join(g.lines)
    name = f"<rows {tm.database}.{tm.table}>".replace("\0", "\\0")  # compile() refuses NUL in names
    exec(compile(source, name, "exec"), g.ns)
    fn = g.ns["decode_rows"]
    if columnar:
        fn = _as_images(fn, kind, [tuple(c.name for c in cols) for _, cols in images])
    if partial:
        fn = (_with_json_diffs_columnar if columnar else _with_json_diffs)(fn)
    tm._decoders[key] = fn
    return fn


def check_rows(tm: TableMap, kind: str, before: tuple[int, ...], after: tuple[int, ...]) -> None:
    """Raise what ``compile_rows`` raises for metadata it refuses, without compiling a decoder (for readers with
    decoders of their own that must refuse the same tables)."""
    key = ("checked", kind, before, after)
    if key not in tm._decoders and (kind, before, after, False, False, False) not in tm._decoders:
        _generate(tm, kind, before, after, False, False, False)
        tm._decoders[key] = None


def _generate(tm: TableMap, kind: str, before: tuple[int, ...], after: tuple[int, ...], partial: bool, pre_ga: bool,
              columnar: bool) -> tuple[_Gen, list[tuple[str, list[Column]]]]:
    """compile_rows' source code (g.lines) and its images (key, columns)."""
    notice_unknown_charsets(tm)
    g = _Gen(tm)
    g.ns["packed"] = _packed
    g.emit(0, "def decode_rows(b, p, end):", "    out = []", "    append = out.append")
    if not (after if kind == "write" else before) and not (kind == "update" and after):
        # An image of no columns takes no bytes: rows data then can only be malformed.
        g.emit(1, "if p < end:", "    raise BinlogError('rows data for a row image with no columns', p)")
    g.emit(1, "while p < end:")
    if kind == "update":
        images = [("before", [tm.columns[i] for i in before]), ("after", [tm.columns[i] for i in after])]
        names = [_image(g, 2, images[0][1], "x", False, pre_ga), _image(g, 2, images[1][1], "y", partial, pre_ga)]
    else:
        images = [("after" if kind == "write" else "before", [tm.columns[i] for i in (after if kind == "write"
                                                                                       else before)])]
        names = [_image(g, 2, images[0][1], "x", False, pre_ga)]
    if columnar:
        g.emit(2, f"append(({''.join(v + ', ' for n in names for v in n)}))")
    else:
        dicts = ", ".join(f"{key!r}: {_image_dict(cols, n)}" for (key, cols), n in zip(images, names, strict=True))
        g.emit(2, f"append({{{dicts}}})")
    g.emit(1, "if p != end:", "    raise BinlogError(f'row data ends at {p}, the event at {end}', p)",
           "return out")
    return g, images


def compile_value(tm: TableMap, col: Column) -> Callable[[bytes], Any]:
    """The decoder of one non-NULL value of ``col`` from its bytes in a row image (length prefix
    included): the same generated code as in ``compile_rows``, for readers that walk images themselves."""
    g = _Gen(tm)
    g.emit(0, "def value(b):", "    p = 0", "    end = len(b)")
    _column(g, 1, "v", col, None)
    g.emit(1, "if p != end:", "    raise BinlogError(f'value of {end} bytes, its type reads {p}', p)", "return v")
    exec(compile("\n".join(g.lines), f"<value {tm.database}.{tm.table}.{col.name}>".replace("\0", "\\0"), "exec"),
         g.ns)
    return g.ns["value"]


def _as_images(fn: Callable[[bytes, int, int], list[tuple[Any, ...]]], kind: str,
               names: list[tuple[str, ...]]) -> RowsDecoder:
    """Wrap a decoder of row tuples (all images' values side by side) into one of ``RowImages``."""
    widths = [len(n) for n in names]
    width = sum(widths)

    def decode(b: bytes, p: int, end: int) -> RowImages:
        rows = fn(b, p, end)
        cols = _columns_of(rows, width)
        if kind == "update":
            return RowImages(len(rows), cols[: widths[0]], names[0], cols[widths[0] :], names[1])
        if kind == "write":
            return RowImages(len(rows), None, (), cols, names[0])
        return RowImages(len(rows), cols, names[0], None, ())

    return decode


def _with_json_diffs(fn: RowsDecoder) -> RowsDecoder:
    """Apply partial JSON updates to the before image's value where the before image has it."""

    def decode(b: bytes, p: int, end: int) -> list[Any]:
        rows = fn(b, p, end)
        for row in rows:
            old, new = row["before"], row["after"]
            for name, value in new.items():
                if type(value) is JsonDiff and old.get(name) is not None:
                    new[name] = apply_json_diff(old[name], value.diff)
        return rows

    return decode


def _with_json_diffs_columnar(fn: RowsDecoder) -> RowsDecoder:
    """``_with_json_diffs`` for ``RowImages``: the same rule, column by column."""

    def decode(b: bytes, p: int, end: int) -> RowImages:
        images: RowImages = fn(b, p, end)
        old = dict(zip(images.before_names, images.before or (), strict=True))
        after = images.after or []
        for k, (name, new) in enumerate(zip(images.after_names, after, strict=True)):
            before = old.get(name)
            if before is not None and any(type(v) is JsonDiff for v in new):
                after[k] = tuple(apply_json_diff(before[i], v.diff) if type(v) is JsonDiff
                                        and before[i] is not None else v for i, v in enumerate(new))
        return images

    return decode
