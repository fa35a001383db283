"""Errors of the sources, in a module of their own: the CLI catches them without importing the sources."""


class ReplicationError(Exception):
    """The server refused or broke the replication stream; the message says what to do."""
