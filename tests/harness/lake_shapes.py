"""Where a test's land job runs and its lake is: local[2] on local disk (in this process), or the production
shape, a Spark standalone cluster landing into a bucket of the session's object store (`binlake land`'s own
main in a process that keeps its Spark application between runs: cluster_lander.py). A test written once
against a lake directory runs in both: a bucket's objects are files of the store's directory, so the test
reads the lake there (Spark, delta-rs) whichever wrote it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.harness.cluster_lander import ClusterLander
from tests.harness.land import run_land


class LocalShape:
    name = "local"

    def lake(self, tmp_path: Path) -> Path:
        return tmp_path / "lake"

    def land(self, kafka: Any, prefix: str, lake: Path, *extra: str) -> int:
        """`binlake land --trigger available-now` in this process (its output to this process's streams)."""
        return run_land(kafka, prefix, lake, *extra)


class ClusterS3Shape:
    name = "cluster-s3"

    def __init__(self, store: Any, lander: ClusterLander) -> None:
        self.store, self.lander = store, lander

    def lake(self, tmp_path: Path) -> Path:
        """A new prefix of the store's bucket "lake", as the store's directory holds it."""
        return self.store.data / "lake" / f"{tmp_path.name}-{uuid.uuid4().hex[:8]}"

    def uri(self, lake: Path) -> str:
        return "s3a://" + lake.relative_to(self.store.data).as_posix()

    def land(self, kafka: Any, prefix: str, lake: Path, *extra: str) -> int:
        """`binlake land --trigger available-now --master spark://...` into the bucket, run by the session's
        ClusterLander (a Spark application on a cluster of its own, kept between runs); its output copied to
        this process's stderr (the tests read both shapes' lines there)."""
        return self.lander.land(["land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake",
                                 self.uri(lake), "--checkpoint", self.uri(lake / "_checkpoint"), "--trigger",
                                 "available-now", "--master", self.lander.master, "--s3-endpoint",
                                 self.store.endpoint, "--s3-path-style", *extra])
