"""The configuration's values (ingester.config): a value from YAML, the environment or a flag as its setting's type
(``coerce``), the error a bad setting raises, durations, bounds checked where a setting is set, secrets read from
files, land.keys' mapping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin


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
        return None if value is None or value >= least else f"must be at least {least}, got {value}"
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
    ("LandConfig", "compact_bytes"): at_least(1), ("LandConfig", "key_memory"): at_least(1),
    ("LandConfig", "iceberg_expire_every"): at_least(1),
    ("LandConfig", "iceberg_snapshot_retention"): duration, ("LandConfig", "iceberg_metadata_versions"): at_least(1),
    ("LandConfig", "iceberg_orphan_age"): duration, ("LandConfig", "iceberg_orphan_every"): at_least(0),
    ("LandConfig", "quiet_compaction"): duration,
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


def coerce(value: Any, annotation: Any, where: str) -> Any:
    """``value`` (from YAML, or text from the environment or a flag) as the setting's annotated type:
    bool, int, float, str, a Literal (its values matched regardless of case), list[str], dict[str, str]
    or dict[str, Literal], dict[str, list[str]] (land.keys), each possibly optional (``| None``)."""
    if value is None:
        return None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Union or str(origin) == "<class 'types.UnionType'>":  # X | None
        (inner,) = [a for a in args if a is not type(None)]
        if get_origin(inner) is Literal and isinstance(value, str) and value.strip().lower() in ("none", "null"):
            return None  # an optional choice switched off from the environment or a flag (kafka.compression=none)
        return coerce(value, inner, where)
    if origin is Literal:
        allowed = {str(a).lower(): a for a in args}
        text = str(value).strip().lower() if isinstance(value, str | int) else None
        if text is None or text not in allowed:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, args))}")
        return allowed[text]
    if origin is dict and get_origin(args[1]) is list:  # land.keys; from the environment as YAML
        import yaml  # (~8 ms: imported by those who use it)

        try:
            return key_columns(yaml.safe_load(value) if isinstance(value, str) else value, where)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{where}: not YAML ({str(exc).splitlines()[0]}): {value!r}") from None
    try:
        if origin is dict:  # from the environment: "pattern=value,pattern=value"
            items = (dict(item.strip().split("=", 1) for item in value.split(",") if item.strip())
                     if isinstance(value, str) else dict(value))
            return {str(k): coerce(v, args[1], f"{where}[{k!r}]") for k, v in items.items()}
        if origin is list:
            listed = [v.strip() for v in value.split(",")] if isinstance(value, str) else [str(v) for v in value]
            if get_origin(args[0]) is Literal:  # each one of the choices (the error names them)
                return [coerce(v, args[0], where) for v in listed if v]
            return listed
        if annotation is bool:
            if isinstance(value, str):
                if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                return value.lower() in ("1", "true", "yes", "on")
            return bool(value)
        if annotation is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if annotation is float:
            return float(value)
        if annotation is str:
            if isinstance(value, dict | list):
                raise ValueError(value)
            return str(value)
    except ConfigError:
        raise
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: cannot use {value!r} as {getattr(annotation, '__name__', annotation)}") from None
    raise ConfigError(f"{where}: no conversion to {annotation}")  # a setting of a type this function lacks
