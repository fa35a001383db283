"""A starting daemon's wait for a source it cannot reach (daemon/preflight.start_checks, source.start_wait): tried
against a port nothing listens on, no server needed."""

from __future__ import annotations

import logging
import time

import pytest

from ingester.config import load_config
from ingester.devstack import free_tcp_port
from ingester.sources.errors import SourceUnreachable


def _config(wait: str):
    url = f"mysql://binlake@127.0.0.1:{free_tcp_port()}?tls=disabled"
    return load_config(None, environ={"BINLAKE_SOURCE": url, "BINLAKE_SOURCE_START_WAIT": wait}), url


def test_a_source_that_stays_away_is_tried_for_start_wait_then_one_line(caplog) -> None:
    from ingester.daemon.preflight import start_checks

    cfg, url = _config("1.6")
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="binlake.run"), pytest.raises(SourceUnreachable) as raised:
        start_checks(cfg, [url])
    took = time.monotonic() - began
    assert 1.5 <= took < 5, took
    assert str(raised.value).endswith("(tried for 1.6 s: source.start_wait)"), raised.value
    assert "cannot connect" in str(raised.value) and "2003" in str(raised.value), raised.value
    tries = [r.getMessage() for r in caplog.records if "trying again in" in r.getMessage()]
    assert len(tries) >= 2 and tries[0].endswith("trying again in 0.5 s (source.start_wait: 2 s left)"), tries


def test_no_wait_stops_at_once() -> None:
    from ingester.daemon.preflight import start_checks

    cfg, url = _config("0")
    began = time.monotonic()
    with pytest.raises(SourceUnreachable) as raised:
        start_checks(cfg, [url])
    assert time.monotonic() - began < 2
    assert "source.start_wait" not in str(raised.value)
