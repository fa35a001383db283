"""A URL as it may be logged: its password replaced. A leaf module (the configuration and the sources use it)."""

from __future__ import annotations

from urllib.parse import urlsplit


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)
