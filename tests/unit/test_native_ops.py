"""The C modules' opcode enums, exported by name, equal the Python copies that build their plans (a new op
added on one side only, or ops reordered, fails here instead of mis-decoding columns)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(("extension", "python"), [("ingester.codec._columns", "streaming_job.decode.arrow_rows"),
                                                   ("ingester.dump._native", "ingester.dump.native"),
                                                   ("ingester.records.debezium._native",
                                                    "ingester.records.debezium.native")])
def test_python_opcodes_equal_the_c_enum(extension: str, python: str) -> None:
    c = importlib.import_module(extension)  # built by scripts/bootstrap (CI) or setup.py build_ext
    py = importlib.import_module(python)
    exported = {name: getattr(c, name) for name in dir(c) if name.startswith("OP_") and name != "OP_LAST"}
    copied = {name: getattr(py, name) for name in dir(py) if name.startswith("OP_")}
    assert len(exported) >= 14 and copied == exported
