"""Java classpaths from Maven Central, for the JVM services binlake runs (the devstack's Kafka and object
store) and the land job's Spark connectors: a leaf module. `mvn` resolves the artifacts with their runtime
dependencies into a cache of our own, and a warm cache is used without running mvn, so repeated runs work
offline.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path
from xml.sax.saxutils import escape

_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"  # pinned: reproducible goals
_STAMP = "coordinates.txt"
_CENTRAL = "https://repo.maven.apache.org/maven2"
_OUTPUT_TAIL_LINES = 20
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


class MavenError(RuntimeError):
    """mvn could not resolve the requested artifacts."""


def default_cache_dir() -> Path:
    """$BINLAKE_CACHE, or ~/.cache/binlake: kept between runs so only the first one downloads."""
    return Path(os.environ.get("BINLAKE_CACHE") or Path.home() / ".cache" / "binlake")


def find_java() -> Path:
    """The java launcher: $JAVA_HOME/bin/java if set (as mvn itself does), else the one on PATH."""
    if java_home := os.environ.get("JAVA_HOME"):
        java = Path(java_home) / "bin" / "java"
        if os.access(java, os.X_OK):
            return java
    if found := shutil.which("java"):
        return Path(found)
    raise FileNotFoundError("Java (java) not found in $JAVA_HOME/bin or on PATH; run scripts/bootstrap to install it")


def fetch_classpath(coordinates: list[str], cache_dir: Path | None = None) -> list[Path]:
    """The jars of `group:artifact:version` coordinates plus their runtime dependencies, sorted.

    The jars land in <cache_dir>/jars/<digest of the coordinates>, and Maven's own repository in
    <cache_dir>/m2, so nothing outside the cache is touched; a stamp file written after a complete
    resolution lets later calls skip mvn (and the network) entirely.
    """
    if not coordinates:
        raise ValueError("no Maven coordinates given")
    for coordinate in coordinates:
        parts = coordinate.split(":")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"Maven coordinate {coordinate!r} is not group:artifact:version")
    cache_dir = (cache_dir or default_cache_dir()).absolute()
    wanted = "".join(f"{coordinate}\n" for coordinate in coordinates)
    output = cache_dir / "jars" / hashlib.sha256(wanted.encode()).hexdigest()[:16]
    stamp = output / _STAMP
    output.parent.mkdir(parents=True, exist_ok=True)
    # Concurrent test runs share the cache: one resolves while the others wait for its stamp.
    with open(output.parent / f"{output.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.is_file() and stamp.read_text() == wanted):
            shutil.rmtree(output, ignore_errors=True)
            output.mkdir()
            with open(cache_dir / "m2.lock", "w") as m2_lock:  # one mvn at a time in Maven's own repository
                fcntl.flock(m2_lock, fcntl.LOCK_EX)
                _copy_dependencies(coordinates, output, cache_dir / "m2")
            stamp.write_text(wanted)
    return sorted(output.glob("*.jar"))


def fetch_artifact(coordinate: str, cache_dir: Path | None = None, extension: str = "jar") -> Path:
    """One file of Maven Central, without its dependencies (a self-contained jar, e.g. a
    ``jar-with-dependencies``, or another packaging by ``extension``, e.g. a connector plugin's
    ``tar.gz``): ``group:artifact:version[:classifier]``, checked against Central's SHA-1, kept in
    <cache_dir>/files so later calls use it offline."""
    parts = coordinate.split(":")
    if len(parts) not in (3, 4) or not all(parts):
        raise ValueError(f"Maven coordinate {coordinate!r} is not group:artifact:version[:classifier]")
    group, artifact, version = parts[:3]
    name = f"{artifact}-{version}{'-' + parts[3] if len(parts) == 4 else ''}.{extension}"
    target = (cache_dir or default_cache_dir()).absolute() / "files" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    url = f"{_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{name}"
    with open(target.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        partial = target.with_name(f".{name}.part")
        try:
            with urllib.request.urlopen(f"{url}.sha1", timeout=60) as response:
                want = response.read().decode().split()[0].strip()
            digest = hashlib.sha1(usedforsecurity=False)
            with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
                while chunk := response.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise MavenError(f"could not download {url}: {exc}") from exc
        if digest.hexdigest() != want:
            partial.unlink()
            raise MavenError(f"{url}: SHA-1 {digest.hexdigest()} is not Maven Central's {want}")
        partial.rename(target)
    return target


def _copy_dependencies(coordinates: list[str], output: Path, repository: Path) -> None:
    """Run the dependency plugin on a throwaway pom that lists the coordinates as dependencies."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FileNotFoundError("Maven (mvn) not found on PATH; run scripts/bootstrap to install it")
    find_java()  # mvn runs on it; its own complaint about JAVA_HOME is less clear
    dependencies = "".join(
        f"<dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
        f"<version>{escape(version)}</version></dependency>"
        for group, artifact, version in (coordinate.split(":") for coordinate in coordinates)
    )
    pom = output / "pom.xml"
    # Some poms (Spark's) declare repositories of their own; every request goes to Maven Central instead.
    settings = output / "settings.xml"
    settings.write_text(
        '<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"><mirrors><mirror><id>central-only</id>'
        f"<mirrorOf>*</mirrorOf><url>{_CENTRAL}</url></mirror></mirrors></settings>\n"
    )
    pom.write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>binlake.devstack</groupId><artifactId>classpath</artifactId><version>0</version>"
        f"<packaging>pom</packaging><dependencies>{dependencies}</dependencies></project>\n"
    )
    result = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-U",  # retry artifacts a failed earlier run left marked as missing
            "-s",
            str(settings),
            "-f",
            str(pom),
            f"-Dmaven.repo.local={repository}",
            f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={output}",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    pom.unlink()
    settings.unlink()
    if result.returncode != 0:
        tail = "\n".join(_error_lines(result.stdout + result.stderr)[-_OUTPUT_TAIL_LINES:])
        raise MavenError(
            f"mvn could not resolve {', '.join(coordinates)} (exit {result.returncode}); end of its output:\n{tail}"
        )


def _error_lines(output: str) -> list[str]:
    """mvn's output without colour codes, blank lines and the generic advice after the real error."""
    lines = []
    for line in _ANSI_ESCAPE.sub("", output).splitlines():
        if "To see the full stack trace" in line:
            break
        if line.strip() not in ("", "[ERROR]"):
            lines.append(line)
    return lines
