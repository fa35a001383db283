"""Kubernetes objects checked against the API's schemas (kubernetes-validate) and the project's own rules."""

from __future__ import annotations

from typing import Any

KUBERNETES_VERSION = "1.31.0"  # oldest Kubernetes these manifests are checked against (kubernetes-validate)
_DURATION = {"type": "string", "pattern": r"^([0-9]+(ms|s|m|h))+$"}
_SELECTOR = {"type": "object", "properties": {"matchLabels": {"type": "object",
                                                               "additionalProperties": {"type": "string"}}}}
# The custom resources' fields this repository uses, from the CRDs of the Prometheus operator
# (monitoring.coreos.com/v1) and the Spark operator (sparkoperator.k8s.io/v1beta2): kubernetes-validate
# ships only the built-in kinds.
CUSTOM_RESOURCE_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object", "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["selector", "endpoints"], "properties": {
            "selector": _SELECTOR,
            "namespaceSelector": {"type": "object"},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "properties": {
                    "port": {"type": "string"}, "targetPort": {"type": ["string", "integer"]},
                    "path": {"type": "string", "pattern": "^/"}, "scheme": {"enum": ["http", "https"]},
                    "interval": _DURATION, "scrapeTimeout": _DURATION, "honorLabels": {"type": "boolean"},
                    "relabelings": {"type": "array"}, "metricRelabelings": {"type": "array"}}}}}}}},
    ("monitoring.coreos.com/v1", "PodMonitor"): {
        "type": "object", "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["selector"], "properties": {
            "selector": _SELECTOR,
            "podMetricsEndpoints": {"type": "array", "items": {"type": "object", "properties": {
                "port": {"type": "string"}, "path": {"type": "string"}, "interval": _DURATION}}}}}}},
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): {
        "type": "object", "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["type", "sparkVersion", "driver", "executor"],
                                "properties": {
            "type": {"enum": ["Java", "Python", "Scala", "R"]},
            "pythonVersion": {"enum": ["2", "3"]},
            "mode": {"enum": ["cluster", "client", "in-cluster-client"]},
            "image": {"type": "string"}, "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            "mainApplicationFile": {"type": "string"}, "mainClass": {"type": "string"},
            "arguments": {"type": "array", "items": {"type": "string"}},
            "sparkVersion": {"type": "string"},
            "sparkConf": {"type": "object", "additionalProperties": {"type": "string"}},
            "hadoopConf": {"type": "object", "additionalProperties": {"type": "string"}},
            "restartPolicy": {"type": "object", "properties": {
                "type": {"enum": ["Never", "Always", "OnFailure"]},
                "onFailureRetryInterval": {"type": "integer"},
                "onSubmissionFailureRetryInterval": {"type": "integer"}}},
            "driver": {"$ref": "#/$defs/pod", "properties": {"serviceAccount": {"type": "string"}}},
            "executor": {"$ref": "#/$defs/pod", "properties": {"instances": {"type": "integer", "minimum": 1}}}}}},
        "$defs": {"pod": {"type": "object", "properties": {
            "cores": {"type": "integer", "minimum": 1}, "memory": {"type": "string", "pattern": r"^[0-9]+[kmgt]?$"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "env": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            "securityContext": {"type": "object"}}}}},
}


def kubernetes_problems(objects: list[dict[str, Any]], version: str = KUBERNETES_VERSION) -> list[str]:
    """Schema problems: built-in kinds against Kubernetes' own OpenAPI schemas (kubernetes-validate,
    strict: unknown fields are errors), custom resources against CUSTOM_RESOURCE_SCHEMAS."""
    import jsonschema
    import kubernetes_validate

    problems = []
    for obj in objects:
        where = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
        schema = CUSTOM_RESOURCE_SCHEMAS.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if schema is not None:
            for error in jsonschema.Draft202012Validator(schema).iter_errors(obj):
                problems.append(f"{where}: {'/'.join(map(str, error.absolute_path))}: {error.message}")
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}: {'/'.join(map(str, exc.path))}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {obj.get('apiVersion')} {obj.get('kind')}")
    return problems
