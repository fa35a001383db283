"""batch/key_range.py: the one range type of keys, and the checks each format builds on it."""

from decimal import Decimal

import pyarrow as pa

from streaming_job.batch.key_range import KeyRange, range_of


def test_ranges_meet_where_a_value_may_lie_in_both() -> None:
    assert KeyRange(1, 5).meets(KeyRange(5, 9))  # bounds are included
    assert not KeyRange(1, 4).meets(KeyRange(5, 9))
    assert not KeyRange(10, 12).meets(KeyRange(5, 9))
    assert KeyRange(None, 3).meets(KeyRange(3, None))
    assert not KeyRange(None, 2).meets(KeyRange(3, None))
    assert KeyRange(None, None).meets(KeyRange(-(2**63), -(2**63)))


def test_the_range_of_a_column_leaves_nulls_out() -> None:
    assert range_of(pa.chunked_array([[3, None, -7], [2**63 - 1]], pa.int64())) == KeyRange(-7, 2**63 - 1)
    assert range_of(pa.array([Decimal("18446744073709551615"), Decimal("0")], pa.decimal128(20, 0))) == KeyRange(
        Decimal(0), Decimal("18446744073709551615"))
    assert range_of(pa.array(["b", "a'"])) == KeyRange("a'", "b")
    assert range_of(pa.array([None, None], pa.int32())) is None
    assert range_of(pa.array([], pa.int64())) is None
