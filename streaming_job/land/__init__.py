"""The land query: Spark's streaming query, its foreachBatch (the sink), verify chunks, and its Python workers."""
