"""Debezium's change-event formats (issue 24): column encodings, the envelope, and the Outbound strategy."""
