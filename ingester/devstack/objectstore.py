"""A private S3-compatible object store, for tests and local development: S3Proxy on a local directory.

S3Proxy (Maven Central `org.gaul:s3proxy`, its self-contained jar, fetched once into the binlake cache)
serves the S3 API on 127.0.0.1 from a directory of its own: each bucket is a subdirectory, each object a
file, written atomically (a temporary file moved into place); `If-None-Match: *` puts are atomic too.
Clients address it path-style (http://127.0.0.1:<port>/<bucket>/<key>) with SigV4 and the store's access
key; the region is any name (``REGION`` here).
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Self

from ingester.devstack.process import ServerProcess, die_with_parent, free_tcp_port
from ingester.maven import fetch_artifact, find_java

S3PROXY = "org.gaul:s3proxy:4.1.0:jar-with-dependencies"
REGION = "us-east-1"
_HEAP = "256m"


class ObjectStore(ServerProcess):
    """S3Proxy on 127.0.0.1 over ``<datadir>/data``, in a temporary or a given datadir (as KafkaBroker's: a
    given one keeps its buckets across restarts, and a second instance on it can stop() the store)."""

    what = "S3Proxy"

    host = "127.0.0.1"

    def __init__(self, datadir: str | os.PathLike[str] | None = None, port: int | None = None, *,
                 access_key: str = "binlake", secret_key: str = "binlake-secret", read_only: bool = False,
                 start_timeout: float = 60.0) -> None:
        """read_only: every write refused (S3Proxy's read-only middleware), as a bucket the credentials may
        only read."""
        self._temporary = datadir is None
        self._datadir = Path(datadir if datadir is not None else tempfile.mkdtemp(prefix="binlake-s3-")).absolute()
        self._port = port if port is not None else free_tcp_port()
        self.access_key = access_key
        self.secret_key = secret_key
        self.read_only = read_only
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:  # never the secret key
        return f"ObjectStore(endpoint={self.endpoint!r}, datadir={str(self._datadir)!r})"

    @property
    def port(self) -> int:
        return self._port

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def data(self) -> Path:
        """The directory of the buckets (one subdirectory each)."""
        return self._datadir / "data"

    @property
    def log_file(self) -> Path:
        return self._datadir / "s3proxy.log"

    @property
    def _config(self) -> Path:
        return self._datadir / "s3proxy.conf"

    @property
    def _pid_file(self) -> Path:
        return self._datadir / "s3proxy.pid"

    def create_bucket(self, name: str) -> str:
        """A bucket (an existing one is kept); its name."""
        (self.data / name).mkdir(parents=True, exist_ok=True)
        return name

    def environment(self) -> dict[str, str]:
        """The variables that point AWS clients (Spark's s3a, pyarrow, delta-rs, binlake) at this store."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION}

    def start(self, *, detach: bool = False) -> Self:
        """Launch S3Proxy and wait until it answers HTTP on its port. The first start downloads its jar
        (55 MB); detach=True lets it outlive this process (devstack), else it dies with this process."""
        self._refuse_second()
        java, jar = find_java(), fetch_artifact(S3PROXY)
        self.data.mkdir(parents=True, exist_ok=True)
        self._config.write_text(
            f"s3proxy.endpoint={self.endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={self.access_key}\n"
            f"s3proxy.credential={self.secret_key}\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={self.data}\n"
            f"s3proxy.read-only-blobstore={str(self.read_only).lower()}\n")
        self._config.chmod(0o600)  # it holds the secret key
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                [str(java), f"-Xmx{_HEAP}", "-XX:TieredStopAtLevel=1", "-jar", str(jar), "--properties",
                 str(self._config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=detach,
                env={**os.environ, "LOG_LEVEL": "warn"},
                preexec_fn=die_with_parent if not detach and sys.platform == "linux" else None)
        self._proc = proc
        self._pid_file.write_text(f"{proc.pid}\n")
        self._wait_serving(proc, self._answers, self.endpoint, offset, self._start_timeout)
        return self

    def _answers(self) -> bool:
        """Whether the store answers an S3 request (an anonymous one is refused, with an S3 error)."""
        connection = http.client.HTTPConnection(self.host, self._port, timeout=1)
        try:
            connection.request("GET", "/")
            return connection.getresponse().status in (200, 403)
        except OSError:
            return False
        finally:
            connection.close()

    @property
    def _marker(self) -> Path:
        return self._config

    @property
    def _server_log(self) -> Path:
        return self.log_file
