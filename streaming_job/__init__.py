"""Spark Structured Streaming job: binlake topics -> Delta Lake change logs and mirror tables (docs/LAND.md)."""
