"""Where an s3a:// lake's credentials come from (streaming_job/lake/object_store.py): the AWS environment
variables, else an AWS shared-credentials file; what reaches Spark's s3a settings; clear errors."""

from __future__ import annotations

import pytest

from streaming_job.lake.object_store import ObjectStoreSettings, on_object_store
from streaming_job.runtime.errors import LandError


@pytest.fixture(autouse=True)
def _no_aws(monkeypatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def test_the_environment_first_then_the_file_and_its_profile(tmp_path, monkeypatch) -> None:
    file = tmp_path / "credentials"
    file.write_text("[default]\naws_access_key_id = AKDEF\naws_secret_access_key = sdef\n\n"
                    "[ci]\naws_access_key_id = AKCI\naws_secret_access_key = sci\naws_session_token = tok\n")
    store = ObjectStoreSettings("http://127.0.0.1:9000", True, "eu-west-1", str(file))
    found = store.credentials()
    assert found is not None and (found.access_key, found.secret_key, found.session_token) == ("AKDEF", "sdef", None)
    assert "sdef" not in repr(found)
    monkeypatch.setenv("AWS_PROFILE", "ci")
    conf = store.hadoop_conf()
    assert (conf["spark.hadoop.fs.s3a.access.key"], conf["spark.hadoop.fs.s3a.secret.key"],
            conf["spark.hadoop.fs.s3a.session.token"]) == ("AKCI", "sci", "tok")
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(".TemporaryAWSCredentialsProvider")
    assert (conf["spark.hadoop.fs.s3a.endpoint"], conf["spark.hadoop.fs.s3a.path.style.access"],
            conf["spark.hadoop.fs.s3a.endpoint.region"]) == ("http://127.0.0.1:9000", "true", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "senv")
    assert store.hadoop_conf()["spark.hadoop.fs.s3a.access.key"] == "AKENV"


def test_none_found_leaves_hadoops_chain_and_a_bad_file_is_named(tmp_path, monkeypatch) -> None:
    conf = ObjectStoreSettings().hadoop_conf()
    assert not [k for k in conf if "key" in k or "provider" in k] and "spark.hadoop.fs.s3a.endpoint" not in conf
    with pytest.raises(LandError, match=r"land.s3_credentials_file .*missing: cannot read it"):
        ObjectStoreSettings(credentials_file=str(tmp_path / "missing")).credentials()
    file = tmp_path / "credentials"
    file.write_text("[default]\naws_access_key_id = AK\n")
    with pytest.raises(LandError, match=r"no aws_access_key_id and aws_secret_access_key in its \[default\] profile"):
        ObjectStoreSettings(credentials_file=str(file)).credentials()


def test_which_lakes_are_on_an_object_store() -> None:
    assert on_object_store("s3a://b/lake") and on_object_store("S3://b/lake")
    assert not on_object_store("/data/lake") and not on_object_store("file:///data/lake")
