"""A table's share of a micro-batch landed: change-log files, mirrors and keys, evolution, defaults, compaction."""
