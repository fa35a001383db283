"""Dockerfiles checked offline: parsed instruction by instruction, every COPY source exists and is not ignored by
.dockerignore, the entrypoint runs."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
import shlex
from pathlib import Path

from .accepted import REPO


@dataclasses.dataclass
class Instruction:
    op: str
    args: str
    line: int


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with their line continuations joined; comments and blank lines dropped."""
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        op, _, args = full.partition(" ")
        out.append(Instruction(op.upper(), args.strip(), start))
    return out


def _substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def _dockerignore(context: Path) -> list[str]:
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    return [line.strip().rstrip("/") for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def _ignored(source: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides; `!` re-includes."""
    path = Path(source.rstrip("/"))
    candidates = {str(p) for p in [path, *path.parents] if str(p) != "."}
    verdict = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if any(fnmatch.fnmatch(c, pattern.lstrip("!")) for c in candidates):
            verdict = not negated
    return verdict


def dockerfile_problems(path: Path, context: Path = REPO) -> list[str]:
    """COPY sources exist in the build context (and are not ignored), stages referenced exist, base
    images are pinned, and the final stage runs as a user other than root."""
    problems: list[str] = []
    args: dict[str, str] = {}
    stages: list[str] = []
    user: str | None = None
    ignored = _dockerignore(context)
    for ins in parse_dockerfile(path.read_text()):
        where = f"{path.name}:{ins.line}"
        if ins.op == "ARG":
            name, _, default = ins.args.partition("=")
            args.setdefault(name.strip(), default.strip().strip('"'))
        elif ins.op == "FROM":
            words = _substitute(ins.args, args).split()
            image = words[0]
            if image not in stages and (":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")):
                problems.append(f"{where}: base image {image} is not pinned")
            stages.append(words[2] if len(words) >= 3 and words[1].upper() == "AS" else image)
            user = None
        elif ins.op == "USER":
            user = _substitute(ins.args, args).split(":")[0]
        elif ins.op in ("COPY", "ADD"):
            words = shlex.split(ins.args)
            options = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            origin = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
            if origin is not None:
                if _substitute(origin, args) not in stages:
                    problems.append(f"{where}: COPY --from={origin}: no such stage")
                continue
            for source in paths[:-1]:
                matches = list(context.glob(source)) if source != "." else [context]
                if not matches:
                    problems.append(f"{where}: COPY source {source} does not exist")
                elif _ignored(source, ignored):
                    problems.append(f"{where}: COPY source {source} is excluded by .dockerignore")
    if user is None or user in ("root", "0"):
        problems.append(f"{path.name}: the final stage runs as root (no USER, or USER root)")
    return problems


def dockerfile_entrypoint(path: Path) -> list[str]:
    entry = [i for i in parse_dockerfile(path.read_text()) if i.op == "ENTRYPOINT"]
    return json.loads(entry[-1].args) if entry else []
