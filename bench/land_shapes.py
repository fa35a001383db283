"""Where the land benchmarks' jobs run and their lakes are: local[2] and local disk, or the production shape, a
Spark standalone cluster (started for the run) landing into a bucket of an S3-compatible store (S3Proxy)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Shape:
    """Where the jobs run and the lakes are: local[2] and local disk, or a cluster and a bucket."""

    name: str = "local"
    master: str = "local[2]"
    bucket_root: Path | None = None  # the store's directory of the lakes' bucket prefix (cluster-s3)
    land_args: list[str] = field(default_factory=list)  # binlake land's options for it
    store_args: list[str] = field(default_factory=list)  # those of them that reach the lake's store
    env: dict[str, str] = field(default_factory=dict)
    store_pid: int | None = None  # the object store's process (its CPU time shares the machine's cores)
    endpoint: str | None = None  # the object store's (cluster-s3)

    def store_cpu(self) -> float:
        """The store's CPU seconds so far (user + system; 0 without a store)."""
        if self.store_pid is None:
            return 0.0
        fields = Path(f"/proc/{self.store_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def lake(self, local: Path) -> str:
        """The lake the job writes for a run whose files would be ``local`` on local disk."""
        return str(local) if self.bucket_root is None else f"s3a://lake/{self.bucket_root.name}/{local.name}"

    def checkpoint(self, local: Path, lake_format: str) -> str:
        """The checkpoint of the run whose lake is ``local``'s: in the lake, but for an Iceberg lake in a bucket,
        whose default (SQLite) catalog lives beside a local checkpoint (docs/LAND.md, "Iceberg")."""
        if self.bucket_root is not None and lake_format == "iceberg":
            return str(local.parent / f"{local.name}_checkpoint")
        return f"{self.lake(local)}/_checkpoint"

    def iceberg(self, local: Path) -> Any:
        """The Iceberg catalog of the run whose lake is ``local``'s, as pyiceberg opens it."""
        from streaming_job.iceberg.catalog import IcebergCatalog
        from streaming_job.lake.object_store import ObjectStoreSettings

        if self.bucket_root is None:
            return IcebergCatalog(str(local)).open()
        return IcebergCatalog(self.lake(local), None, ObjectStoreSettings(self.endpoint, True),
                              self.checkpoint(local, "iceberg")).open()

    def files(self, local: Path) -> Path:
        """Where that lake's files are read back (the store's objects are files of its directory)."""
        return local if self.bucket_root is None else self.bucket_root / local.name


@contextlib.contextmanager
def shape_of(name: str) -> Iterator[Shape]:
    if name == "local":
        yield Shape()
        return
    from ingester.devstack.objectstore import ObjectStore
    from ingester.devstack.spark_cluster import SparkCluster

    with ObjectStore() as store, SparkCluster(workers=1, cores=2) as cluster:
        store.create_bucket("lake")
        root = store.data / "lake" / f"bench{os.getpid()}"
        reach = ["--s3-endpoint", store.endpoint, "--s3-path-style"]
        yield Shape(name, cluster.master, root, ["--master", cluster.master, *reach], reach, store.environment(),
                    store._server_pid(), store.endpoint)
