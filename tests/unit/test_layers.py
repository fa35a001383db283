"""The package's layers, read from the source's imports (every import, also inside functions): a lower layer
never imports a higher one. Shared helpers are leaf modules any layer may use. Likewise for the tests: no
module imports a test module (their shared helpers are tests/harness/)."""

from __future__ import annotations

import ast
import itertools
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


# streaming_job's packages by concern (docs/LAND.md, "The code"): its only top-level modules are the package and
# the spark-submit entry point; every other module lives in a package
JOB = ROOT / "streaming_job"


def _job_modules() -> dict[str, Path]:
    return {_module(p): p for p in sorted(JOB.glob("**/*.py"))}


def _job_package(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "streaming_job" and (JOB / parts[1]).is_dir() else None


def _job_package_imports() -> dict[tuple[str, str], set[str]]:
    """(importer's package, imported package) -> the imports that make the edge, every import counted."""
    edges: dict[tuple[str, str], set[str]] = {}
    for module, path in _job_modules().items():
        source = _job_package(module)
        if source is None:
            continue
        for name in _imports(path, module):
            target = _job_package(name)
            if target is not None and target != source:
                edges.setdefault((source, target), set()).add(f"{module} imports {name}")
    return edges


def test_streaming_job_modules_live_in_packages() -> None:
    top = {p.name for p in JOB.glob("*.py")}
    assert top == {"__init__.py", "main.py"}, top
    for package in (p for p in JOB.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (package / "__init__.py").is_file(), package


def _module_level_imports(path: Path) -> set[str]:
    """What a module imports when it is imported: every import outside a function's body."""
    out: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and not child.level:
                out.add(child.module or "")
            walk(child)

    walk(ast.parse(path.read_text()))
    return out


def test_decode_never_imports_pyspark_at_module_level() -> None:
    """decode/ runs on the executors (mapInArrow) and in the workers' daemon: importing it costs no pyspark.sql
    (pyspark only inside the functions that need it)."""
    wrong = [f"{module} imports {name}" for module, path in _job_modules().items()
             if _job_package(module) == "decode" or module == "streaming_job.decode"
             for name in sorted(_module_level_imports(path)) if name.split(".")[0] == "pyspark"]
    assert not wrong, "\n".join(wrong)


def test_delta_and_iceberg_never_import_each_other() -> None:
    edges = _job_package_imports()
    wrong = sorted(edges.get(("delta", "iceberg"), set()) | edges.get(("iceberg", "delta"), set()))
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_between_streaming_job_packages() -> None:
    """The packages' imports (every import, also inside functions and under TYPE_CHECKING) form no cycle."""
    edges = _job_package_imports()
    graph: dict[str, set[str]] = {}
    for (a, b) in edges:
        graph.setdefault(a, set()).add(b)
    done: set[str] = set()

    def cycle(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            found = cycle(nxt, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for package in sorted(graph):
        found = cycle(package, [])
        assert not found, " -> ".join(found) + "\n" + "\n".join(
            sorted(i for a, b in itertools.pairwise(found) for i in edges[(a, b)]))


def test_the_lander_names_no_delta_part() -> None:
    """The micro-batch's Lander (land/sink.py, land/sink_parks.py) is format-neutral: it asks land/formats.py's
    make_format for the lake's format, which builds its own parts; it imports nothing of delta/."""
    wrong = [f"{module} imports {name}" for module, path in _job_modules().items()
             if module in ("streaming_job.land.sink", "streaming_job.land.sink_parks")
             for name in sorted(_imports(path, module)) if _job_package(name) == "delta"]
    assert not wrong, "\n".join(wrong)


MAX_MODULE_LINES = 500  # a module longer than this does several jobs: split it by job (docs/ARCHITECTURE.md)


def test_no_package_module_is_longer_than_one_job() -> None:
    long = {str(path.relative_to(ROOT)): n for root in (ROOT / "ingester", JOB) for path in root.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these by job: {long}"
