"""The README's main command runs end to end and agrees with the server."""

from __future__ import annotations

import orjson
import pytest

from ingester.cli.main import main

pytestmark = pytest.mark.integration


def test_demo_replays_to_the_servers_row_counts(tmp_path, capsys) -> None:
    out = tmp_path / "events.jsonl"
    assert main(["demo", "--customers", "300", "--orders", "2000", "--jsonl", str(out)]) == 0
    text = capsys.readouterr().out
    assert "MISMATCH" not in text
    assert text.count("  ok") == 2
    events = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert events[0]["type"] == "query" and "CREATE DATABASE" in events[0]["query"]  # Kafka holds no FDEs
    assert sum(len(e["rows"]) for e in events if e.get("table") == "orders" and e["type"] == "write_rows") == 2000
