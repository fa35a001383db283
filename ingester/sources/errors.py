"""Errors of the sources, in a module of their own: the CLI catches them without importing the sources."""


class ReplicationError(Exception):
    """The server refused or broke the replication stream; the message says what to do."""


class SourceUnreachable(ReplicationError):
    """No connection to the server could be made: with ``source.hosts`` the daemon tries the next one."""
