"""The deployment files (docker-compose.yml, Dockerfiles, deploy/) are checked offline against the code.

No Docker engine, cluster or Grafana runs here: tests/harness/deploy/ reads the files and cross-checks
every reference. Each checker is also shown to fail on a deliberately broken copy.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ingester.config import load_config
from ingester.devstack.kafka import KAFKA_VERSION
from tests.harness.deploy.accepted import REPO, SECRET_PASSWORD, config_env_names, exported_metrics, load_yaml
from tests.harness.deploy.compose import binds, compose_config, compose_problems, flag
from tests.harness.deploy.dockerfile import dockerfile_entrypoint, dockerfile_problems, parse_dockerfile
from tests.harness.deploy.grafana import grafana_problems, panels
from tests.harness.deploy.kubernetes import kubernetes_problems
from tests.harness.deploy.kustomize import CLUSTER_SCOPED, KustomizeError, containers, render_kustomization

COMPOSE = REPO / "docker-compose.yml"
KUBERNETES = REPO / "deploy" / "kubernetes"
OVERLAY = KUBERNETES / "overlays" / "production"
GRAFANA = REPO / "deploy" / "grafana" / "binlake.json"


def compose() -> dict[str, Any]:
    return load_yaml(COMPOSE)


def by_kind(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


# --- code-derived facts ---------------------------------------------------------------------------


def test_setting_names_come_from_the_config_dataclasses() -> None:
    names = config_env_names()
    assert {"BINLAKE_SOURCE_URL", "BINLAKE_SOURCE_PASSWORD_FILE", "BINLAKE_SOURCE_TLS", "BINLAKE_KAFKA_BOOTSTRAP",
            "BINLAKE_METRICS_PORT", "BINLAKE_METRICS_HOST", "BINLAKE_LOG_FORMAT"} <= names
    default = dataclasses.asdict(load_config(None, environ={}))
    for name in names - {SECRET_PASSWORD}:  # every derived name really changes the configuration
        changed = {value: dataclasses.asdict(load_config(None, environ={name: value}))
                   for value in ("7", "true", "mysql://u@h:1", "initial", "always", "skip-table", "SSL", "false",
                                 "a.b.c=mask", "db2:3306", "{d.t: [a]}", "PLAIN", "gtid", "gzip", "json",
                                 "binlake", "required", "5s", "precise", "string", "connect", "hex", "debezium-json",
                                 "http://registry:8081", "iceberg", "RecordNameStrategy", "none", "stop")
                   if _loads(name, value)}
        assert any(d != default for d in changed.values()), name


def _loads(name: str, value: str) -> bool:
    try:
        load_config(None, environ={name: value})
    except ValueError:  # not a value of this setting's type
        return False
    return True


def test_metric_names_come_from_the_daemon_source() -> None:
    metrics = {m.name: m for m in exported_metrics()}
    assert {"binlake_events", "binlake_lag_seconds", "binlake_kafka_commit_seconds"} <= set(metrics)
    assert "binlake_events_total" in metrics["binlake_events"].series()
    assert "binlake_kafka_commit_seconds_bucket" in metrics["binlake_kafka_commit_seconds"].series()
    assert metrics["binlake_committed_position"].labels == ("file",)


# --- docker compose -------------------------------------------------------------------------------


def test_compose_references_are_sound() -> None:
    assert compose_problems(compose()) == []


def test_compose_has_the_pipeline() -> None:
    services = compose()["services"]
    assert {"mysql", "kafka", "binlake", "land", "seed"} <= set(services)
    assert services["mariadb"]["profiles"] == ["mariadb"]
    mysql_flags = " ".join(services["mysql"]["command"])
    for wanted in ("--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--binlog-row-metadata=FULL",
                 "--binlog-transaction-compression=ON", "--binlog-format=ROW"):
        assert wanted in mysql_flags
    assert services["mysql"]["image"].startswith("mysql:8.4.")
    assert services["mariadb"]["image"].startswith("mariadb:11.")
    assert services["kafka"]["image"] == f"apache/kafka:{KAFKA_VERSION}", "the broker version the tests run"
    cluster_id = services["kafka"]["environment"]["CLUSTER_ID"]
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16, "KRaft cluster ids are base64url UUIDs"
    for name in ("binlake", "binlake-mariadb"):
        assert services[name]["environment"]["BINLAKE_METRICS_HOST"] == "0.0.0.0"
    assert "./lake:/lake" in services["land"]["volumes"]


def test_compose_daemon_and_land_agree_on_kafka() -> None:
    """The landing job reads the topics the daemon writes: same broker, same prefix."""
    services = compose()["services"]
    cfg, _ = compose_config(services["binlake"], REPO)
    assert cfg is not None
    land = [str(a) for a in services["land"]["command"]]
    assert flag(land, "--kafka") == cfg.kafka.bootstrap
    assert flag(land, "--topic-prefix") == cfg.kafka.topic_prefix
    assert flag(land, "--lake") == "/lake"
    # The checkpoint is on a named volume, which takes its owner from the image's directory: the job's user.
    checkpoint = flag(land, "--checkpoint") or ""
    (target,) = [t for s, t, local in binds(services["land"]) if not local and checkpoint.startswith(t + "/")]
    assert f"install -d -o binlake -g binlake {target}" in (REPO / "Dockerfile.spark").read_text()


def test_compose_passwords_agree() -> None:
    """The daemon's password (a compose secret) is the one the init scripts give the replication user."""
    password = (REPO / "deploy" / "compose" / "source-password").read_text().strip()
    for server in ("mysql", "mariadb"):
        sql = (REPO / "deploy" / server / "init" / "01-binlake-user.sql").read_text()
        assert re.findall(r"IDENTIFIED BY '([^']*)'", sql) == [password]
        assert "REPLICATION SLAVE" in sql and "SELECT" in sql
    assert "REPLICATION CLIENT" in (REPO / "deploy/mysql/init/01-binlake-user.sql").read_text()
    assert "BINLOG MONITOR" in (REPO / "deploy/mariadb/init/01-binlake-user.sql").read_text()


@pytest.mark.parametrize(("mutate", "problem"), [
    (lambda d: d["services"]["binlake"]["volumes"].__setitem__(
        0, "./deploy/compose/missing.yaml:/etc/binlake/binlake.yaml:ro"), "mounted ./deploy/compose/missing.yaml"),
    (lambda d: d["services"]["land"]["build"].__setitem__("dockerfile", "Dockerfile.nope"),
     "Dockerfile Dockerfile.nope does not exist"),
    (lambda d: d["services"]["binlake"]["depends_on"].__setitem__("zookeeper", {"condition": "service_started"}),
     "depends on unknown service zookeeper"),
    (lambda d: d["services"]["binlake"]["depends_on"].__setitem__("seed", {"condition": "service_healthy"}),
     "seed has no healthcheck"),
    (lambda d: d["services"]["seed"]["depends_on"].__setitem__("mariadb", {"condition": "service_healthy"}),
     "only runs in profiles"),
    (lambda d: d["services"]["land"]["ports"].append("9100:9999"), "host port 9100 is also published"),
    (lambda d: d["services"]["land"]["volumes"].append("lake-cache:/cache"), "volume lake-cache is not declared"),
    (lambda d: d["services"]["binlake"]["environment"].__setitem__("BINLAKE_METRIC_PORT", "9100"),
     "BINLAKE_METRIC_PORT is not a binlake setting"),
    (lambda d: d["services"]["binlake"]["environment"].__setitem__("BINLAKE_SOURCE_SERVER_ID", "abc"),
     "configuration does not load"),
    (lambda d: d["services"]["binlake"]["environment"].__setitem__("BINLAKE_METRICS_HOST", "127.0.0.1"),
     "metrics must listen on 0.0.0.0"),
    (lambda d: d["services"]["binlake"].__setitem__("secrets", []), "is not a mounted secret"),
    (lambda d: d["services"]["binlake"]["healthcheck"].__setitem__("test", ["CMD", "true"]),
     "healthcheck does not ask /healthz"),
    (lambda d: d["services"]["kafka"].__setitem__("image", "apache/kafka:latest"), "is not pinned"),
    (lambda d: d["secrets"]["source_password"].__setitem__("file", "./nope"), "file ./nope does not exist"),
], ids=["mount", "dockerfile", "depends_on", "healthy-without-check", "profile", "port", "volume", "env-name",
        "env-value", "metrics-host", "secret", "healthcheck", "tag", "secret-file"])
def test_compose_checks_catch_broken_references(mutate, problem: str) -> None:
    data = copy.deepcopy(compose())
    mutate(data)
    problems = compose_problems(data)
    assert any(problem in p for p in problems), problems


def test_compose_checks_see_a_file_deleted_from_a_copy(tmp_path: Path) -> None:
    """The same checks on a copy of the repository's deploy files, with the seed script's folder gone."""
    for name in ("docker-compose.yml", "Dockerfile", "Dockerfile.spark", ".dockerignore", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "deploy", tmp_path / "deploy")
    (tmp_path / "lake").mkdir()
    assert compose_problems(load_yaml(tmp_path / "docker-compose.yml"), tmp_path) == []
    shutil.rmtree(tmp_path / "deploy" / "seed")
    problems = compose_problems(load_yaml(tmp_path / "docker-compose.yml"), tmp_path)
    assert "service seed: mounted ./deploy/seed does not exist" in problems


# --- Dockerfiles ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.spark"])
def test_dockerfiles_are_sound(name: str) -> None:
    assert dockerfile_problems(REPO / name) == []


def test_daemon_image_runs_binlake_run() -> None:
    assert dockerfile_entrypoint(REPO / "Dockerfile") == ["binlake", "run"]
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'binlake = "ingester.cli.main:main"' in pyproject
    instructions = parse_dockerfile((REPO / "Dockerfile").read_text())
    env = " ".join(i.args for i in instructions if i.op == "ENV")
    assert "BINLAKE_METRICS_HOST=0.0.0.0" in env and "BINLAKE_METRICS_PORT=9100" in env
    assert any(i.op == "HEALTHCHECK" and "/healthz" in i.args for i in instructions)
    assert load_config(None, environ={"BINLAKE_METRICS_HOST": "0.0.0.0", "BINLAKE_METRICS_PORT": "9100",
                                      "BINLAKE_LOG_FORMAT": "json"}).metrics_port == 9100


def test_spark_image_matches_the_pinned_versions() -> None:
    """Dockerfile.spark's Spark and Hadoop versions are those of streaming_job/runtime/versions.py and pyspark."""
    text = (REPO / "Dockerfile.spark").read_text()
    spark_tag = re.search(r"ARG SPARK_IMAGE=spark:(\S+)", text)
    hadoop = re.search(r"ARG HADOOP_VERSION=(\S+)", text)
    assert spark_tag and hadoop
    versions = REPO / "streaming_job" / "versions.py"
    if versions.is_file():  # the landing job's branch pins the versions
        spark_version = re.search(r'SPARK_VERSION = "([^"]+)"', versions.read_text())
        assert spark_version and spark_tag.group(1).startswith(spark_version.group(1) + "-")
    try:
        import pyspark
    except ImportError:
        return
    jars = Path(pyspark.__file__).parent / "jars"
    assert (jars / f"hadoop-client-api-{hadoop.group(1)}.jar").is_file(), "hadoop-aws must match pyspark's Hadoop"


def test_spark_script_directory_shadows_no_standard_module() -> None:
    """spark-submit puts the script's directory first on sys.path: deploy/spark/land.py exists because
    streaming_job/delta/ would shadow delta-spark's `delta` there; nothing beside land.py may do the same."""
    script = REPO / "deploy" / "spark" / "land.py"
    assert "from streaming_job.main import main" in script.read_text()
    beside = {p.stem for p in script.parent.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert beside & sys.stdlib_module_names == set()


def test_spark_jars_directory_is_on_every_class_path(production) -> None:
    """Under spark-submit the Kafka source must be on the JVM's class path from the start: the directory
    Dockerfile.spark fills is on it in the image's command, in compose and in the SparkApplication."""
    text = (REPO / "Dockerfile.spark").read_text()
    jars = "/opt/binlake/jars"
    assert f"cp $(/opt/venv/bin/python -m streaming_job.runtime.versions) {jars}/" in text
    assert f"-DoutputDirectory={jars}" in text and f"SPARK_EXTRA_CLASSPATH={jars}/*" in text
    cmd = json.loads(next(i.args for i in parse_dockerfile(text) if i.op == "CMD"))
    land = [str(a) for a in compose()["services"]["land"]["command"]]
    for argv in (cmd, land):
        assert flag(argv, "--driver-class-path") == f"{jars}/*"
    conf = by_kind(production, "SparkApplication")["spec"]["sparkConf"]
    assert conf["spark.driver.extraClassPath"] == conf["spark.executor.extraClassPath"] == f"{jars}/*"
    assert "/opt/binlake/land.py" in cmd and "/opt/binlake/land.py" in land


@pytest.mark.parametrize(("dockerfile", "old", "new", "problem"), [
    ("Dockerfile", "USER 10001:10001", "USER root", "runs as root"),
    ("Dockerfile.spark", "USER ${BINLAKE_UID}", "USER 0", "runs as root"),
    ("Dockerfile", "COPY ingester ./ingester", "COPY ingestor ./ingester", "COPY source ingestor does not exist"),
    ("Dockerfile", "COPY --from=build /opt/binlake", "COPY --from=builder /opt/binlake", "no such stage"),
    ("Dockerfile", "python:3.11.13-slim-bookworm", "python", "is not pinned"),
    ("Dockerfile", "COPY ingester ./ingester", "COPY tests ./tests", "excluded by .dockerignore"),
    ("Dockerfile.spark", "COPY deploy/spark/land.py", "COPY deploy/seed/seed.py", "excluded by .dockerignore"),
])
def test_dockerfile_checks_catch_mistakes(tmp_path: Path, dockerfile: str, old: str, new: str, problem: str) -> None:
    broken = tmp_path / dockerfile
    text = (REPO / dockerfile).read_text()
    assert old in text
    broken.write_text(text.replace(old, new))
    problems = dockerfile_problems(broken, REPO)
    assert any(problem in p for p in problems), problems


# --- configuration files --------------------------------------------------------------------------


def deploy_configs() -> list[Path]:
    return sorted((REPO / "deploy").rglob("binlake.yaml"))


def test_every_deploy_config_is_found() -> None:
    assert len(deploy_configs()) == 3  # compose, Kubernetes base, production overlay


@pytest.mark.parametrize("path", deploy_configs(), ids=lambda p: str(p.relative_to(REPO)))
def test_deploy_configs_load(path: Path) -> None:
    cfg = load_config(path, environ={})
    assert cfg.metrics_host == "0.0.0.0" and cfg.metrics_port == 9100
    assert cfg.source.password_file and "@" in cfg.source.url and ":" not in cfg.source.url.split("@")[0][8:]
    assert cfg.log_format == "json"


# --- Kubernetes -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def production() -> list[dict[str, Any]]:
    return render_kustomization(OVERLAY)


def test_base_and_overlay_validate_against_the_kubernetes_schemas(production) -> None:
    base = render_kustomization(KUBERNETES / "base")
    assert kubernetes_problems(base) == []
    assert kubernetes_problems(production) == []
    kinds = {o["kind"] for o in production}
    assert {"Deployment", "ConfigMap", "Secret", "Service", "ServiceMonitor", "PodDisruptionBudget",
            "SparkApplication", "ServiceAccount", "Namespace"} <= kinds


def _mib(quantity: str) -> float:
    """A Kubernetes memory quantity in MiB (the suffixes this repository uses)."""
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()
    return int(number) * (1024 if unit == "Gi" else 1)


def _benchmark_peak_rss_mib() -> int:
    """The largest daemon peak RSS bench/results/daemon.md reports (MiB): what the requests are sized from."""
    text = (REPO / "bench" / "results" / "daemon.md").read_text()
    figures = [int(m) for m in re.findall(r"(?:\*\*|\| )(\d+) MiB(?:\*\*| \|)", text)]
    assert figures, "bench/results/daemon.md reports no peak RSS"
    return max(figures)


def test_daemon_is_a_single_non_root_writer(production) -> None:
    deployment = by_kind(production, "Deployment", "binlake")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    peak = _benchmark_peak_rss_mib()
    resources = container["resources"]
    assert _mib(resources["requests"]["memory"]) >= 1.5 * peak  # headroom over the measured peak
    assert _mib(resources["limits"]["memory"]) >= 3 * peak  # a limit the daemon never reaches
    assert _mib(resources["requests"]["memory"]) <= 4 * peak  # but not reserving far more than it uses
    assert resources["requests"]["cpu"] == "1"  # one busy Python thread at full load
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["image"] == "registry.example.com/binlake/binlake:0.1.0"
    assert pod["priorityClassName"] == by_kind(production, "PriorityClass")["metadata"]["name"]
    assert {e["name"] for e in container["env"]} == {"BINLAKE_METRICS_HOST", "BINLAKE_SOURCE_HEARTBEAT"}


def test_daemon_config_and_secret_are_wired(production, tmp_path: Path) -> None:
    """The ConfigMap holds a configuration load_config accepts; --config, the password file and the
    metrics port point where the pod mounts and listens."""
    deployment = by_kind(production, "Deployment", "binlake")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    config_path = Path(flag(container["args"], "--config") or "")
    config_volume = mounts[str(config_path.parent)]["configMap"]["name"]
    config_map = by_kind(production, "ConfigMap", config_volume)
    local = tmp_path / "binlake.yaml"
    local.write_text(config_map["data"][config_path.name])
    env = {e["name"]: e["value"] for e in container["env"]}
    cfg = load_config(local, environ=env)
    assert cfg.source.url.startswith("mysql://binlake@orders-db."), "the overlay's configuration replaced the base's"
    password = Path(cfg.source.password_file or "")
    secret = by_kind(production, "Secret", mounts[str(password.parent)]["secret"]["secretName"])
    assert password.name in secret["stringData"]
    (port,) = container["ports"]
    assert port["containerPort"] == cfg.metrics_port and port["name"] == "metrics"
    assert container["livenessProbe"]["httpGet"]["port"] == "metrics"
    assert pod["serviceAccountName"] == by_kind(production, "ServiceAccount", pod["serviceAccountName"])[
        "metadata"]["name"]


def test_selectors_and_ports_line_up(production) -> None:
    pod_labels = by_kind(production, "Deployment", "binlake")["spec"]["template"]["metadata"]["labels"]
    service = by_kind(production, "Service", "binlake-metrics")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    monitor = by_kind(production, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    pdb = by_kind(production, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert {o["metadata"].get("namespace") for o in production if o["kind"] not in CLUSTER_SCOPED} == {"binlake"}


def test_pods_meet_the_restricted_pod_security_standard(production) -> None:
    """The overlay's namespace enforces the restricted level: every pod the manifests make must meet it."""
    namespace = by_kind(production, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = by_kind(production, "Deployment", "binlake")["spec"]["template"]["spec"]
    contexts = [(pod["securityContext"], c["securityContext"]) for c in pod["containers"]]
    app = by_kind(production, "SparkApplication")["spec"]
    contexts += [({}, app[role]["securityContext"]) for role in ("driver", "executor")]
    for pod_context, container in contexts:
        merged = pod_context | container
        assert merged["runAsNonRoot"] is True and merged.get("runAsUser", 1) != 0
        assert merged["seccompProfile"]["type"] == "RuntimeDefault"
        assert container["allowPrivilegeEscalation"] is False
        assert container["capabilities"]["drop"] == ["ALL"]


def test_land_reads_what_the_daemon_writes(production, tmp_path: Path) -> None:
    app = by_kind(production, "SparkApplication", "binlake-land")
    spec = app["spec"]
    config = tmp_path / "binlake.yaml"
    config.write_text(by_kind(production, "ConfigMap", "binlake-config")["data"]["binlake.yaml"])
    cfg = load_config(config, environ={})
    assert flag(spec["arguments"], "--kafka") == cfg.kafka.bootstrap
    assert flag(spec["arguments"], "--topic-prefix") == cfg.kafka.topic_prefix
    assert (flag(spec["arguments"], "--lake") or "").startswith("s3a://")
    assert (flag(spec["arguments"], "--checkpoint") or "").startswith("s3a://")
    assert spec["image"] == "registry.example.com/binlake/binlake-land:0.1.0"
    assert spec["mainApplicationFile"] == "local:///opt/binlake/land.py"
    assert spec["executor"]["instances"] == 4
    by_kind(production, "ServiceAccount", spec["driver"]["serviceAccount"])
    binding = by_kind(production, "RoleBinding", "binlake-land")
    assert binding["subjects"][0] == {"kind": "ServiceAccount", "name": "binlake-land", "namespace": "binlake"}


def broken_overlay(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of deploy/kubernetes with one edit in `file`; the copy's production overlay."""
    copied = tmp_path / "kubernetes"
    shutil.copytree(KUBERNETES, copied)
    text = (copied / file).read_text()
    assert old in text
    (copied / file).write_text(text.replace(old, new, 1))
    return copied / "overlays" / "production"


@pytest.mark.parametrize(("file", "old", "new", "problem"), [
    ("base/daemon.yaml", "          readinessProbe:", "          readinessProb:", "readinessProb"),
    ("base/daemon.yaml", "memory: 256Mi", "memory: [256Mi]", "memory"),
    ("base/servicemonitor.yaml", "interval: 15s", "interval: fifteen", "fifteen"),
    ("base/land.yaml", "type: Python", "type: Go", "Go"),
    ("base/pdb.yaml", "  maxUnavailable: 1", "  maxUnavailable: {one: 1}", "maxUnavailable"),
])
def test_kubernetes_schema_checks_catch_mistakes(tmp_path: Path, file: str, old: str, new: str,
                                                 problem: str) -> None:
    problems = kubernetes_problems(render_kustomization(broken_overlay(tmp_path, file, old, new)))
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(("file", "old", "new", "error"), [
    ("base/kustomization.yaml", "  - pdb.yaml\n", "  - pdb.yaml\n  - missing.yaml\n", "missing.yaml does not exist"),
    ("overlays/production/land-patch.yaml", "path: /spec/executor/instances", "path: /spec/executor/nope",
     "no such field"),
    ("overlays/production/daemon-patch.yaml", "name: binlake\n", "name: binlake-typo\n", "matches nothing"),
])
def test_kustomize_rendering_catches_broken_references(tmp_path: Path, file: str, old: str, new: str,
                                                       error: str) -> None:
    overlay = broken_overlay(tmp_path, file, old, new)
    with pytest.raises(KustomizeError, match=error):
        render_kustomization(overlay)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) not installed")
def test_kubectl_kustomize_agrees_with_the_offline_rendering(production) -> None:
    """Where kubectl is installed (it works offline), its rendering has the same objects, images and
    namespaces as ours, and passes the same schema checks."""
    result = subprocess.run(["kubectl", "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    theirs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert kubernetes_problems(theirs) == []

    def identity(obj: dict[str, Any]) -> tuple[str, str, str | None]:
        name = obj["metadata"]["name"]
        if obj["kind"] in ("ConfigMap", "Secret"):
            name = re.sub(r"-[a-z0-9]{10}$", "", name)  # kustomize's content hash; ours has none
        return obj["kind"], name, obj["metadata"].get("namespace")

    assert sorted(map(identity, theirs)) == sorted(map(identity, production))
    mine = {identity(o): o for o in production}
    for obj in theirs:
        ours = mine[identity(obj)]
        assert [c["image"] for c in containers(obj)] == [c["image"] for c in containers(ours)]
        assert obj["metadata"].get("labels") == ours["metadata"].get("labels")
        if obj["kind"] == "SparkApplication":
            assert obj["spec"] == ours["spec"]
        if obj["kind"] == "Deployment":
            theirs_pod, ours_pod = obj["spec"]["template"]["spec"], ours["spec"]["template"]["spec"]
            assert {e["name"] for e in theirs_pod["containers"][0]["env"]} == \
                {e["name"] for e in ours_pod["containers"][0]["env"]}
            assert theirs_pod["affinity"] == ours_pod["affinity"]


# --- Grafana --------------------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    return json.loads(GRAFANA.read_text())


def test_dashboard_queries_use_exported_metrics() -> None:
    assert grafana_problems(dashboard(), exported_metrics()) == []


def test_dashboard_charts_what_operators_need() -> None:
    exprs = " ".join(t["expr"] for p in panels(dashboard()) for t in p.get("targets", []))
    for needed in ("binlake_lag_seconds", "rate(binlake_events_total", "rate(binlake_records_total",
                   "rate(binlake_transactions_total", "rate(binlake_bytes_total", "binlake_reconnects_total",
                   "binlake_committed_position", "histogram_quantile(0.99", "binlake_kafka_commit_seconds_bucket"):
        assert needed in exprs, needed


@pytest.mark.parametrize(("old", "new", "problem"), [
    ("rate(binlake_events_total", "rate(binlake_event_total", "binlake_event_total is not a metric"),
    ("binlake_kafka_commit_seconds_bucket", "binlake_kafka_commit_seconds_buckets", "_buckets is not a metric"),
    ("by (instance, file)", "by (instance, binlog)", "label binlog is on none"),
    ('"uid": "${datasource}"', '"uid": "${prom}"', "variable ${prom} is not defined"),
])
def test_dashboard_checks_catch_mistakes(old: str, new: str, problem: str) -> None:
    text = GRAFANA.read_text()
    assert old in text
    problems = grafana_problems(json.loads(text.replace(old, new, 1)), exported_metrics())
    assert any(problem in p for p in problems), problems
