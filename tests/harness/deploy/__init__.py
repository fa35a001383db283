"""Offline checks of the deployment files (docker compose, Dockerfiles, Kustomize, Kubernetes, Grafana).

There is no Docker engine, cluster or Grafana in CI, so each checker reads the files and cross-checks them against
the code they deploy: the settings `ingester/config.py` accepts, the metrics the daemon exports, the files the
repository holds. Every checker returns a list of problems (empty: fine), so a test can break a copy on purpose and
see the exact problem reported."""
