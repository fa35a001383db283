"""Entry point of the ``binlake`` console script: subcommands, and one-line errors."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..codec.errors import BinlogError
from ..config import ConfigError
from ..sources.errors import ReplicationError

COMMANDS = ("dump", "demo", "run", "snapshot", "consume", "land", "devstack", "doctor", "status", "verify")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of ``only``: the others' modules (Kafka, YAML, ...) take
    tens of milliseconds to import, which short `binlake dump` runs would pay for nothing."""
    parser = argparse.ArgumentParser(prog="binlake", description="MySQL/MariaDB change data capture.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        if only in (None, name):
            importlib.import_module(f"{__package__}.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    try:
        return args.run(args)
    except (BinlogError, ReplicationError, ConfigError) as exc:
        return _error(exc)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error; keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        _flush_quietly()
        print(f"binlake: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if not _refused(exc):
            raise
        return _error(exc)


def _error(exc: Exception) -> int:
    _flush_quietly()
    print(f"binlake: error: {exc}", file=sys.stderr)
    return 2


def _refused(exc: Exception) -> bool:
    """A schema registry's refusal (a setting or DDL to fix): its HTTP client is imported only by those who use
    it (~10 ms of every start), so nothing else can have raised one."""
    registry = sys.modules.get("ingester.registry_client")
    return registry is not None and isinstance(exc, registry.SchemaRefused)


def _flush_quietly() -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
