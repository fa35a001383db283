# syntax=docker/dockerfile:1
# The replication daemon, `binlake run`: the package and its dependencies are installed into a virtualenv in
# a build stage and copied alone into a slim runtime, which runs as an unprivileged user (read-only root
# filesystem friendly: the daemon keeps its state in Kafka, never on disk).
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY ingester ./ingester
RUN python -m venv /opt/binlake \
    && /opt/binlake/bin/pip install --no-cache-dir --disable-pip-version-check . \
    && find /opt/binlake -name '__pycache__' -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin binlake
COPY --from=build /opt/binlake /opt/binlake
# Metrics and health endpoints listen on every interface inside the container (127.0.0.1 outside one).
ENV PATH=/opt/binlake/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BINLAKE_METRICS_HOST=0.0.0.0 \
    BINLAKE_METRICS_PORT=9100 \
    BINLAKE_LOG_FORMAT=json
USER 10001:10001
EXPOSE 9100
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ['BINLAKE_METRICS_PORT'], timeout=4)"]
ENTRYPOINT ["binlake", "run"]
