"""An Iceberg REST catalog server, for tests and local development: Apache Iceberg's own REST catalog test
server (``org.apache.iceberg.rest.RESTCatalogServer``, the class of the ``apache/iceberg-rest-fixture``
image), from Maven Central: ``iceberg-open-api``'s ``test-fixtures`` jar with ``iceberg-core`` (and its
``tests`` jar: the servlet and adapter), Jetty 11 and SQLite's JDBC driver, of the pinned Iceberg version
(streaming_job/runtime/versions.py), plus pyspark's own Hadoop client (its HadoopFileIO). It keeps its catalog in
an in-memory SQLite database (gone when it stops) and writes the tables' metadata files with HadoopFileIO
where their locations say (the lake's paths)."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Self

from ingester.devstack.process import die_with_parent, free_tcp_port, tail
from ingester.maven import fetch_artifact, fetch_classpath, find_java

_HEAP = "256m"


def rest_classpath() -> list[Path]:
    """The REST catalog server's jars (cached: offline once fetched)."""
    import pyspark

    from streaming_job.runtime.versions import ICEBERG_VERSION

    jars = fetch_classpath([f"org.apache.iceberg:iceberg-core:{ICEBERG_VERSION}",
                            "org.eclipse.jetty:jetty-servlet:11.0.25", "org.xerial:sqlite-jdbc:3.49.1.0"])
    jars += [fetch_artifact(f"org.apache.iceberg:iceberg-core:{ICEBERG_VERSION}:tests"),
             fetch_artifact(f"org.apache.iceberg:iceberg-open-api:{ICEBERG_VERSION}:test-fixtures")]
    return jars + sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-*.jar"))


class IcebergRestCatalog:
    """Iceberg's REST catalog test server on 127.0.0.1 (``uri``), a child of this process."""

    host = "127.0.0.1"

    def __init__(self, port: int | None = None, start_timeout: float = 60.0) -> None:
        self.port = port if port is not None else free_tcp_port()
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = Path(tempfile.mkdtemp(prefix="binlake-iceberg-rest-")) / "server.log"

    @property
    def uri(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        classpath = os.pathsep.join(str(p) for p in rest_classpath())
        env = {**os.environ, "CATALOG_REST_PORT": str(self.port),
               "CATALOG_WAREHOUSE": self._log.parent.joinpath("warehouse").as_uri()}
        with self._log.open("ab") as log:
            self._proc = subprocess.Popen(
                [str(find_java()), f"-Xmx{_HEAP}", "-XX:TieredStopAtLevel=1", "-cp", classpath,
                 "org.apache.iceberg.rest.RESTCatalogServer"], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env, preexec_fn=die_with_parent if sys.platform == "linux" else None)
        deadline = time.monotonic() + self._start_timeout
        while not self._answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Iceberg REST catalog did not start on {self.uri}:\n"
                                   f"{tail(self._log.read_text(errors='replace'))}")
            time.sleep(0.2)
        return self

    def _answers(self) -> bool:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=1)
        try:
            connection.request("GET", "/v1/config")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
