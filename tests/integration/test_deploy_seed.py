"""The compose stack's SQL and workload on a real server: the init script's replication user passes
`binlake doctor`, and the seed workload writes what the pipeline is meant to carry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingester.cli.main import main
from tests.harness.servers import fresh_database

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_init_script_user_is_ready_to_replicate(mariadb, capsys) -> None:
    """deploy/mariadb/init's grants are exactly enough: doctor reports the server ready for that user."""
    with mariadb.connect() as conn:
        fresh_database(conn, "shop")
        with conn.cursor() as cur:
            cur.execute("DROP USER IF EXISTS 'binlake'@'%'")
            script = (REPO / "deploy/mariadb/init/01-binlake-user.sql").read_text()
            sql = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
            for statement in filter(str.strip, sql.split(";")):
                cur.execute(statement)
    password = (REPO / "deploy/compose/source-password").read_text().strip()
    capsys.readouterr()
    code = main(["doctor", "--source", f"mysql://binlake:{password}@127.0.0.1:{mariadb.port}?tls=disabled"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ok   privileges: replication and SELECT granted" in out


def test_seed_workload_writes_and_alters(mariadb) -> None:
    with mariadb.connect() as conn:
        fresh_database(conn, "seedtest")
    env = dict(os.environ, SEED_HOST="127.0.0.1", SEED_PORT=str(mariadb.port), SEED_USER=mariadb.user,
               SEED_PASSWORD=mariadb.password, SEED_DATABASE="seedtest", SEED_RATE="0", SEED_TRANSACTIONS="40",
               SEED_ALTER_EVERY="15")
    for _ in range(2):  # a restarted seed goes on where the schema is (CREATE IF NOT EXISTS, columns once)
        result = subprocess.run([sys.executable, str(REPO / "deploy/seed/seed.py")], env=env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "stopped after 40 transactions" in result.stdout
    rows = dict(mariadb.execute("SELECT 'customers', COUNT(*) FROM seedtest.customers UNION ALL "
                                "SELECT 'orders', COUNT(*) FROM seedtest.orders"))
    assert rows["customers"] >= 8 and rows["orders"] >= 70
    columns = {r[0] for r in mariadb.execute("SELECT column_name FROM information_schema.columns "
                                             "WHERE table_schema = 'seedtest' AND table_name = 'customers'")}
    assert {"tier1", "tier2"} <= columns
