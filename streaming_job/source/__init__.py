"""The Kafka source of the stream and the reads beside it: topics, offsets, what the topics hold, what has landed."""
