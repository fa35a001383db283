"""spark-submit entry point: the same options as ``binlake land``; the cluster's master is used.

    spark-submit --jars <the jars `python -m streaming_job.runtime.versions` prints> streaming_job/main.py \\
        --kafka broker:9092 --topic-prefix binlake --lake s3a://lake --checkpoint s3a://lake/_checkpoint
"""

from __future__ import annotations

import argparse
import sys

from ingester.cli.land import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streaming_job/main.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv), master_from_config=False)


if __name__ == "__main__":
    sys.exit(main())
