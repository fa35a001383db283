"""The README's first command runs the whole pipeline, and its mirrors equal the server's SELECT.

The demo runs in this process with a small workload and ``--keep``; the test then compares every
column of every mirror row with what the server itself returns (values computed by the server:
CAST, DATE_FORMAT, UNIX_TIMESTAMP, HEX), and stops the kept stack with ``binlake devstack down``.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest

from ingester.cli.main import main
from ingester.devstack.kafka import KafkaBroker
from ingester.devstack.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

# Per table: column -> the server's expression for the value the mirror must hold.
SERVER = {
    "customers": {
        "id": "id", "name": "name", "email": "email", "country": "country", "balance": "CAST(balance AS CHAR)",
        "vip": "vip", "signed_up": "DATE_FORMAT(signed_up, '%Y-%m-%d %H:%i:%s.%f')", "tags": "tags",
        "notes": "notes", "loyalty_points": "loyalty_points",
    },
    "orders": {
        "id": "id", "customer_id": "customer_id", "status": "status", "total": "CAST(total AS CHAR)",
        "weight_kg": "weight_kg", "placed_at": "ROUND(UNIX_TIMESTAMP(placed_at) * 1000000)",
        "ship_date": "CAST(ship_date AS CHAR)", "payload": "payload", "receipt": "HEX(receipt)",
    },
}


def _lake_value(column: str, value: Any) -> Any:
    """A mirror value (as Spark collects it) in the server expression's representation."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return int(value) if column == "id" else format(value, "f")
    if column == "signed_up":
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if column == "ship_date":
        return value.isoformat()
    if column == "payload":
        return json.loads(value)
    if column == "receipt":
        return bytes(value).hex().upper()
    return value


def _server_value(column: str, value: Any) -> Any:
    if value is None:
        return None
    if column == "payload":
        return json.loads(value)
    if column == "placed_at":
        return int(value)
    return value


def test_demo_lands_mirrors_equal_to_the_servers_select(tmp_path: Path, capsys, spark) -> None:
    """(``spark``: the tests' session is started first, with Iceberg's runtime on its JVM's classpath; the demo's
    in-process land shares it, as the later tests do: a JVM the demo started would lack those jars.)"""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    base = tmp_path / "demo"
    try:
        assert main(["demo", "--customers", "300", "--orders", "2000", "--updates", "40", "--dir", str(base),
                     "--keep"]) == 0
        out = capsys.readouterr().out
        assert re.search(r"customers +251 +251  yes", out), out
        assert "orders" in out and "differ" not in out
        url = re.search(r"MYSQL_URL=mysql://root@127\.0\.0\.1:(\d+)", out)
        assert url, out

        spark = SparkSession.builder.getOrCreate()  # the demo's session
        conn = pymysql.connect(host="127.0.0.1", port=int(url.group(1)), user="root", database="shop")
        for table, exprs in SERVER.items():
            with conn.cursor() as cur:
                cur.execute(f"SELECT {', '.join(exprs.values())} FROM {table}")
                server = {r[0]: {c: _server_value(c, v) for c, v in zip(exprs, r, strict=True)}
                          for r in cur.fetchall()}
            df = spark.read.format("delta").load(str(base / "lake" / "shop" / table))
            cols = [F.unix_micros(F.col(c)).alias(c) if c == "placed_at" else F.col(c) for c in exprs]
            mirror = {int(r["id"]): {c: _lake_value(c, v) for c, v in r.asDict().items()}
                      for r in df.select(*cols).collect()}
            assert len(server) > 200, table
            diff = [(k, c, server[k][c], mirror.get(k, {}).get(c)) for k in server for c in exprs
                    if mirror.get(k, {}).get(c) != server[k][c]]
            assert not diff and mirror.keys() == server.keys(), f"{table}: {len(diff)} differences: {diff[:5]}"
        conn.close()
    finally:
        assert main(["devstack", "down", "--dir", str(base)]) == 0
    assert not MariaDBServer(datadir=base / "mariadb").is_running()
    assert not KafkaBroker(datadir=base / "kafka").is_running()
