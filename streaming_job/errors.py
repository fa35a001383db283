"""What stops the land query with a one-line message (``binlake: error: ...``, exit 2)."""

from __future__ import annotations


class LandError(RuntimeError):
    """Stops the query: an undecodable record (without --quarantine) or an unsafe schema change."""
