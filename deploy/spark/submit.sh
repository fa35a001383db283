#!/usr/bin/env bash
# Submit `binlake land` (streaming_job/main.py, through deploy/spark/land.py) to a Spark cluster with
# plain spark-submit: YARN, Kubernetes (k8s://https://API:443, with the image Dockerfile.spark builds),
# or standalone.
#
#   deploy/spark/submit.sh --kafka broker:9092 --topic-prefix binlake \
#       --lake s3a://bucket/lake --checkpoint s3a://bucket/_checkpoints/land [--trigger 10s]
#
# Environment:
#   SPARK_MASTER      the master URL (default: local[2])
#   SPARK_IMAGE       on Kubernetes: the image (Dockerfile.spark built with --build-arg WITH_S3A=true)
#   SPARK_NAMESPACE   on Kubernetes: the namespace (default binlake), service account binlake-land
#   BINLAKE_JARS      comma-separated jars (default: the Kafka source and Delta jars that
#                     `python -m streaming_job.runtime.versions` resolves, plus $S3A_JARS)
#   S3A_JARS          comma-separated hadoop-aws and AWS SDK bundle jars for s3a:// (hadoop-aws must
#                     match pyspark's Hadoop: 3.4.1 for Spark 4.0.0; the bundle it was built with, 2.24.6)
#   AWS_*             S3 credentials when there is no instance role or IRSA (the default AWS chain reads them)
#
# The driver and the executors need the binlake package (`pip install .[spark]`): the image has it; on
# YARN ship it with --py-files or install it on the nodes.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
master=${SPARK_MASTER:-local[2]}

args=(
    --master "$master"
    --name binlake-land
    --conf spark.sql.streaming.stopGracefullyOnShutdown=true
    --conf spark.hadoop.fs.s3a.impl=org.apache.hadoop.fs.s3a.S3AFileSystem
    --conf spark.hadoop.fs.s3a.aws.credentials.provider=software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider
)
case "$master" in
    k8s://*)
        # The image has the job, the package and every jar (s3a's on the extra classpath): local:// paths,
        # nothing uploaded.
        : "${SPARK_IMAGE:?set SPARK_IMAGE to the image Dockerfile.spark builds}"
        exec spark-submit "${args[@]}" \
            --deploy-mode cluster \
            --conf spark.kubernetes.container.image="$SPARK_IMAGE" \
            --conf spark.kubernetes.namespace="${SPARK_NAMESPACE:-binlake}" \
            --conf spark.kubernetes.authenticate.driver.serviceAccountName=binlake-land \
            --conf spark.kubernetes.driverEnv.BINLAKE_LOG_FORMAT=json \
            --conf "spark.driver.extraClassPath=/opt/binlake/jars/*" \
            --conf "spark.executor.extraClassPath=/opt/binlake/jars/*" \
            local:///opt/binlake/land.py "$@"
        ;;
esac

jars=${BINLAKE_JARS:-}
if [ -z "$jars" ]; then
    jars=$(cd "$repo" && "$python" -m streaming_job.runtime.versions | paste -sd, -)
fi
if [ -n "${S3A_JARS:-}" ]; then
    jars="$jars,$S3A_JARS"
fi
exec spark-submit "${args[@]}" --jars "$jars" "$repo/deploy/spark/land.py" "$@"
