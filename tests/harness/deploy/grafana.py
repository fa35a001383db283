"""Grafana dashboards checked offline: every query names a metric the packages export, with its labels."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .accepted import Metric

_TARGET_LABELS = {"instance", "job", "le", "namespace", "pod", "service", "container", "endpoint"}


def grafana_problems(dashboard: dict[str, Any], metrics: list[Metric]) -> list[str]:
    """Every query names metrics the daemon exports (with the suffixes Prometheus gives them) and labels
    they carry; panels have unique ids, use the dashboard's data source variable and fit the grid."""
    series = {s for m in metrics for s in m.series()}
    labels = {label for m in metrics for label in m.labels} | _TARGET_LABELS
    variables = {v["name"] for v in dashboard.get("templating", {}).get("list", [])}
    problems: list[str] = []
    if not isinstance(dashboard.get("schemaVersion"), int) or not dashboard.get("uid") or not dashboard.get("title"):
        problems.append("dashboard: schemaVersion, uid and title are required")
    ids: set[int] = set()
    queries = []
    for panel in panels(dashboard):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        if panel.get("id") in ids:
            problems.append(f"{where}: duplicate id")
        ids.add(panel.get("id"))
        grid = panel.get("gridPos") or {}
        if not all(isinstance(grid.get(k), int) for k in "xywh") or grid["x"] + grid["w"] > 24:
            problems.append(f"{where}: gridPos must be integers within 24 columns")
        if panel.get("type") == "row":
            continue
        for source in [panel.get("datasource")] + [t.get("datasource") for t in panel.get("targets") or []]:
            uid = (source or {}).get("uid", "")
            if uid.startswith("$") and uid.strip("${}") not in variables:
                problems.append(f"{where}: data source variable {uid} is not defined")
        if not panel.get("targets"):
            problems.append(f"{where}: no queries")
        for target in panel.get("targets") or []:
            queries.append((where, target.get("expr", "")))
            queries.append((where, target.get("legendFormat", "")))
    for variable in dashboard.get("templating", {}).get("list", []):
        uid = (variable.get("datasource") or {}).get("uid", "")
        if uid.startswith("$") and uid.strip("${}") not in variables:
            problems.append(f"variable {variable['name']}: data source variable {uid} is not defined")
        query = variable.get("query")
        queries.append((f"variable {variable['name']}", query.get("query", "") if isinstance(query, dict) else ""))
    for where, expr in queries:
        for name in re.findall(r"\bbinlake_[a-z0-9_]+", expr):
            if name not in series:
                problems.append(f"{where}: {name} is not a metric the daemon exports")
        used = re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr) + re.findall(r"\{\{\s*(\w+)\s*\}\}", expr)
        for label in (lbl.strip() for group in used for lbl in group.split(",") if lbl.strip()):
            if label not in labels:
                problems.append(f"{where}: label {label} is on none of the metrics")
    if not any(re.search(r"\bbinlake_", expr) for _, expr in queries):
        problems.append("dashboard: no query uses a binlake metric")
    return problems


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])
