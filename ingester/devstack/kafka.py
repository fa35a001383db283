"""A private Apache Kafka broker in KRaft mode, for tests and local development.

The broker runs from Kafka's Maven Central jars (fetched once into the binlake cache, see maven.py) as
one JVM that is both controller and broker, listens on 127.0.0.1 only and keeps everything, its
configuration and log included, in its own datadir: no Docker, no Kafka distribution, no ZooKeeper.
"""

from __future__ import annotations

import base64
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from kafka import KafkaAdminClient
from kafka.errors import RetriableError

from ingester.devstack.process import PortTaken, ServerProcess, die_with_parent, free_tcp_port, tail
from ingester.maven import fetch_classpath, find_java

KAFKA_VERSION = "4.3.1"
# Kafka 4.x logs through slf4j 1.7 and ships log4j-core without the binding between the two; this is
# the binding for the log4j release Kafka 4.3.1 depends on.
LOG4J_SLF4J_BINDING = "org.apache.logging.log4j:log4j-slf4j-impl:2.25.4"
_HEAP = "512m"
_NODE_ID = 1
_BIND_FAILURE = re.compile(r"failed to bind to \S*:(\d+)")


def kafka_classpath(version: str = KAFKA_VERSION) -> list[Path]:
    """The jars that run a Kafka broker of this version, downloaded on first use only."""
    return fetch_classpath([f"org.apache.kafka:kafka_2.13:{version}", LOG4J_SLF4J_BINDING])


class KafkaBroker(ServerProcess):
    """A single-node Kafka (combined broker and controller) on 127.0.0.1, in a temporary or a given datadir.

    Without a datadir it uses a temporary one that close() (or leaving the with block) removes. A given
    datadir is formatted on first start and reused afterwards, so topics and records survive restarts,
    and a second instance on that datadir can stop() a broker another process started with detach=True.
    Internal topics (offsets, transactions) have one replica and one partition, so transactions and
    consumer groups work on the single node and start quickly.
    """

    what = "Kafka broker"

    host = "127.0.0.1"

    def __init__(
        self,
        datadir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        *,
        version: str = KAFKA_VERSION,
        options: Mapping[str, object] | None = None,
        extra_listeners: Mapping[str, int] | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        """options adds or overrides server.properties settings; None drops one. extra_listeners adds
        listeners beside PLAINTEXT, by security protocol and port (e.g. SASL_SSL: TLS and SASL settings
        go in options)."""
        self.extra_listeners = dict(extra_listeners or {})
        self._temporary = datadir is None
        self._datadir = Path(datadir if datadir is not None else tempfile.mkdtemp(prefix="binlake-kafka-"))
        self._datadir = self._datadir.absolute()
        self._fixed_port = port is not None
        self._port = port if port is not None else free_tcp_port()
        self._controller_port = free_tcp_port()
        self._version = version
        self._settings: dict[str, object] = {
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "min.insync.replicas": 1,
            "num.partitions": 1,
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": 0,
            # Small segments and cleaner buffer suit test data and the small heap.
            "log.segment.bytes": 16 << 20,
            "log.cleaner.dedupe.buffer.size": 16 << 20,
            "num.network.threads": 2,
            "num.io.threads": 2,
            **(options or {}),
        }
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap(self) -> str:
        """host:port for the clients' bootstrap_servers."""
        return f"{self.host}:{self._port}"

    @property
    def datadir(self) -> Path:
        return self._datadir

    @property
    def config_file(self) -> Path:
        return self._datadir / "server.properties"

    @property
    def log_file(self) -> Path:
        """The broker's own log (stdout and stderr of the JVM), appended to across restarts."""
        return self._datadir / "kafka.log"

    @property
    def _log_dir(self) -> Path:
        """Kafka's log.dirs: the topics' partitions and the KRaft metadata log."""
        return self._datadir / "data"

    @property
    def _log4j_config(self) -> Path:
        return self._datadir / "log4j2.properties"

    @property
    def _pid_file(self) -> Path:
        return self._datadir / "kafka.pid"

    def start(self, *, detach: bool = False) -> Self:
        """Format the datadir if needed, launch the broker and wait until it serves clients on its port.

        The first start of a version downloads its jars (tens of MB, via mvn). detach=True lets the
        broker outlive this process (for a devstack command); otherwise Linux stops it when this process
        dies, so even a killed test run leaves no stray broker.
        """
        self._refuse_second()
        java = find_java()
        classpath = os.pathsep.join(str(jar) for jar in kafka_classpath(self._version))
        self._datadir.mkdir(parents=True, exist_ok=True)
        retries = 2
        while True:
            self._write_config()
            if not (self._log_dir / "meta.properties").exists():
                self._format(java, classpath)
            try:
                self._launch(java, classpath, detach)
                return self
            except PortTaken as taken:
                if retries == 0 or (self._fixed_port and taken.port == self._port):
                    raise
                retries -= 1
                self._controller_port = free_tcp_port()
                if not self._fixed_port:
                    self._port = free_tcp_port()

    def admin(self, **config: Any) -> KafkaAdminClient:
        """A kafka-python admin client for this broker (the caller closes it); keywords are its config."""
        return KafkaAdminClient(**({"bootstrap_servers": self.bootstrap} | config))

    def create_topic(self, name: str, partitions: int = 1, *, compacted: bool = False) -> None:
        """Create a topic and wait until every partition has a leader, so clients can use it at once."""
        topic: dict[str, object] = {"num_partitions": partitions, "replication_factor": 1}
        if compacted:
            topic["configs"] = {"cleanup.policy": "compact"}
        with self.admin() as admin:
            admin.create_topics({name: topic}, wait_for_metadata=True)

    def _write_config(self) -> None:
        """Write server.properties from scratch on every start (ports may change, options always win)."""
        extra = "".join(f",{name}://{self.host}:{port}" for name, port in self.extra_listeners.items())
        listeners = f"PLAINTEXT://{self.host}:{self._port},CONTROLLER://{self.host}:{self._controller_port}{extra}"
        settings: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": _NODE_ID,
            # A static quorum: the one voter is this process, wherever its controller port is today.
            "controller.quorum.voters": f"{_NODE_ID}@{self.host}:{self._controller_port}",
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self._port}{extra}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
            + "".join(f",{name}:{name}" for name in self.extra_listeners),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": self._log_dir,
            **self._settings,
        }
        self.config_file.write_text("".join(f"{key}={value}\n" for key, value in settings.items() if value is not None))
        # Everything to stdout, which goes to log_file; the config dumps are long and tell little.
        self._log4j_config.write_text(
            "appender.out.type=Console\n"
            "appender.out.name=out\n"
            "appender.out.layout.type=PatternLayout\n"
            "appender.out.layout.pattern=[%d] %p %m (%c)%n\n"
            "rootLogger.level=INFO\n"
            "rootLogger.appenderRef.out.ref=out\n"
            "logger.config.name=org.apache.kafka.common.config.AbstractConfig\n"
            "logger.config.level=WARN\n"
        )

    def _jvm(self, java: Path, classpath: str) -> list[str]:
        # C1 only (TieredStopAtLevel=1) starts the broker about 0.7 s sooner; test loads need no C2.
        return [
            str(java),
            f"-Xmx{_HEAP}",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={self._log4j_config}",
            "-cp",
            classpath,
        ]

    def _format(self, java: Path, classpath: str) -> None:
        """Write meta.properties and the bootstrap metadata under a new cluster id (KRaft's `format`)."""
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        result = subprocess.run(
            [
                *self._jvm(java, classpath),
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",  # an id may start with "-": as a separate word it reads as an option
                "--config",
                str(self.config_file),
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"formatting {self._log_dir} for Kafka {self._version} failed (exit {result.returncode}):\n"
                f"{tail(result.stdout + result.stderr)}"
            )

    def _cluster_id(self) -> str:
        for line in (self._log_dir / "meta.properties").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cluster.id":
                return value.strip()
        raise RuntimeError(f"no cluster.id in {self._log_dir / 'meta.properties'}")

    def _launch(self, java: Path, classpath: str, detach: bool) -> None:
        log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self._proc = subprocess.Popen(
                [*self._jvm(java, classpath), "kafka.Kafka", str(self.config_file)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=detach,
                preexec_fn=die_with_parent if not detach and sys.platform == "linux" else None,
            )
        self._pid_file.write_text(f"{self._proc.pid}\n")
        try:
            self._wait_ready(self._proc, log_offset)
        except BaseException:
            self.stop()  # whatever went wrong (or Ctrl-C), no half-started broker stays behind
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes], log_offset: int) -> None:
        deadline = time.monotonic() + self._start_timeout
        cluster_id = self._cluster_id()
        while not self._serves_our_cluster(cluster_id):
            if (code := proc.poll()) is not None:
                log = self._log_since(log_offset)
                message = (
                    f"Kafka exited with code {code} before serving {self.bootstrap}; end of {self.log_file}:\n{log}"
                )
                if "Address already in use" in log and (bind := _BIND_FAILURE.search(log)):
                    raise PortTaken(message, int(bind.group(1)))
                raise RuntimeError(message)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Kafka did not serve {self.bootstrap} within {self._start_timeout:g}s; "
                    f"end of {self.log_file}:\n{self._log_since(log_offset)}"
                )
            time.sleep(0.1)

    def _serves_our_cluster(self, cluster_id: str) -> bool:
        """Whether our port answers with our cluster id and an unfenced broker (one that can lead
        partitions): a foreign broker that grabbed the port must not pass for ours."""
        try:
            socket.create_connection((self.host, self._port), timeout=1).close()
        except OSError:
            return False  # not listening yet: spare kafka-python's connection-error logging
        try:
            with self.admin(bootstrap_timeout_ms=1000, request_timeout_ms=2000) as admin:
                cluster = admin.describe_cluster()
        except RetriableError:  # timeouts and connection errors: not serving yet
            return False
        return cluster["cluster_id"] == cluster_id and any(
            broker["broker_id"] == _NODE_ID and not broker.get("is_fenced") for broker in cluster["brokers"]
        )

    @property
    def _marker(self) -> Path:
        return self.config_file

    @property
    def _server_log(self) -> Path:
        return self.log_file
