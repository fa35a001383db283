"""A lake on S3 or an S3-compatible store (s3a://bucket/path): where the store is, and its credentials.

Spark reads and writes such a lake through Hadoop's s3a filesystem (hadoop-aws and the AWS SDK bundle, the
versions pyspark's Hadoop client needs: versions.S3A_COORDINATES). The endpoint, path-style addressing and
region are configuration (land.s3_*); the credentials come from the standard AWS environment variables
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) or from a shared-credentials file
(land.s3_credentials_file, its [default] profile or AWS_PROFILE's), never from the configuration itself
and never logged. Without either, Hadoop's own chain (e.g. an instance's IAM role) is left to find them.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass, field
from typing import Any

from ..runtime.errors import LandError
from .paths import scheme

S3_SCHEMES = ("s3a", "s3")


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ObjectStoreSettings:
    endpoint: str | None = None  # e.g. http://127.0.0.1:9000 (None: AWS's own, by region)
    path_style: bool = False  # http://endpoint/bucket/key instead of http://bucket.endpoint/key
    region: str | None = None
    credentials_file: str | None = None  # an AWS shared-credentials file

    def credentials(self) -> Credentials | None:
        """From the environment, else from the credentials file; None: neither has any."""
        key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
        if key and secret:
            return Credentials(key, secret, os.environ.get("AWS_SESSION_TOKEN") or None)
        if not self.credentials_file:
            return None
        parser = configparser.ConfigParser()
        try:
            with open(self.credentials_file, encoding="utf-8") as fh:
                parser.read_file(fh)
        except (OSError, configparser.Error) as exc:
            raise LandError(f"land.s3_credentials_file {self.credentials_file}: cannot read it ({exc})") from None
        profile = os.environ.get("AWS_PROFILE") or "default"
        section = parser[profile] if parser.has_section(profile) else None
        if section is None or not section.get("aws_access_key_id") or not section.get("aws_secret_access_key"):
            raise LandError(f"land.s3_credentials_file {self.credentials_file}: no aws_access_key_id and "
                            f"aws_secret_access_key in its [{profile}] profile")
        return Credentials(section["aws_access_key_id"], section["aws_secret_access_key"],
                           section.get("aws_session_token") or None)

    def hadoop_conf(self) -> dict[str, str]:
        """Spark settings of Hadoop's s3a for this store (they reach the executors with the job's Hadoop
        configuration; Spark redacts the keys in its UI and logs)."""
        conf = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",  # s3:// as s3a://
                "spark.hadoop.fs.s3a.path.style.access": str(self.path_style).lower(),
                # a failing store is reported in seconds, not after s3a's minutes of retries
                "spark.hadoop.fs.s3a.attempts.maximum": "3", "spark.hadoop.fs.s3a.retry.limit": "3"}
        if self.endpoint:
            conf["spark.hadoop.fs.s3a.endpoint"] = self.endpoint
        if self.region:
            conf["spark.hadoop.fs.s3a.endpoint.region"] = self.region
        found = self.credentials()
        if found is not None:
            conf["spark.hadoop.fs.s3a.access.key"] = found.access_key
            conf["spark.hadoop.fs.s3a.secret.key"] = found.secret_key
            provider = "SimpleAWSCredentialsProvider"
            if found.session_token:
                conf["spark.hadoop.fs.s3a.session.token"] = found.session_token
                provider = "TemporaryAWSCredentialsProvider"
            conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = f"org.apache.hadoop.fs.s3a.{provider}"
        return conf

    def fileio_properties(self) -> dict[str, str]:
        """pyiceberg's FileIO properties for this store (an Iceberg lake on it: iceberg/catalog.py). The region
        is always given (us-east-1 by default, as for delta-rs): without one pyiceberg asks AWS for the
        bucket's."""
        found = self.credentials()
        properties = {"s3.region": self.region or "us-east-1",
                      "s3.force-virtual-addressing": str(not self.path_style).lower(),
                      "s3.connect-timeout": "10", "s3.request-timeout": "60"}
        if self.endpoint:
            properties["s3.endpoint"] = self.endpoint if "://" in self.endpoint else f"https://{self.endpoint}"
        if found is not None:
            properties["s3.access-key-id"] = found.access_key
            properties["s3.secret-access-key"] = found.secret_key
            if found.session_token:
                properties["s3.session-token"] = found.session_token
        return properties


def on_object_store(path: str) -> bool:
    return scheme(path) in S3_SCHEMES


def probe(spark: Any, lake: str) -> None:
    """Write and delete a small object under ``lake`` through Spark's own filesystem (as the job will), so
    that missing or wrong credentials, a missing bucket or a read-only one stop the job at its start with
    one line naming the lake, not a stack trace from its first batch."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{lake.rstrip('/')}/_binlake_probe")
    try:
        fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        fs.create(path, True).close()
        fs.delete(path, False)
    except Exception as exc:  # py4j's error: the Java exception's first line says what the store answered
        raise LandError(f"cannot write the lake {lake}: {_java_cause(exc)}; check land.s3_endpoint, the bucket, "
                        "and the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or "
                        "land.s3_credentials_file)") from None


def _java_cause(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return text.splitlines()[0][:300]
