"""DEFAULT clauses of ADD COLUMN -> the lake value of the rows the server fills (streaming_job/batch/defaults.py).
The proof against the server's SELECT is tests/integration/test_land_defaults.py; these pin the parsing."""

from __future__ import annotations

import pytest

from ingester.schema.ddl import parse_ddl
from ingester.schema.ddl_operations import AddColumn
from streaming_job.batch.defaults import Uncomputable, lake_default

T0 = 1_700_000_000_123_456  # a statement's start, microseconds


def _default(definition: str, dtype: str, time_zone: str | None = "SYSTEM") -> str | None:
    (op,) = parse_ddl(f"ALTER TABLE t ADD COLUMN {definition}, ADD COLUMN z INT", "db")
    spec = op.specs[0]
    assert isinstance(spec, AddColumn) and op.specs[1].column.name == "z"  # the clause was read to its end
    return lake_default(spec.column, dtype, T0, time_zone)


@pytest.mark.parametrize(("definition", "dtype", "sql"), [
    ("a INT DEFAULT 42", "int", "CAST(42 AS int)"),
    ("a INT DEFAULT -7 NOT NULL", "int", "CAST(-7 AS int)"),
    ("a INT DEFAULT '5'", "int", "CAST(5 AS int)"),
    ("a INT NULL", "int", None),
    ("a INT DEFAULT NULL", "int", None),
    ("a INT NOT NULL", "int", "CAST(0 AS int)"),
    ("a DECIMAL(8,3) DEFAULT -1.5e1 COMMENT 'x'", "decimal(8,3)", "CAST('-15.000' AS decimal(8,3))"),
    ("a DECIMAL(8,3) DEFAULT .5", "decimal(8,3)", "CAST('0.500' AS decimal(8,3))"),
    ("a DOUBLE DEFAULT 0.25", "double", "CAST('0.25' AS double)"),
    ("a BIGINT UNSIGNED DEFAULT 18446744073709551615", "decimal(20,0)",
     "CAST('18446744073709551615' AS decimal(20,0))"),
    ("a BOOLEAN DEFAULT TRUE", "tinyint", "CAST(1 AS tinyint)"),
    ("a VARCHAR(9) NOT NULL DEFAULT 'it''s'", "string", "'it\\'s'"),
    ("a VARCHAR(9) CHARACTER SET latin1 DEFAULT _latin1'x'", "string", "'x'"),
    ("a CHAR(4) DEFAULT 'ab  '", "string", "'ab'"),
    ("a VARCHAR(9) NOT NULL", "string", "''"),
    ("a ENUM('x', 'y') NOT NULL", "string", "'x'"),
    ("a BINARY(3) DEFAULT 'a'", "binary", "X'610000'"),
    ("a VARBINARY(3) DEFAULT x'ff'", "binary", "X'ff'"),
    ("a BIT(8) DEFAULT b'101'", "bigint", "5"),
    ("a DATE DEFAULT '2024-02-29'", "date", "DATE_FROM_UNIX_DATE(19782)"),
    ("a DATE NOT NULL", "date", None),  # the zero date: null in the lake
    ("a DATE DEFAULT '0000-00-00'", "date", None),
    ("a DATETIME(6) DEFAULT '2024-01-02 03:04:05.5'", "timestamp_ntz",
     "CAST(TIMESTAMP_MICROS(1704164645500000) AS TIMESTAMP_NTZ)"),
    ("a TIME DEFAULT '-01:00:00'", "bigint", "-3600000000"),
    ("a TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6)", "timestamp", "TIMESTAMP_MICROS(1700000000123456)"),
    ("a TIMESTAMP(3) NULL DEFAULT NOW(3) ON UPDATE NOW(3)", "timestamp", "TIMESTAMP_MICROS(1700000000123000)"),
    ("a TIMESTAMP DEFAULT CURRENT_TIMESTAMP", "timestamp", "TIMESTAMP_MICROS(1700000000000000)"),
])
def test_literal_and_implicit_defaults(definition: str, dtype: str, sql: str | None) -> None:
    assert _default(definition, dtype) == sql


def test_local_times_need_a_time_zone_the_binlog_names() -> None:
    assert _default("a DATETIME DEFAULT NOW()", "timestamp_ntz", "+02:00") == \
        "CAST(TIMESTAMP_MICROS(1700007200000000) AS TIMESTAMP_NTZ)"
    assert _default("a TIMESTAMP DEFAULT '2024-01-01 00:00:00'", "timestamp", "UTC") == \
        "TIMESTAMP_MICROS(1704067200000000)"
    for definition, dtype in (("a DATETIME DEFAULT NOW()", "timestamp_ntz"), ("a DATE DEFAULT (CURDATE())", "date"),
                              ("a TIMESTAMP DEFAULT '2024-01-01 00:00:00'", "timestamp"),
                              ("a INT AS (id + 1) STORED", "int"), ("a INT DEFAULT (1 + 1)", "int")):
        with pytest.raises(Uncomputable):
            _default(definition, dtype)
