"""Initialized datadirs copied into new servers' datadirs: a test run starts a fresh MariaDB for most integration
tests, and `mariadb-install-db` takes ~2.5 s of the ~3 s a start takes where a copy of its 26 MB takes ~0.2 s.
Each test process initializes a datadir once per kind of server (the settings that shape what the installer
writes: InnoDB's, character sets, name case) and copies it afterwards; the copy is what the installer would have
written (no binary logs: the installer writes none)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ingester.devstack.mariadb import MariaDBServer

_SHAPING = ("innodb", "character_set", "collation", "lower_case")
_RUNTIME = ("my.cnf", "error.log")  # written per server: not the template's


class DatadirTemplates:
    def __init__(self) -> None:
        self._root: Path | None = None

    def initialize(self, kind: str, settings: dict[str, object], datadir: Path, install: Callable[[], None]) -> None:
        """``datadir`` made as ``install()`` makes it: from this process's template of the kind, or by ``install``
        (then kept as the template)."""
        shaping = sorted((k, str(v)) for k, v in settings.items() if k.startswith(_SHAPING))
        name = f"{kind}-{abs(hash(tuple(shaping))):x}"
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="binlake-datadirs-"))
            atexit.register(shutil.rmtree, self._root, True)
        template = self._root / name
        if template.is_dir():
            shutil.copytree(template, datadir, dirs_exist_ok=True)
            return
        install()
        staged = self._root / f".{name}"
        shutil.copytree(datadir, staged, ignore=shutil.ignore_patterns(*_RUNTIME))
        staged.rename(template)


TEMPLATES = DatadirTemplates()


class TemplateMariaDB(MariaDBServer):
    """MariaDBServer whose datadir is initialized from the test process's template."""

    def _initialize(self) -> None:
        TEMPLATES.initialize("mariadb", self._settings, self.datadir, super()._initialize)
