"""Lake paths: a plain local path, or a URI of an object store (s3a://, abfss://, hdfs://, file://)."""

from __future__ import annotations

import re
from pathlib import Path


def scheme(path: str) -> str | None:
    """The URI scheme of a lake path (s3a, abfss, hdfs, file), None for a plain local path."""
    found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", path)
    return found.group(1).lower() if found else None


def join(base: str, *parts: str) -> str:
    """``base``/``parts``: a URI keeps its ``//`` (pathlib would fold s3a://bucket into s3a:/bucket)."""
    if scheme(base):
        return "/".join([base.rstrip("/"), *parts])
    return str(Path(base, *parts))


def is_local(path: str) -> bool:
    """Whether executors can write ``path`` as a local file (the pyarrow change-log writer needs it)."""
    return scheme(path) is None
