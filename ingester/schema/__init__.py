"""Schema history for servers whose TABLE_MAPs lack column names (binlog_row_metadata MINIMAL)."""
