"""The sans-I/O binlog codec: bytes in, typed events out (no sockets, no files)."""

from .decoder import BinlogDecoder
from .errors import BinlogError

__all__ = ["BinlogDecoder", "BinlogError"]
