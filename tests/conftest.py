"""Fixtures for the database servers: private processes started by the test session, never a system
service, so the suite runs the same on a laptop and on a fresh CI machine."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ingester.devstack import MariaDBServer
from ingester.devstack.connect import APICURIO_CONVERTER, DEBEZIUM_JDBC_SINK, DEBEZIUM_MARIADB, KafkaConnect
from ingester.devstack.iceberg_rest import IcebergRestCatalog
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mysql import MySQLServer
from ingester.devstack.objectstore import ObjectStore
from ingester.devstack.registry import SchemaRegistry
from ingester.devstack.spark_cluster import SparkCluster
from tests.harness.cluster_lander import ClusterLander
from tests.harness.datadirs import TemplateMariaDB
from tests.harness.jvm_archive import TEST_JVM, driver_options
from tests.harness.lake_shapes import ClusterS3Shape, LocalShape
from tests.harness.land import store_env
from tests.harness.servers import MySQL84Server, docker_engine_available

# The servers started by ingester.devstack set their own JVM options; a cluster's master and workers read
# SPARK_DAEMON_JAVA_OPTS, the Spark drivers SPARK_SUBMIT_OPTS (tests/harness/jvm_archive.py). Set one of these
# variables to run the tests with other options.
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", TEST_JVM)


_OWN_DRIVER_OPTIONS = "SPARK_SUBMIT_OPTS" not in os.environ


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    """The Spark drivers' options, set before a pytest process's first integration test: they map the drivers'
    class-data archive, which scripts/test makes beside the fast lane's tests (they go first and start no driver);
    this waits for it, or makes it (once per machine and set of jars)."""
    if _OWN_DRIVER_OPTIONS and "SPARK_SUBMIT_OPTS" not in os.environ and item.get_closest_marker("integration"):
        os.environ["SPARK_SUBMIT_OPTS"] = driver_options(archive=True)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDBServer]:
    """The shared MariaDB (FULL row metadata, CRC32 checksums); give each test its own database."""
    with TemplateMariaDB(binlog_row_metadata="FULL", binlog_checksum="CRC32") as server:
        yield server


def _started(server: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """A fixture's factory of further servers (``server``'s keywords): they stop after the test."""
    with contextlib.ExitStack() as servers:
        yield lambda **options: servers.enter_context(server(**options))


@pytest.fixture
def make_mariadb() -> Iterator[Callable[..., MariaDBServer]]:
    """Start further servers with other settings (MariaDBServer's keywords); they stop after the test."""
    yield from _started(TemplateMariaDB)


@pytest.fixture(scope="session")
def mysql80() -> Iterator[MySQLServer]:
    """The shared Oracle MySQL 8.0 (its defaults: MINIMAL row metadata, CRC32 checksums; GTIDs on), started once per
    session; give each test its own database."""
    with MySQLServer() as server:
        yield server


@pytest.fixture
def make_mysql80() -> Iterator[Callable[..., MySQLServer]]:
    """Start further MySQL 8.0 servers with other settings (MySQLServer's keywords); they stop after the test."""
    yield from _started(MySQLServer)


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    """The shared Kafka broker (KRaft, one node); give each test its own topics and transactional ids."""
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture
def make_kafka() -> Iterator[Callable[..., KafkaBroker]]:
    """Start further brokers (KafkaBroker's keywords, e.g. a datadir to restart); they stop after the test."""
    yield from _started(KafkaBroker)


@pytest.fixture(scope="session")
def kafka_connect(kafka) -> Iterator[KafkaConnect]:
    """A Kafka Connect worker (standalone) on the shared broker, with Debezium's MariaDB connector and JDBC sink:
    an outside producer and an outside consumer of Debezium change events, and Apicurio's Avro converter."""
    with KafkaConnect(kafka.bootstrap, [DEBEZIUM_MARIADB, DEBEZIUM_JDBC_SINK, APICURIO_CONVERTER]) as worker:
        yield worker


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    """A schema registry (Apicurio Registry, Confluent-compatible API): for the Avro formats."""
    with SchemaRegistry() as registry:
        yield registry


@pytest.fixture(scope="session")
def mysql84() -> Iterator[MySQL84Server]:
    """MySQL 8.4 with GTIDs, in a container: there is no Debian package for it."""
    if not docker_engine_available():
        # The suite's only Docker-dependent skip: without an engine there is no way to run MySQL 8.4.
        pytest.skip("no Docker engine")
    with MySQL84Server() as server:
        yield server


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStore]:
    """One S3-compatible store (S3Proxy on a temporary directory) for the session, with a bucket "lake"."""
    with ObjectStore() as store:
        store.create_bucket("lake")
        yield store


@pytest.fixture(scope="session")
def iceberg_rest() -> Iterator[IcebergRestCatalog]:
    """Apache Iceberg's REST catalog test server (Maven Central) for the session: `land.iceberg_catalog`
    http://..."""
    with IcebergRestCatalog() as server:
        yield server


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """A Spark standalone cluster for the session: a master and a worker, separate JVMs, whose executors
    are processes of their own (2 cores)."""
    with SparkCluster(workers=1, cores=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def cluster_lander(object_store) -> Iterator[ClusterLander]:
    """`binlake land` runs into the object store's bucket from a standalone cluster of their own, served by one
    process that keeps its Spark application between runs (tests/harness/cluster_lander.py)."""
    with SparkCluster(workers=1, cores=2) as cluster:
        lander = ClusterLander(cluster.master, store_env(object_store))
        try:
            yield lander
        finally:
            lander.close()


@pytest.fixture
def lake_shape(request) -> LocalShape | ClusterS3Shape:
    """Where the land job runs and the lake is (parametrize with indirect=True): "local" (local[2], local disk,
    in this process) or "cluster-s3" (a standalone cluster, a bucket of the session's object store)."""
    if getattr(request, "param", "local") == "local":
        return LocalShape()
    return ClusterS3Shape(request.getfixturevalue("object_store"), request.getfixturevalue("cluster_lander"))


@pytest.fixture(scope="session")
def spark():
    """One local[2] session for the in-process runs and for reading the lake (jars fetched once)."""
    from streaming_job.land.job import build_session

    session = build_session("local[2]", 2, "binlake-land-tests", iceberg={})  # Iceberg's runtime: its tests read
    yield session
    session.stop()


# Fixtures that start a real server (or Spark): a test using one belongs to the integration lane.
SERVER_FIXTURES = frozenset(("mariadb", "make_mariadb", "mysql80", "make_mysql80", "kafka", "make_kafka", "mysql84",
                             "object_store",
                             "iceberg_rest",
                             "spark_cluster", "cluster_lander", "lake_shape", "spark", "kafka_connect",
                             "schema_registry"))


# Tests of servers heavy to start (each pytest-xdist worker starts its own: scripts/test) go first, so their long
# runs start early and the other tests fill in beside them.
HEAVY_FIXTURES = frozenset(("spark_cluster", "cluster_lander", "kafka_connect", "schema_registry", "iceberg_rest"))


def _heavy(item) -> bool:
    if getattr(getattr(item, "callspec", None), "params", {}).get("lake_shape") == "cluster-s3":
        return True
    return bool(HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config, items) -> None:
    """The fast lane (`-m "not integration"`) must need no server: a test that takes a server fixture
    without the integration mark is a collection error naming it. The fast lane's tests go first, then those of
    heavy servers."""
    unmarked = [item.nodeid for item in items if SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
                and not item.get_closest_marker("integration")]
    if unmarked:
        raise pytest.UsageError("tests that start servers must be marked integration: " + ", ".join(unmarked))
    # stable: the fast lane's tests first (beside the drivers' class-data archive being made: scripts/test), then
    # the heavy servers' tests, then the others, each in its order
    items.sort(key=lambda item: (item.get_closest_marker("integration") is not None, not _heavy(item)))
