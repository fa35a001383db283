"""The replication daemon: binlog stream -> records -> Kafka, exactly once."""
