"""The configuration's values beyond their types (ingester.config): the error a bad setting raises, durations,
bounds checked where a setting is set, secrets read from files, land.keys' mapping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A setting that cannot be used: its message names the key, where it was set, and what is allowed."""


def secret_file(setting: str, path: str) -> str:
    """A secret's file, read (its whitespace stripped); a ConfigError naming the setting where it cannot be."""
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from None


def duration_seconds(text: str) -> float:
    """A duration setting (``90s``, ``30m``, ``1h``, ``7d``, ``500ms``; a bare number: seconds) in seconds; raises
    ValueError for anything else."""
    found = _DURATION.fullmatch(str(text).strip())
    if found is None:
        raise ValueError(text)
    return float(found[1]) * _UNITS[found[2] or "s"]


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def at_least(least: int) -> Any:
    def check(value: Any) -> str | None:
        return None if value >= least else f"must be at least {least}, got {value}"
    return check


def duration(value: Any) -> str | None:
    try:
        duration_seconds(value)
    except ValueError:
        return f"{value!r} is not a duration (e.g. 90s, 30m, 1h, 7d)"
    return None


def operations(value: Any) -> str | None:
    """debezium.skipped_operations: "none" skips nothing and comes alone."""
    return "none comes alone (it skips nothing)" if "none" in value and len(value) > 1 else None


# Settings with a range or a form beyond their type, checked where they are set (the message names the place)
CHECKS: dict[tuple[str, str], Any] = {
    ("DebeziumConfig", "skipped_operations"): operations, ("SourceConfig", "start_wait"): at_least(0),
    ("LandConfig", "compact_files"): at_least(2), ("LandConfig", "small_file_bytes"): at_least(1),
    ("LandConfig", "compact_bytes"): at_least(1), ("LandConfig", "iceberg_expire_every"): at_least(1),
    ("LandConfig", "iceberg_snapshot_retention"): duration, ("LandConfig", "iceberg_metadata_versions"): at_least(1),
    ("LandConfig", "iceberg_orphan_age"): duration, ("LandConfig", "iceberg_orphan_every"): at_least(0),
}


def key_columns(value: Any, where: str) -> dict[str, list[str]]:
    """``land.keys``: "<db>.<table>" -> its key columns (a list, or one name)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must map <db>.<table> to its key columns, got {value!r}")
    out: dict[str, list[str]] = {}
    for table, columns in value.items():
        if not isinstance(table, str) or "." not in table.strip("."):
            raise ConfigError(f"{where}: {table!r} is not <db>.<table>")
        names = [columns] if isinstance(columns, str) else columns
        if not isinstance(names, list) or not names or not all(isinstance(c, str) and c for c in names):
            raise ConfigError(f"{where}: {table}: the key must be a column name or a list of them, got {columns!r}")
        if len({c.lower() for c in names}) < len(names):
            raise ConfigError(f"{where}: {table}: a column is named twice in {names}")
        out[table] = list(names)
    return out
