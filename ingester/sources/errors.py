"""Errors of the sources, in a module of their own: the CLI catches them without importing the sources."""


class ReplicationError(Exception):
    """The server refused or broke the replication stream; the message says what to do. ``code``: the
    server's error number, where the server gave one (e.g. 1236: the binlog position is not on the server)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class SourceUnreachable(ReplicationError):
    """No connection to the server could be made: with ``source.hosts`` the daemon tries the next one."""
