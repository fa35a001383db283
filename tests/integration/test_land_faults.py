"""``binlake land`` when its storage fails: the lake and checkpoint on a small tmpfs, made read-only, then
full. The job stops with one line naming the path, loses nothing already committed, and once the storage
is fixed lands everything: each mirror equals the server's SELECT."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingester.cli.main import main
from tests.harness.daemon import run_daemon
from tests.harness.land import mirror_rows, plain_rows

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def _small_filesystem(path: Path, size: str) -> Iterator[bool]:
    """A tmpfs of ``size`` at ``path`` (True) when this process may mount one (root), else a plain directory
    (False): then only chmod can make it read-only."""
    path.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                                    str(path)], capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=True)


def _read_only(path: Path, mounted: bool, on: bool) -> None:
    if mounted:
        subprocess.run(["mount", "-o", f"remount,{'ro' if on else 'rw'}", str(path)], check=True)
    else:
        for d in [path, *(p for p in path.rglob("*") if p.is_dir())]:
            d.chmod(0o555 if on else 0o755)


def _land(kafka, prefix: str, root: Path) -> int:
    return main(["land", "--kafka", kafka.bootstrap, "--topic-prefix", prefix, "--lake", str(root / "lake"),
                 "--checkpoint", str(root / "checkpoint"), "--trigger", "available-now"])


def test_read_only_and_full_lake_stop_with_the_path_and_resume(make_mariadb, kafka, spark, tmp_path,
                                                               capsys) -> None:
    server, db = make_mariadb(), "landfull"
    prefix, root = db, tmp_path / "store"
    for sql in (f"CREATE DATABASE {db} CHARACTER SET utf8mb4", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v TEXT)",
                f"INSERT INTO {db}.t VALUES " + ",".join(f"({i}, 'first {i}')" for i in range(200))):
        server.execute(sql)
    conn = server.connect(db)
    run_daemon(server, kafka, prefix)
    with _small_filesystem(root, "64m") as mounted:
        assert _land(kafka, prefix, root) == 0
        landed, _ = mirror_rows(spark, root / "lake", db, "t")
        assert landed == plain_rows(conn, "t", "id")

        with conn.cursor() as cur:  # more to land while the storage is read-only
            cur.execute("UPDATE t SET v = 'second' WHERE id < 50")
            cur.execute("INSERT INTO t VALUES " + ",".join(f"({i}, 'x')" for i in range(200, 300)))
        run_daemon(server, kafka, prefix)
        _read_only(root, mounted, True)
        capsys.readouterr()
        try:
            assert _land(kafka, prefix, root) == 2
        finally:
            _read_only(root, mounted, False)
        err = capsys.readouterr().err.strip().splitlines()
        assert str(root) in err[-1] and "Traceback" not in "\n".join(err), err[-1]
        assert "Read-only file system" in err[-1] or "Permission denied" in err[-1], err[-1]
        assert mirror_rows(spark, root / "lake", db, "t")[0] == landed  # what was committed is intact

        if mounted:  # disk full: fill the tmpfs, then free it
            with conn.cursor() as cur:
                cur.execute("UPDATE t SET v = REPEAT('y', 200) WHERE id >= 100")
            run_daemon(server, kafka, prefix)
            filler = root / "filler"
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=100"], capture_output=True)
            capsys.readouterr()
            assert _land(kafka, prefix, root) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert err[-1].startswith(f"binlake: error: cannot write {root}/"), err[-1]
            assert "No space left on device" in err[-1] and "Traceback" not in "\n".join(err), err[-1]
            filler.unlink()
        assert _land(kafka, prefix, root) == 0
        assert mirror_rows(spark, root / "lake", db, "t")[0] == plain_rows(conn, "t", "id")
