"""Where log lines go: binlake's own to stderr (text or JSON); the libraries' (the Kafka client, py4j, Spark's
JVM) to a log file unless ``--verbose``, so the terminal shows what binlake says and nothing else.

The file is ``<log_dir>/<command>.log`` (Python libraries) and ``<log_dir>/<command>-spark.log`` (the Spark
driver's JVM: log4j2), rotated at 10 MB, three kept; ``log_dir`` defaults to ~/.cache/binlake/logs.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from pathlib import Path

from ..config import Config

# the Python libraries whose lines are theirs, not binlake's: to the file unless verbose
LIBRARIES = ("kafka", "py4j", "pyspark")
_MAX_BYTES, _KEEP = 10 << 20, 3


class JsonFormatter(logging.Formatter):
    """Structured logs: one JSON object per line (time, level, logger, message)."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({"ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                           "logger": record.name, "message": record.getMessage()})


class StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, never to a stream since closed.

    A handler bound to the stderr of the moment outlives it when the CLI runs in-process (tests,
    notebooks): a later record, e.g. one py4j logs from a background thread, then fails as a logging error.
    """

    @property  # type: ignore[override]
    def stream(self):  # the base class' attribute
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def log_dir(cfg: Config) -> Path:
    return Path(cfg.log_dir).expanduser() if cfg.log_dir else Path.home() / ".cache" / "binlake" / "logs"


def setup_logging(cfg: Config, command: str) -> Path | None:
    """Root logging at INFO on stderr for binlake's lines; the libraries' to ``<log_dir>/<command>.log``
    (returned) unless ``cfg.verbose`` (then None: everything on stderr, py4j's per-call INFO aside)."""
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if cfg.log_format == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if cfg.verbose:
        _libraries_to([])
        return None
    directory = log_dir(cfg)
    path = directory / f"{command}.log"
    return path if libraries_to_file(path) else None


def libraries_to_file(path: Path) -> bool:
    """The libraries' lines to ``path`` (rotated) instead of the terminal; False (and a warning) where it
    cannot be written: they stay on stderr and binlake still runs."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.handlers.RotatingFileHandler(path, maxBytes=_MAX_BYTES, backupCount=_KEEP)
    except OSError as exc:
        logging.getLogger("binlake").warning("cannot write logs in %s (%s): the libraries' lines stay here",
                                             path.parent, exc.strerror or exc)
        return False
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    _libraries_to([to_file])
    return True


def _libraries_to(handlers: list[logging.Handler]) -> None:
    """The libraries' lines to ``handlers`` (none: up to the root's, i.e. stderr). The handlers they had are
    closed: a CLI run in-process again (tests, notebooks) leaves no file open per run."""
    for name in LIBRARIES:
        lib = logging.getLogger(name)
        for old in lib.handlers:
            if old not in handlers:
                old.close()
        lib.handlers = list(handlers)
        lib.propagate = not handlers
        if handlers:
            lib.setLevel(logging.WARNING)  # their INFO is a line per connection, metadata update or py4j call
