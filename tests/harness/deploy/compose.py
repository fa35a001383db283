"""docker compose files checked offline: every service's settings are ones load_config accepts, its mounts exist, the
daemon's services have health checks and restart rules."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingester.config import Config, load_config

from .accepted import REPO, config_env_names
from .dockerfile import parse_dockerfile


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


def binds(service: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
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


def flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def compose_config(service: dict[str, Any], base: Path) -> tuple[Config | None, Path | None]:
    """The daemon configuration a binlake service would run with: its --config file (found through the
    bind mount that puts it in the container) under its BINLAKE_* environment."""
    config_in_container = flag(_argv(service.get("command")), "--config")
    local = None
    if config_in_container:
        for source, target, is_local in binds(service):
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
        for source, _target, is_local in binds(service):
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
    if flag(_argv(service.get("command")), "--config") and local is None:
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
