"""The harness's schema registry (Apicurio Registry 3.0.9 from Maven Central) answers Confluent's API: a schema
registered under a subject comes back by its id, the same schema again gets the same id, a compatible change a
new version, and an incompatible one is refused by the subject's compatibility rule (BACKWARD)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


def _record(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Value", "namespace": "reg.db.t", "fields": list(fields)})


def test_the_registry_keeps_versions_and_refuses_incompatible_schemas(schema_registry) -> None:
    subject = "reg.db.t-value"
    first = _record({"name": "id", "type": "int"})
    first_id = schema_registry.register(subject, first)
    assert json.loads(schema_registry.request("GET", f"/schemas/ids/{first_id}")["schema"]) == json.loads(first)
    assert schema_registry.register(subject, first) == first_id
    schema_registry.request("PUT", f"/config/{subject}", {"compatibility": "BACKWARD"})
    added = _record({"name": "id", "type": "int"}, {"name": "s", "type": ["null", "string"], "default": None})
    assert schema_registry.register(subject, added) != first_id  # a new column with a default: compatible
    assert schema_registry.request("GET", f"/subjects/{subject}/versions") == [1, 2]
    with pytest.raises(RuntimeError, match="409"):  # a new column without a default cannot read old records
        schema_registry.register(subject, _record({"name": "id", "type": "int"}, {"name": "n", "type": "int"}))
    assert subject in schema_registry.subjects()
