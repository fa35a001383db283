"""What the code that the deployment files deploy accepts and exports: the BINLAKE_* variables load_config
understands, the Prometheus metrics the packages construct (read from their source)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ingester.config import Config

REPO = Path(__file__).resolve().parents[3]
SECRET_PASSWORD = "BINLAKE_SOURCE_PASSWORD"  # read by Config.source_url(), not by the settings loader


def config_env_names() -> set[str]:
    """Every BINLAKE_* variable load_config understands, derived from the Config dataclasses."""
    names = {SECRET_PASSWORD, "BINLAKE_SOURCE"}  # BINLAKE_SOURCE: shorthand for source.url
    config = Config()
    for f in dataclasses.fields(Config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            names |= {f"BINLAKE_{f.name}_{g.name}".upper() for g in dataclasses.fields(value)}
        else:
            names.add(f"BINLAKE_{f.name}".upper())
    return names


_METRIC_TYPES = {"Counter": ("_total", "_created"), "Gauge": ("",), "Histogram": ("_bucket", "_sum", "_count",
                                                                                   "_created"),
                 "Summary": ("", "_sum", "_count", "_created")}


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str  # as constructed
    kind: str
    labels: tuple[str, ...]

    def series(self) -> set[str]:
        """The names Prometheus sees (prometheus_client adds _total to counters, _bucket... to histograms)."""
        base = self.name.removesuffix("_total") if self.kind == "Counter" else self.name
        return {base + suffix for suffix in _METRIC_TYPES[self.kind]}


def exported_metrics(roots: Iterable[Path] | None = None) -> list[Metric]:
    """The Prometheus metrics constructed in the project's packages, read from their source (AST)."""
    roots = list(roots) if roots is not None else [p for p in (REPO / "ingester", REPO / "streaming_job")
                                                    if p.is_dir()]
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if func not in _METRIC_TYPES or not node.args or not isinstance(node.args[0], ast.Constant):
                    continue
                labels: Any = node.args[2] if len(node.args) > 2 else next(
                    (k.value for k in node.keywords if k.arg == "labelnames"), None)
                names = tuple(e.value for e in labels.elts) if isinstance(labels, ast.List | ast.Tuple) else ()
                found.append(Metric(node.args[0].value, func, names))
    return found


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())
