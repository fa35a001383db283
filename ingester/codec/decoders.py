"""One small decoder per event type, registered by type code.

A decoder gets the decoding context (format description, table maps), the common header
fields and a Cursor over the event body (post-header + payload, checksum excluded).
"""

from __future__ import annotations

# Each family's decoders register themselves by type code when their module is imported.
from . import decode_control, decode_gtid, decode_other, decode_query, decode_rows  # noqa: F401
from .decoding import REGISTRY, DecodeContext, Decoder

__all__ = ["REGISTRY", "DecodeContext", "Decoder"]
