"""The Spark driver JVM's own log lines (log4j2) into a file instead of the terminal.

Spark's console appender writes every WARN of the JVM (plan strings truncated, large task binaries, a
hostname resolving to loopback, job groups that could not be cancelled) to the stderr that binlake's own
lines share. With a file, binlake writes a log4j2 configuration that sends them there (rolled at 10 MB,
three kept) and starts the driver with it; executors of a cluster log where their worker keeps logs. What
the JVM prints to its stderr outside log4j (the JDK's note on incubator modules, SLF4J's own lines) goes
to the same file: the driver JVM is started with its stderr there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_CONFIG = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {path}
appender.file.filePattern = {path}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 10MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
"""


def driver_java_options(log_file: str) -> str:
    """The driver's JVM option that sends its log4j2 lines to ``log_file`` (its configuration written beside
    it, ``<log_file>.log4j2.properties``)."""
    path = Path(log_file).absolute()
    config = path.with_name(path.name + ".log4j2.properties")
    config.write_text(_CONFIG.format(path=path))
    return f"-Dlog4j2.configurationFile={config.as_uri()}"


@contextlib.contextmanager
def jvm_stderr(log_file: str) -> Iterator[None]:
    """While the block starts the driver JVM (a child process), this process's stderr is ``log_file``: the
    JVM keeps it as its own. Restored at the block's end."""
    saved = os.dup(2)
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
