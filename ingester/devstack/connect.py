"""A private Kafka Connect worker (standalone mode), for tests and benchmarks: outside producers and
consumers of the devstack's broker, e.g. Debezium's connectors.

Kafka's own Connect runtime comes from Maven Central (`org.apache.kafka:connect-runtime` and the JSON
converter, with their dependencies, resolved by mvn into the binlake cache like the broker's jars);
connector plugins are Maven Central tarballs (e.g. `io.debezium:debezium-connector-mariadb:...:plugin`),
unpacked once into the cache and put on the worker's plugin.path; a plugin that is a plain jar (e.g. a
converter, `group:artifact:version`) is its jar and its dependencies but Kafka's own. Connectors are created
and inspected through the worker's REST API on 127.0.0.1. Offsets go to a file in the worker's datadir.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from ingester.devstack.kafka import KAFKA_VERSION, LOG4J_SLF4J_BINDING
from ingester.devstack.process import ServerProcess, die_with_parent, http_json
from ingester.maven import default_cache_dir, fetch_artifact, fetch_classpath, find_java

DEBEZIUM_VERSION = "3.5.0.Final"
DEBEZIUM_MARIADB = f"io.debezium:debezium-connector-mariadb:{DEBEZIUM_VERSION}:plugin"
DEBEZIUM_JDBC_SINK = f"io.debezium:debezium-connector-jdbc:{DEBEZIUM_VERSION}:plugin"
# Apicurio's Kafka Connect converters (Avro, JSON Schema): a jar plugin, its dependencies resolved by mvn. The
# 3.x converters do not resolve from Maven Central (3.0.9's parent pom and Java SDK are missing there); 2.6's
# speaks the registry's v2 API, which Apicurio Registry 3 still serves.
APICURIO_CONVERTER = "io.apicurio:apicurio-registry-utils-converter:2.6.13.Final"
_HEAP = "512m"
# The worker's and its connectors' lines (INFO and above) to its log file, through its stdout.
_LOG4J = """status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %p %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""


def connect_classpath(version: str = KAFKA_VERSION) -> list[Path]:
    """The jars of Kafka Connect's standalone worker with the JSON converter, downloaded on first use."""
    return fetch_classpath([f"org.apache.kafka:connect-runtime:{version}", f"org.apache.kafka:connect-json:{version}",
                            LOG4J_SLF4J_BINDING])


def plugin_dir(coordinate: str, cache_dir: Path | None = None) -> Path:
    """A connector plugin's tarball from Maven Central (group:artifact:version:classifier), unpacked once
    into <cache_dir>/plugins/<artifact>-<version>: a directory for the worker's plugin.path."""
    tarball = fetch_artifact(coordinate, cache_dir, extension="tar.gz")

    def unpack(target: Path) -> None:
        with tarfile.open(tarball) as archive:
            archive.extractall(target, filter="data")

    return _made_once(coordinate, cache_dir, unpack)


def jar_plugin_dir(coordinate: str, cache_dir: Path | None = None) -> Path:
    """A plugin that is a jar (group:artifact:version), with its runtime dependencies but Kafka's own (a plugin
    uses the worker's), linked once into <cache_dir>/plugins/<artifact>-<version>."""
    artifact = coordinate.split(":")[1]

    def link(target: Path) -> None:
        kafka = {_artifact_of(jar) for jar in connect_classpath() if jar.name.endswith(f"-{KAFKA_VERSION}.jar")}
        (target / artifact).mkdir(parents=True)
        for jar in fetch_classpath([coordinate], cache_dir):
            if _artifact_of(jar) not in kafka:
                (target / artifact / jar.name).symlink_to(jar)

    return _made_once(coordinate, cache_dir, link)


def _made_once(coordinate: str, cache_dir: Path | None, make: Callable[[Path], None]) -> Path:
    """<cache_dir>/plugins/<artifact>-<version>, made by ``make`` unless a complete one is there."""
    _, artifact, version = coordinate.split(":")[:3]
    root = (cache_dir or default_cache_dir()).absolute() / "plugins"
    target = root / f"{artifact}-{version}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".unpacked").exists():  # the marker comes last: a half-made plugin is redone
            shutil.rmtree(target, ignore_errors=True)
            make(target)
            (target / ".unpacked").touch()
    return target


def _artifact_of(jar: Path) -> str:
    """A resolved jar's artifact id: its name without the version (kafka-clients-4.3.1.jar: kafka-clients)."""
    return re.sub(r"-\d[^-]*(-[^-]+)?\.jar$", "", jar.name)


class KafkaConnect(ServerProcess):
    """A standalone Connect worker on 127.0.0.1 for the broker at ``bootstrap``, with the plugins of
    ``plugins`` (Maven coordinates of plugin tarballs, group:artifact:version:classifier, or of jar plugins,
    group:artifact:version), in a temporary or a given datadir."""

    what = "Kafka Connect"

    host = "127.0.0.1"

    def __init__(self, bootstrap: str, plugins: list[str], datadir: str | os.PathLike[str] | None = None,
                 port: int | None = None, *, start_timeout: float = 120.0, offset_flush_ms: int = 1000) -> None:
        self.bootstrap = bootstrap
        self.plugins = plugins
        self.offset_flush_ms = offset_flush_ms  # how often source connectors' offsets are committed
        self._place(datadir, "binlake-connect-", port, start_timeout)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def log_file(self) -> Path:
        return self._datadir / "connect.log"

    @property
    def offsets_file(self) -> Path:
        return self._datadir / "offsets"

    @property
    def _config(self) -> Path:
        return self._datadir / "worker.properties"

    @property
    def _pid_file(self) -> Path:
        return self._datadir / "connect.pid"

    @property
    def _log4j_config(self) -> Path:
        return self._datadir / "log4j2.properties"

    @property
    def _marker(self) -> Path:
        return self._config

    @property
    def _server_log(self) -> Path:
        return self.log_file

    def start(self, *, detach: bool = False) -> Self:
        """Launch the worker and wait until its REST API answers. The first start downloads Connect's jars
        and the plugins; detach=True lets it outlive this process, else it dies with this process."""
        self._refuse_second()
        java = find_java()
        classpath = os.pathsep.join(str(jar) for jar in connect_classpath())
        plugin_path = ",".join(str(plugin_dir(p) if p.count(":") == 3 else jar_plugin_dir(p)) for p in self.plugins)
        self._datadir.mkdir(parents=True, exist_ok=True)
        self._config.write_text(
            f"bootstrap.servers={self.bootstrap}\n"
            f"listeners=http://{self.host}:{self._port}\n"
            "key.converter=org.apache.kafka.connect.json.JsonConverter\n"
            "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
            f"offset.storage.file.filename={self.offsets_file}\n"
            f"offset.flush.interval.ms={self.offset_flush_ms}\n"
            f"plugin.path={plugin_path}\n")
        self._log4j_config.write_text(_LOG4J)
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                [str(java), f"-Xmx{_HEAP}", "-XX:TieredStopAtLevel=1",
                 f"-Dlog4j2.configurationFile={self._log4j_config}", "-cp", classpath,
                 "org.apache.kafka.connect.cli.ConnectStandalone", str(self._config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=detach,
                preexec_fn=die_with_parent if not detach and sys.platform == "linux" else None)
        self._proc = proc
        self._pid_file.write_text(f"{proc.pid}\n")
        self._wait_serving(proc, lambda: self._get("/") is not None, self.url, offset, self._start_timeout)
        return self

    def create(self, name: str, config: dict[str, str]) -> None:
        """Create (or reconfigure) a connector."""
        self._request("PUT", f"/connectors/{name}/config", {"name": name, **config})

    def create_at(self, name: str, config: dict[str, str], partition: dict[str, Any], offset: dict[str, Any]) -> None:
        """Create a connector stopped (KIP-980), give it a source offset (KIP-875), then start it: e.g. a
        Debezium connector streaming from a given binlog position."""
        self._request("POST", "/connectors", {"name": name, "config": config, "initial_state": "STOPPED"})
        self._request("PATCH", f"/connectors/{name}/offsets", {"offsets": [{"partition": partition, "offset": offset}]})
        self._request("PUT", f"/connectors/{name}/resume")

    def wait_running(self, name: str, timeout: float = 60.0) -> None:
        """Until the connector and its tasks run; an error names the failed task's trace's first line."""
        deadline = time.monotonic() + timeout
        while True:
            status = self._get(f"/connectors/{name}/status") or {}
            tasks = status.get("tasks") or []
            failed = [t for t in tasks if t.get("state") == "FAILED"]
            if failed or (status.get("connector") or {}).get("state") == "FAILED":
                trace = (failed[0] if failed else status["connector"]).get("trace", "")
                raise RuntimeError(f"connector {name} failed: {trace.splitlines()[0] if trace else status}")
            if tasks and all(t.get("state") == "RUNNING" for t in tasks):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"connector {name} not running after {timeout:g}s: {status}")
            time.sleep(0.2)

    def delete(self, name: str) -> None:
        self._request("DELETE", f"/connectors/{name}")

    def _get(self, path: str) -> Any:
        try:
            return self._request("GET", path)
        except (OSError, RuntimeError):
            return None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return http_json(method, self.url + path, body)
