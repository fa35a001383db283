"""The C extensions behind the Python reference paths (dump/_native.c, records/_router.c).

Both are optional at run time: BINLAKE_PURE_PYTHON=1, or an install without a compiler, leaves the
Python code, which produces the same output, to do the work.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(module: str) -> ModuleType | None:
    """The extension ``module``, unless BINLAKE_PURE_PYTHON is set or it is not built."""
    if os.environ.get("BINLAKE_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
