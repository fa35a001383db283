"""The Kafka record format: binlog events kept parsed-but-not-decoded, self-contained per record."""
