"""A private schema registry, for tests and benchmarks: Apicurio Registry 3.0.9 (its Quarkus application from
Maven Central, `io.apicurio:apicurio-registry-app:3.0.9:all`, unpacked once into the binlake cache; the newest
release that runs on Java 17), serving the Confluent-compatible API (`/apis/ccompat/v7`) that Avro serializers
and Kafka Connect's Avro converters speak. Schemas are kept in its in-memory database: a restart forgets them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Self

from ingester.devstack.connect import plugin_dir
from ingester.devstack.process import ServerProcess, die_with_parent, http_json
from ingester.maven import find_java

APICURIO_REGISTRY = "io.apicurio:apicurio-registry-app:3.0.9:all"
_HEAP = "384m"


class SchemaRegistry(ServerProcess):
    """Apicurio Registry on 127.0.0.1, in a temporary or a given datadir (its configuration and log)."""

    what = "schema registry"
    host = "127.0.0.1"

    def __init__(self, datadir: str | os.PathLike[str] | None = None, port: int | None = None, *,
                 start_timeout: float = 90.0) -> None:
        self._place(datadir, "binlake-registry-", port, start_timeout)

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL (what `schema.registry.url` settings take)."""
        return f"http://{self.host}:{self._port}/apis/ccompat/v7"

    @property
    def core_url(self) -> str:
        """Apicurio's own API (version 2, which Apicurio's 2.x serializers and converters speak)."""
        return f"http://{self.host}:{self._port}/apis/registry/v2"

    @property
    def log_file(self) -> Path:
        return self._datadir / "registry.log"

    @property
    def _config(self) -> Path:
        return self._datadir / "registry.properties"

    @property
    def _pid_file(self) -> Path:
        return self._datadir / "registry.pid"

    @property
    def _marker(self) -> Path:
        return self._config

    @property
    def _server_log(self) -> Path:
        return self.log_file

    def start(self, *, detach: bool = False) -> Self:
        """Launch the registry and wait until its API answers (the first start downloads it, ~160 MB)."""
        self._refuse_second()
        app = plugin_dir(APICURIO_REGISTRY)
        runner = next(app.glob("*-runner.jar"))
        self._datadir.mkdir(parents=True, exist_ok=True)
        self._config.write_text(f"quarkus.http.host={self.host}\nquarkus.http.port={self._port}\n"
                                "quarkus.log.console.format=%d{HH:mm:ss,SSS} %-5p [%c{2.}] %s%e%n\n")
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                [str(find_java()), f"-Xmx{_HEAP}", "-XX:TieredStopAtLevel=1",
                 f"-Dquarkus.config.locations={self._config}", "-jar", str(runner)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=detach, cwd=self._datadir,
                preexec_fn=die_with_parent if not detach and sys.platform == "linux" else None)
        self._proc = proc
        self._pid_file.write_text(f"{proc.pid}\n")
        self._wait_serving(proc, lambda: self.subjects() is not None, self.url, offset, self._start_timeout)
        return self

    def subjects(self) -> list[str] | None:
        """The registered subjects (None while the API does not answer)."""
        try:
            return self.request("GET", "/subjects")
        except (OSError, RuntimeError):
            return None

    def register(self, subject: str, schema: str) -> int:
        """Register an Avro schema (its JSON text) under a subject: its id."""
        return int(self.request("POST", f"/subjects/{subject}/versions", {"schema": schema})["id"])

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """A call of the Confluent-compatible API (an HTTP error is a RuntimeError with its status)."""
        return http_json(method, self.url + path, body, "application/vnd.schemaregistry.v1+json")
