"""binlake land --format iceberg with a REST catalog (`--iceberg-catalog http://...`): Apache Iceberg's own
REST catalog server (its test server, from Maven Central), pyiceberg's RestCatalog writing through it, Spark
reading through it (Iceberg's REST catalog). Proof: every mirror equals the server's SELECT, read by Spark and
by pyiceberg; every change once in the change logs; a second run with nothing new commits nothing. With the
server behind a proxy that requires a bearer token: a bearer token or an OAuth2 client credential reaches it
(pyiceberg's and Spark's clients), none stops the job with one line."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import pytest
from pyiceberg.catalog.rest import RestCatalog

from streaming_job.iceberg.auth import RestAuth
from tests.harness.auth_proxy import AuthProxy
from tests.harness.binlogs import verbose_counts
from tests.harness.daemon import BINLAKE, run_daemon
from tests.harness.iceberg import catalog, pyiceberg_table
from tests.harness.land import assert_change_log, lake_frame, plain_rows, run_land
from tests.harness.workloads import kill_workload

pytestmark = pytest.mark.integration


def test_a_rest_catalog_keeps_the_tables(make_mariadb, kafka, iceberg_rest, spark, tmp_path) -> None:
    server = make_mariadb()
    db = "icerest"
    conn = kill_workload(server, db)
    run_daemon(server, kafka, db)
    lake = tmp_path / "lake"
    assert run_land(kafka, db, lake, "--format", "iceberg", "--iceberg-catalog", iceberg_rest.uri) == 0
    assert not (lake / "_iceberg_catalog.db").exists()  # no SQLite: the server's catalog
    rest = catalog(lake, iceberg_rest.uri)
    assert sorted(rest.list_tables(db)) == [(db, "a"), (db, "a__changes"), (db, "b"), (db, "b__changes")]
    snapshots = {t: len(rest.load_table((db, t)).snapshots()) for t in ("a", "a__changes", "b", "b__changes")}
    for table in ("a", "b"):
        df = lake_frame(spark, lake, db, table, "iceberg", iceberg_rest.uri)
        mirror = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
        assert mirror == plain_rows(conn, table, "id"), table
        read = pyiceberg_table(lake, db, table, iceberg_rest.uri).drop_columns(["_binlake_seq", "_binlake_commit_ts"])
        assert {(r["id"],): r for r in read.to_pylist()} == mirror, table
    server.flush_logs()
    assert_change_log(spark, lake, db, verbose_counts(server.binlog_files()[:-1], db), ["a", "b"], "iceberg",
                      iceberg_rest.uri)
    assert run_land(kafka, db, lake, "--format", "iceberg", "--iceberg-catalog", iceberg_rest.uri) == 0
    assert {t: len(rest.load_table((db, t)).snapshots()) for t in snapshots} == snapshots


def test_a_rest_catalog_that_requires_authentication(make_mariadb, kafka, iceberg_rest, spark, tmp_path) -> None:
    """The REST catalog server behind a proxy that refuses requests without an accepted bearer token (harness:
    auth_proxy.py): no credential stops the job with one line; a token from the environment, then an OAuth2
    client credential from a file (exchanged at the server's own token endpoint) land the tables; every request
    carried the token; Spark reads through the same catalog with the token; no secret in the job's output."""
    server = make_mariadb()
    db = "icerestauth"
    conn = kill_workload(server, db)
    run_daemon(server, kafka, db)
    token, client, secret = f"tok-{secrets.token_hex(8)}", "binlake-land", f"sec-{secrets.token_hex(8)}"
    issued = f"client-credentials-token:sub={client}"  # what the server's token endpoint gives the client
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    with AuthProxy(iceberg_rest.uri, {token, issued}) as proxy:
        def land(lake: Path, **extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*BINLAKE, "land", "--kafka", kafka.bootstrap, "--topic-prefix", db, "--lake",
                                   str(lake), "--checkpoint", str(lake / "_checkpoint"), "--format", "iceberg",
                                   "--iceberg-catalog", proxy.uri, "--trigger", "available-now"],
                                  env={**env, **extra}, capture_output=True, text=True, timeout=600)

        refused = land(tmp_path / "refused")
        errors = [line for line in refused.stderr.splitlines() if line.startswith("binlake: error:")]
        assert refused.returncode == 2 and len(errors) == 1, refused.stderr[-3000:]
        assert errors[0].startswith(f"binlake: error: cannot open the Iceberg catalog {proxy.uri}: "), errors[0]
        assert proxy.refused and proxy.seen[-1][1] not in (f"Bearer {token}", f"Bearer {issued}")  # ("Bearer None")

        lake = tmp_path / "lake"
        first = len(proxy.seen)
        done = land(lake, BINLAKE_LAND_ICEBERG_CATALOG_TOKEN=token)
        assert done.returncode == 0, done.stderr[-3000:]
        assert token not in done.stdout + done.stderr
        assert proxy.seen[first:] and {auth for _, auth in proxy.seen[first:]} == {f"Bearer {token}"}

        with conn.cursor() as cur:  # more changes, landed with the client credential
            cur.execute("UPDATE a SET v = 'credential' WHERE id < 20")
            cur.execute("INSERT INTO b VALUES (100001, 7)")
        conn.commit()
        run_daemon(server, kafka, db)
        (tmp_path / "credential").write_text(f"{client}:{secret}\n")
        first = len(proxy.seen)
        done = land(lake, BINLAKE_LAND_ICEBERG_CATALOG_CREDENTIAL_FILE=str(tmp_path / "credential"))
        assert done.returncode == 0, done.stderr[-3000:]
        assert secret not in done.stdout + done.stderr
        assert any(path.endswith("/oauth/tokens") for path, _ in proxy.seen[first:])  # the exchange
        assert {auth for path, auth in proxy.seen[first:] if not path.endswith("/oauth/tokens")} == {f"Bearer {issued}"}

        auth = RestAuth(token=token)
        rest = RestCatalog("binlake", uri=proxy.uri, token=token)  # pyiceberg, a reader of its own
        for table in ("a", "b"):
            read = rest.load_table((db, table)).scan().to_arrow().drop_columns(["_binlake_seq", "_binlake_commit_ts"])
            assert {(r["id"],): r for r in read.to_pylist()} == plain_rows(conn, table, "id"), table
            first = len(proxy.seen)
            df = lake_frame(spark, lake, db, table, "iceberg", proxy.uri, auth)
            mirror = {(r["id"],): {c: r[c] for c in df.columns if not c.startswith("_binlake")} for r in df.collect()}
            assert mirror == plain_rows(conn, table, "id"), table
            assert proxy.seen[first:] and {a for _, a in proxy.seen[first:]} == {f"Bearer {token}"}  # Spark's
