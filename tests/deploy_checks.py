"""Offline checks of the deployment files (docker compose, Dockerfiles, Kustomize, Grafana).

There is no Docker engine, cluster or Grafana in CI, so each checker reads the files and cross-checks
them against the code they deploy: the settings `ingester/config.py` accepts, the metrics the daemon
exports, the files the repository holds. Every checker returns a list of problems (empty: fine), so a
test can break a copy on purpose and see the exact problem reported.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import fnmatch
import json
import re
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from ingester.config import Config, load_config

REPO = Path(__file__).resolve().parents[1]
SECRET_PASSWORD = "BINLAKE_SOURCE_PASSWORD"  # read by Config.source_url(), not by the settings loader


# --- what the code accepts ------------------------------------------------------------------------


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


# --- docker compose -------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _host_port(spec: Any) -> str | None:
    """The published host port of a ports entry ("H:C", "IP:H:C", {published: H}); None if unpublished."""
    if isinstance(spec, dict):
        return str(spec["published"]) if "published" in spec else None
    parts = str(spec).split(":")
    return parts[-2] if len(parts) >= 2 else None


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _binds(service: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(source, target, is_local_path) of each volume entry."""
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            yield str(volume.get("source", "")), str(volume["target"]), volume.get("type") == "bind"
        else:
            source, target = str(volume).split(":")[:2]
            yield source, target, source.startswith((".", "/", "~"))


def _depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def _argv(value: Any) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def compose_config(service: dict[str, Any], base: Path) -> tuple[Config | None, Path | None]:
    """The daemon configuration a binlake service would run with: its --config file (found through the
    bind mount that puts it in the container) under its BINLAKE_* environment."""
    config_in_container = _flag(_argv(service.get("command")), "--config")
    local = None
    if config_in_container:
        for source, target, is_local in _binds(service):
            if is_local and config_in_container == target:
                local = base / source
            elif is_local and config_in_container.startswith(target.rstrip("/") + "/"):
                local = base / source / Path(config_in_container).relative_to(target)
    env = {k: v for k, v in _environment(service).items() if k.startswith("BINLAKE_")}
    if not env and not config_in_container:
        return None, None
    return load_config(local, environ=env), local


def _uses_daemon(service: dict[str, Any]) -> bool:
    """Whether the service runs the daemon image with its own entrypoint (`binlake run`)."""
    build = service.get("build")
    dockerfile = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile" if build else None
    return dockerfile == "Dockerfile" and "entrypoint" not in service


def compose_problems(data: dict[str, Any], base: Path = REPO) -> list[str]:
    """Broken references in a docker-compose file: builds, mounted files, secrets, volumes, dependencies,
    ports, BINLAKE_* settings, health checks, image tags."""
    problems: list[str] = []
    services: dict[str, Any] = data.get("services") or {}
    volumes = set((data.get("volumes") or {}).keys())
    secrets = data.get("secrets") or {}
    valid_env = config_env_names()
    ports: dict[str, str] = {}
    for name, secret in secrets.items():
        if "file" in secret and not (base / secret["file"]).is_file():
            problems.append(f"secret {name}: file {secret['file']} does not exist")
    for name, service in services.items():
        where = f"service {name}"
        build = service.get("build")
        if build is not None:
            context = base / (build if isinstance(build, str) else build.get("context", "."))
            dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
            if not context.is_dir():
                problems.append(f"{where}: build context {context} does not exist")
            elif not (context / dockerfile).is_file():
                problems.append(f"{where}: Dockerfile {dockerfile} does not exist")
        image = service.get("image")
        if image is None and build is None:
            problems.append(f"{where}: neither image nor build")
        if image is not None and build is None:
            tag = image.rsplit("/", 1)[-1].partition(":")[2]
            if not tag or tag == "latest" or "." not in tag:
                problems.append(f"{where}: image {image} is not pinned to a version tag")
        for source, _target, is_local in _binds(service):
            if is_local and not (base / source).exists():
                problems.append(f"{where}: mounted {source} does not exist")
            elif not is_local and source and source not in volumes:
                problems.append(f"{where}: volume {source} is not declared under volumes")
        for secret in service.get("secrets") or []:
            secret_name = secret if isinstance(secret, str) else secret.get("source")
            if secret_name not in secrets:
                problems.append(f"{where}: secret {secret_name} is not declared under secrets")
        for dep, condition in _depends_on(service).items():
            if dep not in services:
                problems.append(f"{where}: depends on unknown service {dep}")
                continue
            if services[dep].get("profiles") and not service.get("profiles"):
                problems.append(f"{where}: depends on {dep}, which only runs in profiles {services[dep]['profiles']}")
            if condition == "service_healthy" and not _has_healthcheck(services[dep], base):
                problems.append(f"{where}: waits for {dep} to be healthy, but {dep} has no healthcheck")
        for port in service.get("ports") or []:
            host = _host_port(port)
            if host is not None:
                if host in ports:
                    problems.append(f"{where}: host port {host} is also published by {ports[host]}")
                ports[host] = name
        for key in _environment(service):
            if key.startswith("BINLAKE_") and key not in valid_env:
                problems.append(f"{where}: {key} is not a binlake setting")
        problems += _daemon_service_problems(name, service, base)
    return problems


def _has_healthcheck(service: dict[str, Any], base: Path) -> bool:
    if service.get("healthcheck", {}).get("disable"):
        return False
    if service.get("healthcheck", {}).get("test"):
        return True
    build = service.get("build")
    if build is None:
        return False
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    path = base / (build if isinstance(build, str) else build.get("context", ".")) / dockerfile
    return path.is_file() and any(i.op == "HEALTHCHECK" for i in parse_dockerfile(path.read_text()))


def _daemon_service_problems(name: str, service: dict[str, Any], base: Path) -> list[str]:
    """A service running `binlake run`: its configuration loads, its password file and metrics endpoint
    are where the container provides them."""
    if not _uses_daemon(service) and not any(k.startswith("BINLAKE_") for k in _environment(service)):
        return []
    where = f"service {name}"
    try:
        cfg, local = compose_config(service, base)
    except (ValueError, OSError) as exc:
        return [f"{where}: configuration does not load: {exc}"]
    if cfg is None or not _uses_daemon(service):
        return []
    problems = []
    if _flag(_argv(service.get("command")), "--config") and local is None:
        problems.append(f"{where}: its --config file is not mounted from the repository")
    if cfg.source.password_file:
        secret_targets = {f"/run/secrets/{s if isinstance(s, str) else s.get('target', s['source'])}"
                          for s in service.get("secrets") or []}
        if cfg.source.password_file not in secret_targets:
            problems.append(f"{where}: source.password_file {cfg.source.password_file} is not a mounted secret")
    if cfg.metrics_port is None or cfg.metrics_host != "0.0.0.0":
        problems.append(f"{where}: metrics must listen on 0.0.0.0 (metrics_host) at a metrics_port")
    else:
        test = " ".join(_argv(service.get("healthcheck", {}).get("test")))
        if f":{cfg.metrics_port}/healthz" not in test:
            problems.append(f"{where}: healthcheck does not ask /healthz on port {cfg.metrics_port}")
        published = [str(p).split(":")[-1] for p in service.get("ports") or []]
        if published and str(cfg.metrics_port) not in published:
            problems.append(f"{where}: publishes {published}, metrics are on {cfg.metrics_port}")
    return problems


# --- Dockerfiles ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Instruction:
    op: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with their line continuations joined; comments and blank lines dropped."""
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        op, _, args = full.partition(" ")
        out.append(Instruction(op.upper(), args.strip(), start))
    return out


def _substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def _dockerignore(context: Path) -> list[str]:
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    return [line.strip().rstrip("/") for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def _ignored(source: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides; `!` re-includes."""
    path = Path(source.rstrip("/"))
    candidates = {str(p) for p in [path, *path.parents] if str(p) != "."}
    verdict = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if any(fnmatch.fnmatch(c, pattern.lstrip("!")) for c in candidates):
            verdict = not negated
    return verdict


def dockerfile_problems(path: Path, context: Path = REPO) -> list[str]:
    """COPY sources exist in the build context (and are not ignored), stages referenced exist, base
    images are pinned, and the final stage runs as a user other than root."""
    problems: list[str] = []
    args: dict[str, str] = {}
    stages: list[str] = []
    user: str | None = None
    ignored = _dockerignore(context)
    for ins in parse_dockerfile(path.read_text()):
        where = f"{path.name}:{ins.line}"
        if ins.op == "ARG":
            name, _, default = ins.args.partition("=")
            args.setdefault(name.strip(), default.strip().strip('"'))
        elif ins.op == "FROM":
            words = _substitute(ins.args, args).split()
            image = words[0]
            if image not in stages and (":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")):
                problems.append(f"{where}: base image {image} is not pinned")
            stages.append(words[2] if len(words) >= 3 and words[1].upper() == "AS" else image)
            user = None
        elif ins.op == "USER":
            user = _substitute(ins.args, args).split(":")[0]
        elif ins.op in ("COPY", "ADD"):
            words = shlex.split(ins.args)
            options = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            origin = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
            if origin is not None:
                if _substitute(origin, args) not in stages:
                    problems.append(f"{where}: COPY --from={origin}: no such stage")
                continue
            for source in paths[:-1]:
                matches = list(context.glob(source)) if source != "." else [context]
                if not matches:
                    problems.append(f"{where}: COPY source {source} does not exist")
                elif _ignored(source, ignored):
                    problems.append(f"{where}: COPY source {source} is excluded by .dockerignore")
    if user is None or user in ("root", "0"):
        problems.append(f"{path.name}: the final stage runs as root (no USER, or USER root)")
    return problems


def dockerfile_entrypoint(path: Path) -> list[str]:
    entry = [i for i in parse_dockerfile(path.read_text()) if i.op == "ENTRYPOINT"]
    return json.loads(entry[-1].args) if entry else []


# --- Kustomize, offline ---------------------------------------------------------------------------

CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "StorageClass", "PersistentVolume"}
_KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "namespace", "labels", "images", "configMapGenerator",
                         "secretGenerator", "patches", "configurations", "generatorOptions"}
_POD_IMAGE_PATHS = ("spec.template.spec.containers", "spec.template.spec.initContainers", "spec.containers",
                    "spec.jobTemplate.spec.template.spec.containers")


class KustomizeError(ValueError):
    """A kustomization this renderer cannot build (a missing file, an unknown field, a patch with no target)."""


def render_kustomization(directory: Path, image_paths: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """A minimal `kustomize build` for what this repository uses: resources (files and bases), namespace,
    labels, images (plus configured fields of custom resources), ConfigMap/Secret generators (without the
    name hash), strategic-merge patches (lists merged by name) and JSON 6902 patches."""
    path = directory / "kustomization.yaml"
    if not path.is_file():
        raise KustomizeError(f"{directory}: no kustomization.yaml")
    k = load_yaml(path) or {}
    unknown = set(k) - _KUSTOMIZATION_FIELDS
    if unknown:
        raise KustomizeError(f"{path}: fields this renderer does not handle: {sorted(unknown)}")
    image_paths = image_paths if image_paths is not None else []
    for configuration in k.get("configurations") or []:
        for spec in (load_yaml(_must_exist(directory / configuration)) or {}).get("images") or []:
            image_paths.append((spec["kind"], spec["path"].replace("/", ".")))
    objects: list[dict[str, Any]] = []
    for resource in k.get("resources") or []:
        target = _must_exist(directory / resource)
        if target.is_dir():
            objects += render_kustomization(target, image_paths)
        else:
            objects += [d for d in yaml.safe_load_all(target.read_text()) if d]
    for kind, generators in (("ConfigMap", k.get("configMapGenerator")), ("Secret", k.get("secretGenerator"))):
        for gen in generators or []:
            _generate(objects, kind, gen, directory)
    for patch in k.get("patches") or []:
        _apply_patch(objects, patch, directory)
    for obj in objects:
        if k.get("namespace") and obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = k["namespace"]
            for subject in obj.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = k["namespace"]
        for label_set in k.get("labels") or []:
            if label_set.get("includeSelectors") or label_set.get("includeTemplates"):
                raise KustomizeError(f"{path}: labels with includeSelectors/includeTemplates are not rendered")
            obj["metadata"].setdefault("labels", {}).update(label_set.get("pairs") or {})
        for image in k.get("images") or []:
            _set_images(obj, image, image_paths)
    return objects


def _must_exist(path: Path) -> Path:
    if not path.exists():
        raise KustomizeError(f"{path} does not exist")
    return path


def _generate(objects: list[dict[str, Any]], kind: str, gen: dict[str, Any], directory: Path) -> None:
    data: dict[str, str] = {}
    for entry in gen.get("files") or []:
        key, _, file = entry.rpartition("=")
        source = _must_exist(directory / file)
        data[key or source.name] = source.read_text()
    for literal in gen.get("literals") or []:
        key, _, value = literal.partition("=")
        data[key] = value
    field = "data" if kind == "ConfigMap" else "stringData"
    behavior = gen.get("behavior", "create")
    existing = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == gen["name"]]
    if behavior == "create":
        if existing:
            raise KustomizeError(f"{kind} {gen['name']} generated twice (use behavior: replace or merge)")
        objects.append({"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}, field: data})
    elif not existing:
        raise KustomizeError(f"{kind} {gen['name']}: behavior {behavior} but no such generator in a base")
    elif behavior == "replace":
        existing[0][field] = data
    else:
        existing[0].setdefault(field, {}).update(data)


def _apply_patch(objects: list[dict[str, Any]], patch: dict[str, Any], directory: Path) -> None:
    text = _must_exist(directory / patch["path"]).read_text() if "path" in patch else patch["patch"]
    body = yaml.safe_load(text)
    target = patch.get("target") or {}
    if isinstance(body, list):  # JSON 6902
        matches = [o for o in objects if _matches(o, target)]
        if not target or not matches:
            raise KustomizeError(f"JSON 6902 patch {patch.get('path')}: target {target} matches nothing")
        for obj in matches:
            for op in body:
                _json6902(obj, op)
        return
    selector = target or {"kind": body.get("kind"), "name": body.get("metadata", {}).get("name")}
    matches = [o for o in objects if _matches(o, selector)]
    if not matches:
        raise KustomizeError(f"patch {patch.get('path')}: {selector} matches nothing")
    for obj in matches:
        merged = _merge(obj, body)
        obj.clear()
        obj.update(merged)


def _matches(obj: dict[str, Any], target: dict[str, Any]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    return all([target.get("kind") in (None, obj["kind"]), target.get("name") in (None, obj["metadata"]["name"]),
                target.get("group") in (None, group), target.get("version") in (None, version)])


def _merge(base: Any, patch: Any) -> Any:
    """Strategic merge, as far as these manifests need it: maps recursively, lists of named maps by name."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and all(isinstance(i, dict) and "name" in i
                                                                   for i in base + patch)):
        out_list = [dict(i) for i in base]
        for item in patch:
            index = next((n for n, b in enumerate(out_list) if b["name"] == item["name"]), None)
            if index is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[index] = _merge(out_list[index], item)
        return out_list
    return copy.deepcopy(patch)


def _json6902(obj: dict[str, Any], op: dict[str, Any]) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
    parent: Any = obj
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    if isinstance(parent, list):
        if op["op"] == "add":
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
            return
        index = int(last)
        if index >= len(parent):
            raise KustomizeError(f"JSON 6902 {op['op']} {op['path']}: no such element")
        if op["op"] == "replace":
            parent[index] = op["value"]
        elif op["op"] == "remove":
            del parent[index]
        return
    if op["op"] in ("replace", "remove") and last not in parent:
        raise KustomizeError(f"JSON 6902 {op['op']} {op['path']}: no such field")
    if op["op"] == "remove":
        del parent[last]
    else:
        parent[last] = op["value"]


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _set_images(obj: dict[str, Any], image: dict[str, Any], image_paths: list[tuple[str, str]]) -> None:
    def renamed(current: str) -> str:
        name, _, tag = current.partition("@")[0].partition(":")
        if name != image["name"]:
            return current
        return f"{image.get('newName', name)}:{image.get('newTag', tag)}" if image.get("newTag", tag) else \
            image.get("newName", name)

    for containers_path in _POD_IMAGE_PATHS:
        for container in _dig(obj, containers_path) or []:
            container["image"] = renamed(container["image"])
    for kind, dotted in image_paths:
        if obj["kind"] == kind and isinstance(_dig(obj, dotted), str):
            parent = _dig(obj, dotted.rpartition(".")[0]) if "." in dotted else obj
            parent[dotted.rpartition(".")[2]] = renamed(parent[dotted.rpartition(".")[2]])


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for p in _POD_IMAGE_PATHS for c in _dig(obj, p) or []]


# --- Kubernetes objects ---------------------------------------------------------------------------

KUBERNETES_VERSION = "1.31.0"  # oldest Kubernetes these manifests are checked against (kubernetes-validate)
_DURATION = {"type": "string", "pattern": r"^([0-9]+(ms|s|m|h))+$"}
_SELECTOR = {"type": "object", "properties": {"matchLabels": {"type": "object",
                                                               "additionalProperties": {"type": "string"}}}}
# The custom resources' fields this repository uses, from the CRDs of the Prometheus operator
# (monitoring.coreos.com/v1) and the Spark operator (sparkoperator.k8s.io/v1beta2): kubernetes-validate
# ships only the built-in kinds.
CUSTOM_RESOURCE_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object", "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["selector", "endpoints"], "properties": {
            "selector": _SELECTOR,
            "namespaceSelector": {"type": "object"},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "properties": {
                    "port": {"type": "string"}, "targetPort": {"type": ["string", "integer"]},
                    "path": {"type": "string", "pattern": "^/"}, "scheme": {"enum": ["http", "https"]},
                    "interval": _DURATION, "scrapeTimeout": _DURATION, "honorLabels": {"type": "boolean"},
                    "relabelings": {"type": "array"}, "metricRelabelings": {"type": "array"}}}}}}}},
    ("monitoring.coreos.com/v1", "PodMonitor"): {
        "type": "object", "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["selector"], "properties": {
            "selector": _SELECTOR,
            "podMetricsEndpoints": {"type": "array", "items": {"type": "object", "properties": {
                "port": {"type": "string"}, "path": {"type": "string"}, "interval": _DURATION}}}}}}},
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): {
        "type": "object", "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["type", "sparkVersion", "driver", "executor"],
                                "properties": {
            "type": {"enum": ["Java", "Python", "Scala", "R"]},
            "pythonVersion": {"enum": ["2", "3"]},
            "mode": {"enum": ["cluster", "client", "in-cluster-client"]},
            "image": {"type": "string"}, "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            "mainApplicationFile": {"type": "string"}, "mainClass": {"type": "string"},
            "arguments": {"type": "array", "items": {"type": "string"}},
            "sparkVersion": {"type": "string"},
            "sparkConf": {"type": "object", "additionalProperties": {"type": "string"}},
            "hadoopConf": {"type": "object", "additionalProperties": {"type": "string"}},
            "restartPolicy": {"type": "object", "properties": {
                "type": {"enum": ["Never", "Always", "OnFailure"]},
                "onFailureRetryInterval": {"type": "integer"},
                "onSubmissionFailureRetryInterval": {"type": "integer"}}},
            "driver": {"$ref": "#/$defs/pod", "properties": {"serviceAccount": {"type": "string"}}},
            "executor": {"$ref": "#/$defs/pod", "properties": {"instances": {"type": "integer", "minimum": 1}}}}}},
        "$defs": {"pod": {"type": "object", "properties": {
            "cores": {"type": "integer", "minimum": 1}, "memory": {"type": "string", "pattern": r"^[0-9]+[kmgt]?$"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "env": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            "securityContext": {"type": "object"}}}}},
}


def kubernetes_problems(objects: list[dict[str, Any]], version: str = KUBERNETES_VERSION) -> list[str]:
    """Schema problems: built-in kinds against Kubernetes' own OpenAPI schemas (kubernetes-validate,
    strict: unknown fields are errors), custom resources against CUSTOM_RESOURCE_SCHEMAS."""
    import jsonschema
    import kubernetes_validate

    problems = []
    for obj in objects:
        where = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
        schema = CUSTOM_RESOURCE_SCHEMAS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if schema is not None:
            for error in jsonschema.Draft202012Validator(schema).iter_errors(obj):
                problems.append(f"{where}: {'/'.join(map(str, error.absolute_path))}: {error.message}")
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}: {'/'.join(map(str, exc.path))}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {obj.get('apiVersion')} {obj.get('kind')}")
    return problems


# --- Grafana --------------------------------------------------------------------------------------

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
    for panel in _panels(dashboard):
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


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])
