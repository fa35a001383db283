"""Lake paths: URIs of object stores keep their authority when tables are joined onto them."""

from __future__ import annotations

from streaming_job.lake.paths import is_local, join


def test_uri_lakes_keep_the_bucket() -> None:
    assert join("s3a://orders-lake/lake", "shop", "orders") == "s3a://orders-lake/lake/shop/orders"
    assert join("abfss://c@acct.dfs.core.windows.net/", "_quarantine") == "abfss://c@acct.dfs.core.windows.net/_quarantine"
    assert join("/data/lake", "shop", "orders__changes") == "/data/lake/shop/orders__changes"


def test_only_plain_paths_take_the_pyarrow_writer() -> None:
    assert is_local("/data/lake/shop/orders__changes")
    assert is_local("lake/shop/orders__changes")
    assert not is_local("s3a://orders-lake/lake/shop/orders__changes")
    assert not is_local("file:///data/lake/shop/orders__changes")
