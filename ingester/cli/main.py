"""Entry point of the ``binlake`` console script: subcommands, and one-line errors."""

from __future__ import annotations

import argparse
import os
import sys

from ..codec.errors import BinlogError
from ..sources.replication import ReplicationError
from . import consume, demo, devstack, doctor, dump, land, run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="binlake", description="MySQL/MariaDB change data capture.")
    sub = parser.add_subparsers(dest="command", required=True)
    dump.add_parser(sub)
    demo.add_parser(sub)
    run.add_parser(sub)
    consume.add_parser(sub)
    land.add_parser(sub)
    devstack.add_parser(sub)
    doctor.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (BinlogError, ReplicationError) as exc:
        _flush_quietly()
        print(f"binlake: error: {exc}", file=sys.stderr)
        return 2
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


def _flush_quietly() -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
