"""The package's layers, read from the source's imports (every import, also inside functions): a lower layer
never imports a higher one. Shared helpers are leaf modules any layer may use. Likewise for the tests: no
module imports a test module (their shared helpers are tests/harness/)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# lowest first; a module may import its own layer, lower ones, and the leaves
LAYERS = [
    ["ingester.codec"],
    ["ingester.config"],  # the typed configuration: every layer above may take it
    ["ingester.schema", "ingester.records"],
    ["ingester.sources"],
    ["ingester.dump", "ingester.daemon", "streaming_job"],
    ["ingester.devstack"],
    ["ingester.cli"],
]
LEAVES = {"ingester.redact", "ingester.registry_client", "ingester.column_rules", "ingester.maven",
          "ingester.extensions", "ingester"}
# the spark-submit entry point runs the CLI's `land` (deploy/, Dockerfile.spark): a top-level script
TOP_LEVEL_SCRIPTS = {"streaming_job.main"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, module: str) -> set[str]:
    """Every module and name the file imports (``from a import b``: ``a`` and ``a.b``), absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            out |= {name} | {f"{name}.{a.name}" for a in node.names}
    return out


def _imports(path: Path, module: str) -> set[str]:
    return {n for n in _imported(path, module) if n.split(".")[0] in ("ingester", "streaming_job")}


def _layer(name: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def test_no_module_imports_a_higher_layer() -> None:
    wrong = []
    for path in sorted([*ROOT.glob("ingester/**/*.py"), *ROOT.glob("streaming_job/**/*.py")]):
        module = _module(path)
        own = _layer(module)
        if module in LEAVES or module in TOP_LEVEL_SCRIPTS or own is None:
            continue
        for name in sorted(_imports(path, module)):
            target = _layer(name)
            if name not in LEAVES and target is not None and target > own:
                wrong.append(f"{module} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_leaves_import_no_layer() -> None:
    for leaf in LEAVES - {"ingester"}:
        path = ROOT / (leaf.replace(".", "/") + ".py")
        imported = {n for n in _imports(path, leaf) if _layer(n) is not None and not n.startswith("ingester.codec")}
        assert not imported, (leaf, imported)


def test_no_module_imports_a_test_module() -> None:
    """What tests share lives in tests/harness/ (fixtures in conftest.py): no module of the tests, the bench or
    the fuzzers imports a test module (test_*.py), whose helpers would become an interface of another test."""
    wrong = []
    for path in sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("bench/**/*.py"), *ROOT.glob("fuzz/**/*.py")]):
        module = _module(path)
        for name in sorted(_imported(path, module)):
            target = ROOT / (name.replace(".", "/") + ".py")
            if target.name.startswith("test_") and target.is_file():
                wrong.append(f"{module} imports {name}")
    assert not wrong, "\n".join(wrong)
