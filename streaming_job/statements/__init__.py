"""Table statements in a micro-batch and what they do to a table's lake tables, parked tables included."""
