"""The ``binlake`` command line."""
