"""docs/CONFIGURATION.md lists every setting of ingester/config.py with its default, the README's short
table of the main settings names real settings with their defaults, and the README's first screen stays two
commands."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from ingester.config import Config

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "CONFIGURATION.md"


def _settings(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf setting of the configuration, by its dotted YAML name, with its default."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out |= _settings(value, f"{prefix}{f.name}.")
        else:
            out[prefix + f.name] = value
    return out


def _table_rows(path: Path, heading: str) -> dict[str, str]:
    """Setting -> default cell of the table under the heading (up to the next heading)."""
    text = path.read_text()
    section = text.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and (m := re.fullmatch(r"`([a-z0-9_.]+)`", cells[0])):
            assert m.group(1) not in rows, f"{m.group(1)} is listed twice"
            rows[m.group(1)] = cells[1]
    return rows


def _documented(default: Any) -> str:
    """How a default is written in the table (None: 'none', optionally followed by what that means)."""
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, list):
        return ", ".join(f"`{v}`" for v in default) or "none"
    if isinstance(default, str):
        return f"`{default}`"
    return str(default)


def test_every_setting_is_in_the_configuration_reference_with_its_default() -> None:
    settings, rows = _settings(Config()), _table_rows(CONFIGURATION, "## Configuration reference")
    missing = sorted(settings.keys() - rows.keys())
    assert not missing, f"missing from docs/CONFIGURATION.md: {missing}"
    assert not rows.keys() - settings.keys(), f"not settings (any more): {sorted(rows.keys() - settings.keys())}"
    for name, default in settings.items():
        cell = rows[name]
        if default is None:
            assert cell == "none" or cell.startswith("none:"), (name, cell)
        else:
            assert cell == _documented(default), (name, cell, _documented(default))


def test_the_readme_s_main_settings_are_settings_with_their_defaults() -> None:
    settings, rows = _settings(Config()), _table_rows(README, "## Configuration")
    assert len(rows) >= 5
    assert not rows.keys() - settings.keys(), f"not settings (any more): {sorted(rows.keys() - settings.keys())}"
    for name, cell in rows.items():
        default = settings[name]
        if default is None:
            assert cell == "none" or cell.startswith("none:"), (name, cell)
        else:
            assert cell == _documented(default), (name, cell, _documented(default))


def test_the_first_screen_is_two_commands() -> None:
    first = README.read_text().split("\n---\n", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", first, re.S)
    assert len(blocks) == 1
    commands = [line.split("#", 1)[0].strip() for line in blocks[0].splitlines() if line.strip()]
    assert commands == ["scripts/demo", "scripts/test"]
