"""I/O adapters that feed the sans-I/O codec: binlog files (and, later, the network stream)."""
