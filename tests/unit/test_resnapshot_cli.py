"""``binlake snapshot`` refuses bad arguments with one line, before connecting anywhere."""

from __future__ import annotations

import pytest

from ingester.cli.main import main
from ingester.daemon.resnapshot import quoted
from ingester.daemon.table_reader import SnapshotError


def test_signal_table_names_are_quoted_and_checked() -> None:
    assert quoted("bin`lake.sig nal") == "`bin``lake`.`sig nal`"
    with pytest.raises(SnapshotError, match=r"snapshot_signal_table: must be <db>\.<table>, got 'signal'"):
        quoted("signal")


@pytest.mark.parametrize(("args", "message"), [
    (["--tables", "db.t"], "no signal table"),
    (["--signal-table", "b.s", "--tables", "t1"], "--tables must list db.table names"),
])
def test_bad_arguments(args: list[str], message: str, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BINLAKE_SNAPSHOT_SIGNAL_TABLE", raising=False)
    assert main(["snapshot", "--source", "mysql://u@127.0.0.1:1", *args]) == 2
    assert message in capsys.readouterr().err
