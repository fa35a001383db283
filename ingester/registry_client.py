"""The schema registry of the Avro formats, over Confluent's REST API (Confluent Schema Registry, Apicurio's
``/apis/ccompat/v7``, Karapace, Redpanda): the daemon's ``kafka.format: debezium-avro`` registers schemas (the
``SchemaIds`` of records/debezium/layouts.py), ``binlake land --source-format debezium-avro`` reads them by id
(streaming_job/debezium_avro.py, in Spark's executors: a client pickles without its TLS context).

A schema is registered with ``POST /subjects/{subject}/versions``, which answers the id of the schema, new or
already registered (the same schema again is no new version); ids are cached per (subject, schema). What the
registry refuses (a schema incompatible with the subject's versions under its compatibility rule, a schema it
cannot parse, refused credentials) is ``SchemaRefused``: one line naming the registry and the subject, and the
daemon stops before anything of that Kafka transaction commits. A registry that cannot be reached or fails
(5xx) is ``RegistryUnavailable``: retried from the last checkpoint like a Kafka failure.

A schema is read with ``GET /schemas/ids/{id}``; an id the registry does not know is ``UnknownSchema`` (the
message is undecodable), refused credentials ``SchemaRefused``.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from .redact import redact

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRefused(Exception):
    """The registry refused a schema or the credentials: a setting or a DDL to fix, not retried."""


class RegistryUnavailable(ConnectionError):
    """The registry could not be reached or failed: retried like Kafka."""


class UnknownSchema(LookupError):
    """The registry has no schema of that id."""


class RegistryClient:
    """``SchemaIds`` over HTTP(S); ``username``/``password``: HTTP basic authentication (else the URL's
    ``user:password@``); ``ca_file``: the CA that signed an https registry's certificate (default: the
    system's)."""

    def __init__(self, url: str, username: str | None = None, password: str | None = None,
                 ca_file: str | None = None, timeout: float = 10.0) -> None:
        self.shown = redact(url.rstrip("/"))
        parts = urlsplit(url.rstrip("/"))
        if parts.username is not None:  # user:password@ in the URL: basic authentication, unless set apart
            if username is None:
                username, password = unquote(parts.username), unquote(parts.password or "")
            parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        self.url = parts.geturl()
        self.timeout = timeout
        self._headers = {"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE}
        if username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self.ca_file = ca_file
        self._context: ssl.SSLContext | None = None  # made at the first https call (it does not pickle)
        self._ids: dict[tuple[str, str], int] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_context": None}

    def schema(self, schema_id: int) -> str:
        """The schema text of a registry id (ids are never reused: the caller may keep it)."""
        status, body = self._call("GET", f"/schemas/ids/{schema_id}")
        if status == 200 and isinstance(body, dict) and isinstance(body.get("schema"), str):
            return str(body["schema"])
        if status == 404:
            raise UnknownSchema(f"schema id {schema_id} is not in the registry at {self.shown}")
        raise SchemaRefused(f"schema id {schema_id} refused by the registry at {self.shown}: "
                            f"{self._reason(status, body, '')}")

    def schema_id(self, subject: str, schema: str) -> int:
        cached = self._ids.get((subject, schema))
        if cached is not None:
            return cached
        status, body = self._call("POST", f"/subjects/{quote(subject, safe='')}/versions",
                                  {"schema": schema})
        if status == 200 and isinstance(body, dict) and isinstance(body.get("id"), int):
            self._ids[(subject, schema)] = body["id"]
            return int(body["id"])
        raise SchemaRefused(f"schema of subject {subject} refused by the registry at {self.shown}: "
                            f"{self._reason(status, body, subject)}")

    def _reason(self, status: int, body: Any, subject: str) -> str:
        said = body.get("message") if isinstance(body, dict) else None
        if status == 409:
            return f"incompatible with its earlier versions (compatibility {self._compatibility(subject)})"
        if status in (401, 403):
            return f"HTTP {status}: the credentials (debezium.schema_registry_username/password) were refused"
        return f"HTTP {status}" + (f": {said}" if said else "")

    def _compatibility(self, subject: str) -> str:
        """The subject's compatibility rule (or the registry's default), as the registry says it."""
        for path in (f"/config/{quote(subject, safe='')}?defaultToGlobal=true", "/config"):
            try:
                status, body = self._call("GET", path)
            except RegistryUnavailable:
                break
            if status == 200 and isinstance(body, dict):
                level = body.get("compatibilityLevel") or body.get("compatibility")
                if level:
                    return str(level)
        return "unknown"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """(HTTP status, the JSON answer or None); raises RegistryUnavailable where there is no answer or the
        registry failed (5xx)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=self._headers)
        if self._context is None and self.url.startswith("https:"):
            self._context = ssl.create_default_context(cafile=self.ca_file)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._context) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (OSError, ValueError) as exc:  # refused, reset, timed out, TLS failures; a malformed URL
            raise RegistryUnavailable(f"schema registry {self.shown}: {getattr(exc, 'reason', None) or exc}") \
                from None
        if status >= 500:
            raise RegistryUnavailable(f"schema registry {self.shown}: HTTP {status} {raw[:200]!r}")
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None
