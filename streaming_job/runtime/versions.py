"""The one matching set of Spark, Delta Lake and connector versions (pyproject pins the Python side).

delta-spark 4.0.0 is built for Spark 4.0 and Scala 2.13; the Kafka source must be Spark's own
version. Change all of these together, and pyproject's `spark` extra with them.
"""

from __future__ import annotations

import re
from pathlib import Path

SPARK_VERSION = "4.0.0"
DELTA_VERSION = "4.0.0"
SCALA_VERSION = "2.13"
MAVEN_COORDINATES = [
    f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_VERSION}:{SPARK_VERSION}",
    f"io.delta:delta-spark_{SCALA_VERSION}:{DELTA_VERSION}",
]
# `land.format: iceberg`: Iceberg's Spark runtime (Spark reads the tables pyiceberg writes: iceberg/catalog.py)
# and the JDBC drivers of the catalog's databases (SQLite, MariaDB/MySQL); pyproject's `iceberg` extra pins pyiceberg
ICEBERG_VERSION = "1.10.0"
ICEBERG_COORDINATES = [
    f"org.apache.iceberg:iceberg-spark-runtime-{SPARK_VERSION.rsplit('.', 1)[0]}_{SCALA_VERSION}:{ICEBERG_VERSION}",
    "org.xerial:sqlite-jdbc:3.49.1.0",
    "org.mariadb.jdbc:mariadb-java-client:3.5.3",  # a catalog on MariaDB or MySQL (land.iceberg_catalog)
]
HADOOP_VERSION = "3.4.1"  # pyspark 4.0.0's Hadoop client
# Hadoop's s3a for lakes on S3 (s3a://): hadoop-aws of pyspark's Hadoop and the AWS SDK bundle it names
S3A_COORDINATES = [f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}"]
_VERSIONED_JAR = re.compile(r"^(.*?)-\d[\w.\-]*\.jar$")


def spark_jars(cache_dir: Path | None = None) -> list[Path]:
    """The connector jars from Maven Central (cached; offline once warm), minus the libraries pyspark
    already ships: a second scala-library or hadoop client on the classpath breaks the driver."""
    return _unshipped(MAVEN_COORDINATES, cache_dir)


def iceberg_jars(cache_dir: Path | None = None) -> list[Path]:
    """Iceberg's Spark runtime and the catalog databases' JDBC drivers (sessions that read Iceberg tables)."""
    return _unshipped(ICEBERG_COORDINATES, cache_dir)


def s3a_jars(cache_dir: Path | None = None) -> list[Path]:
    """Hadoop's s3a filesystem and the AWS SDK it uses (a 560 MB bundle: fetched for S3 lakes only)."""
    return _unshipped(S3A_COORDINATES, cache_dir)


def _unshipped(coordinates: list[str], cache_dir: Path | None) -> list[Path]:
    import pyspark

    from ingester.maven import fetch_classpath

    if pyspark.__version__ != SPARK_VERSION:
        raise RuntimeError(f"pyspark {pyspark.__version__} is installed, binlake land needs {SPARK_VERSION}")
    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [p for p in fetch_classpath(coordinates, cache_dir) if _artifact(p.name) not in shipped]


def _artifact(jar_name: str) -> str:
    m = _VERSIONED_JAR.match(jar_name)
    return m.group(1) if m else jar_name


if __name__ == "__main__":  # scripts/bootstrap warms the cache: `python -m streaming_job.runtime.versions`
    for jar in [*spark_jars(), *iceberg_jars()]:
        print(jar)
