"""Renderers of decoded events: the JSONL contract and mysqlbinlog-style text."""
