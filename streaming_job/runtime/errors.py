"""What stops the land query with a one-line message (``binlake: error: ...``, exit 2)."""

from __future__ import annotations

import re

_REGISTRY_ERROR = re.compile(r"\b(?:RegistryUnavailable|SchemaRefused): (.+)")


class LandError(RuntimeError):
    """Stops the query: an undecodable record (without --quarantine), an unsafe schema change, a schema
    registry that does not answer."""


def registry_error(text: str) -> LandError | None:
    """The schema registry of --source-format debezium-avro down, failing or refusing the credentials, in the
    driver or a decode task (whose failure Spark reports as a traceback in its own message): the registry
    client's line. The micro-batch is not committed (Spark's checkpoint): the next run lands it."""
    found = _REGISTRY_ERROR.search(text)
    if found is None:
        return None
    return LandError(f"{found.group(1).strip()}; the micro-batch is not committed: run again once the registry "
                     "answers")


def python_error(text: str) -> str | None:
    """The exception line of the first Python traceback in ``text`` that says something: Spark reports a failure
    of foreachBatch's Python function as its traceback inside its own message, whose first line ends with
    "Traceback (most recent call last):", which says nothing; a task's failure inside that function (a Python
    data source's read) is one more traceback inside the first one's last line ("...PythonException:", its message
    on the lines below): the task's own exception line is the one to tell."""
    lines = text.splitlines()
    found: list[str] = []
    for i, line in enumerate(lines):
        if line.rstrip().endswith("Traceback (most recent call last):"):
            last = next((f.strip() for f in lines[i + 1:] if f.strip() and not f[0].isspace()), None)
            if last is not None:
                found.append(last)
    return next((f for f in found if not f.endswith(":")), found[0] if found else None)
