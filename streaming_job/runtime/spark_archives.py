"""Spark's Python workers made cheaper per task (worker.py makes them cheaper to start).

Per task: before every task the worker calls ``importlib.invalidate_caches()``, and a Python 3.11 zip
importer answers that by reading its archive's whole listing again. A worker's ``sys.path`` holds
Spark's own archives (``pyspark.zip``, py4j's zip, Spark's core jar), each with an importer per
package path looked up in it: 16 importers, 0.2-0.4 s per task on our 2-CPU machine, most of a small
micro-batch's decode job. Spark's archives do not change while a worker lives, so their importers keep
the listing they read; any other archive (``--py-files``) is left as Python has it.
"""

from __future__ import annotations

import os
import sys
import zipimport


def keep_spark_archive_listings() -> None:
    """Called by the daemon and at the start of each mapInArrow function (importers created since)."""
    for finder in list(sys.path_importer_cache.values()):
        if (isinstance(finder, zipimport.zipimporter) and "invalidate_caches" not in vars(finder)
                and _spark_archive(finder.archive)):
            finder.invalidate_caches = _keep  # type: ignore[method-assign]


def _spark_archive(path: str) -> bool:
    name = os.path.basename(path)
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith("-src.zip")) or (
        name.startswith("spark-") and name.endswith(".jar"))


def _keep() -> None:
    """The archive's listing stays as read."""
