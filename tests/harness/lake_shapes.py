"""Where a test's land job runs and its lake is: local[2] on local disk (in this process), or the production
shape, a Spark standalone cluster landing into a bucket of the session's object store (`binlake land` as
its own process). A test written once against a lake directory runs in both: a bucket's objects are files
of the store's directory, so the test reads the lake there (Spark, delta-rs) whichever wrote it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

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

    def __init__(self, store: Any, cluster: Any) -> None:
        self.store, self.cluster = store, cluster

    def lake(self, tmp_path: Path) -> Path:
        """A new prefix of the store's bucket "lake", as the store's directory holds it."""
        return self.store.data / "lake" / f"{tmp_path.name}-{uuid.uuid4().hex[:8]}"

    def uri(self, lake: Path) -> str:
        return "s3a://" + lake.relative_to(self.store.data).as_posix()

    def land(self, kafka: Any, prefix: str, lake: Path, *extra: str) -> int:
        """`binlake land --trigger available-now --master spark://...` into the bucket, as its own process; its
        stderr copied to this process's (the tests read both shapes' lines there)."""
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **self.store.environment()}
        done = subprocess.run([sys.executable, "-m", "ingester.cli.main", "land", "--kafka", kafka.bootstrap,
                               "--topic-prefix", prefix, "--lake", self.uri(lake), "--checkpoint",
                               self.uri(lake / "_checkpoint"), "--trigger", "available-now", "--master",
                               self.cluster.master, "--s3-endpoint", self.store.endpoint, "--s3-path-style", *extra],
                              env=env, capture_output=True, text=True, timeout=900, check=False)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode
