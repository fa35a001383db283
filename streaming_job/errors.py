"""The land job's own error (a leaf: raised by every part of the landing, caught by job.py and the CLI)."""

from __future__ import annotations


class LandError(RuntimeError):
    """Stops the query: an undecodable record (without --quarantine) or an unsafe schema change."""
