"""binlake ingester: the binlog codec and the adapters (files, network, Kafka) around it."""
