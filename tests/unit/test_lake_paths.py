"""Lake paths: URIs of object stores keep their authority when tables are joined onto them."""

from __future__ import annotations

from streaming_job.sink import _join, _local


def test_uri_lakes_keep_the_bucket() -> None:
    assert _join("s3a://orders-lake/lake", "shop", "orders") == "s3a://orders-lake/lake/shop/orders"
    assert _join("abfss://c@acct.dfs.core.windows.net/", "_quarantine") == "abfss://c@acct.dfs.core.windows.net/_quarantine"
    assert _join("/data/lake", "shop", "orders__changes") == "/data/lake/shop/orders__changes"


def test_only_plain_paths_take_the_pyarrow_writer() -> None:
    assert _local("/data/lake/shop/orders__changes")
    assert _local("lake/shop/orders__changes")
    assert not _local("s3a://orders-lake/lake/shop/orders__changes")
    assert not _local("file:///data/lake/shop/orders__changes")
