"""Kafka records -> row changes and their lake types, on the executors (binlake's own format and Debezium's)."""
