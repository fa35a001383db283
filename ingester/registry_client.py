"""The schema registry of the Avro formats, over Confluent's REST API (Confluent Schema Registry, Apicurio's
``/apis/ccompat/v7``, Karapace, Redpanda): the daemon's ``kafka.format: debezium-avro`` registers schemas (the
``SchemaIds`` of records/debezium/layouts.py), ``binlake land --source-format debezium-avro`` reads them by id
(streaming_job/decode/debezium_avro.py, in Spark's executors: a client pickles without its TLS context).

A schema is registered with ``POST /subjects/{subject}/versions``, which answers the id of the schema, new or
already registered (the same schema again is no new version); ids are cached per (subject, schema). What the
registry refuses (a schema incompatible with the subject's versions under its compatibility rule, a schema it
cannot parse, refused credentials) is ``SchemaRefused``: one line naming the registry and the subject, and the
daemon stops before anything of that Kafka transaction commits. A registry that cannot be reached or fails
(5xx) is ``RegistryUnavailable``: retried from the last checkpoint like a Kafka failure.

A schema is read with ``GET /schemas/ids/{id}``; an id the registry does not know is ``UnknownSchema`` (the
message is undecodable), refused credentials ``SchemaRefused``.

The schemas a Kafka transaction's events need for the first time are registered side by side (``prepare``: a few
threads, each on a kept-alive connection), a subject's schemas one after another in the order given, which is the
order of its versions; ``schema_id`` waits for the one it is asked for, so a message never names an id before the
registry gave it. ``SchemaLookup`` (``debezium.auto_register_schemas: false``) looks each schema up under its
subject instead of registering it.
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import ssl
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any
from urllib.parse import quote, unquote, urlsplit
from urllib.request import getproxies, proxy_bypass

from .redact import redact

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_WORKERS = 8  # registrations under way at once (prepare)
# what a kept-alive connection the registry closed meanwhile raises: the request is sent again on a new one
_STALE = (http.client.RemoteDisconnected, http.client.BadStatusLine, ConnectionResetError, BrokenPipeError,
          ConnectionAbortedError)


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
        self._path = parts.path  # the API's base path on the server, before each request's
        self._target = ""
        self.timeout = timeout
        self._headers = {"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE}
        if username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self.ca_file = ca_file
        self._context: ssl.SSLContext | None = None  # made at the first https call (it does not pickle)
        self._ids: dict[tuple[str, str], int] = {}
        self._threads()

    def _threads(self) -> None:
        """What does not pickle: each thread's connection, the registrations under way (``prepare``)."""
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[tuple[str, str], Future[int]] = {}
        self._tails: dict[str, Future[BaseException | None]] = {}  # each subject's last registrations under way
        # subjects whose registration failed: none of their later versions is registered (it would come before the
        # failed one, once registered after a restart); what needs them gets the failure
        self._failed: dict[str, BaseException] = {}
        self._down: RegistryUnavailable | None = None  # how prepare's registrations found the registry down

    def __getstate__(self) -> dict[str, Any]:
        unpicklable = ("_context", "_local", "_lock", "_pool", "_pending", "_tails", "_down", "_failed")
        return {k: v for k, v in self.__dict__.items() if k not in unpicklable} | {"_context": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._threads()

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
        """The id of ``schema`` under ``subject``: registered (the subject's next version when new), or the
        registration ``prepare`` started waited for."""
        key = (subject, schema)
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        pending = self._pending.get(key)
        if pending is not None:
            return pending.result()
        cached = self._ids.get(key)  # registered since the first look (prepare's thread first sets the id)
        if cached is not None:
            return cached
        tail = self._tails.get(subject)
        if tail is not None:  # the subject's earlier versions first
            wait_for([tail])
        failed = self._failed.get(subject)
        if failed is not None:
            raise failed
        try:
            return self._register(subject, schema)
        except BaseException as exc:
            self._failed[subject] = exc
            raise

    def prepare(self, schemas: Iterable[tuple[str, str]]) -> None:
        """Start registering these (subject, schema) pairs before their messages need them: subjects side by side
        (up to ``_WORKERS`` requests at once), each subject's schemas one after another in the order given (the
        order of its versions), after those of an earlier ``prepare`` still under way. Failures are raised by
        ``schema_id`` of the pair (and of the subject's later ones, which are not sent)."""
        chains: dict[str, list[str]] = {}
        with self._lock:
            self._down = None  # tried again (a registry that was down may be back)
            for subject, schema in schemas:
                key = (subject, schema)
                if key not in self._ids and key not in self._pending:
                    self._pending[key] = Future()
                    chains.setdefault(subject, []).append(schema)
            if not chains:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="binlake-registry")
            for subject, chain in chains.items():
                tail = self._tails[subject] = self._pool.submit(self._chain, subject, chain, self._tails.get(subject))
                tail.add_done_callback(functools.partial(self._untail, subject))

    def _untail(self, subject: str, done: Future[BaseException | None]) -> None:
        with self._lock:
            if self._tails.get(subject) is done:
                del self._tails[subject]

    def _chain(self, subject: str, chain: list[str], after: Future[BaseException | None] | None) \
            -> BaseException | None:
        """``prepare``'s registrations of one subject, in order: its failure, if one failed (or an earlier one)."""
        if after is not None:
            wait_for([after])
        # a registry down: the queued ones fail without a request; a subject's failed version: its later ones too
        failure: BaseException | None = self._down or self._failed.get(subject)
        for schema in chain:
            key = (subject, schema)
            future = self._pending[key]
            if failure is None:
                try:
                    future.set_result(self._register(subject, schema))
                except BaseException as exc:  # raised to the caller that needs the schema (schema_id)
                    failure = exc
                    if isinstance(exc, RegistryUnavailable):
                        self._down = exc
            if failure is not None:
                self._failed[subject] = failure
                future.set_exception(failure)
            with self._lock:
                del self._pending[key]  # done: its id is in _ids, or its failure goes to those holding the future
        return failure

    _ask = "/subjects/{}/versions"  # registers the schema (if new), answers its id

    def _register(self, subject: str, schema: str) -> int:
        """The registry's id of the schema under the subject (``POST`` of ``_ask``)."""
        status, body = self._call("POST", self._ask.format(quote(subject, safe="")), {"schema": schema})
        if status == 200 and isinstance(body, dict) and isinstance(body.get("id"), int):
            self._ids[(subject, schema)] = body["id"]
            return int(body["id"])
        raise self._refusal(status, body, subject)

    def _refusal(self, status: int, body: Any, subject: str) -> SchemaRefused:
        return SchemaRefused(f"schema of subject {subject} refused by the registry at {self.shown}: "
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
        registry failed (5xx). Each thread keeps its connection alive from call to call."""
        data = json.dumps(body).encode() if body is not None else None
        try:
            for attempt in (1, 2):
                connection, reused = self._connection()
                try:
                    connection.request(method, self._target + self._path + path, data, self._headers)
                    response = connection.getresponse()
                    status, raw = response.status, response.read()
                    break
                except _STALE:
                    connection.close()
                    self._local.connection = None
                    if not reused or attempt == 2:  # not a kept-alive connection closed meanwhile
                        raise
            if response.will_close:
                connection.close()
                self._local.connection = None
        except (OSError, ValueError, http.client.HTTPException) as exc:  # refused, reset, timed out, TLS failures
            broken, self._local.connection = getattr(self._local, "connection", None), None
            if broken is not None:
                broken.close()
            raise RegistryUnavailable(f"schema registry {self.shown}: {exc}") from None
        if status >= 500:
            raise RegistryUnavailable(f"schema registry {self.shown}: HTTP {status} {raw[:200]!r}")
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to the registry (through the environment's proxy for its scheme, as urllib
        would: ``https_proxy``, ``no_proxy``...), and whether it served a request before."""
        kept: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if kept is not None:
            return kept, True
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {self.shown}")
        host, port = parts.hostname or "", parts.port
        proxy = getproxies().get(parts.scheme)
        via = urlsplit(proxy if "//" in proxy else f"http://{proxy}") if proxy and not proxy_bypass(host) else None
        self._target = ""  # what goes before a request's path: the origin, to a plain HTTP proxy
        if parts.scheme == "https":
            if self._context is None:
                self._context = ssl.create_default_context(cafile=self.ca_file)
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                via.hostname or "" if via else host, via.port if via else port, timeout=self.timeout,
                context=self._context)
            if via is not None:
                connection.set_tunnel(host, port)
        else:
            connection = http.client.HTTPConnection(via.hostname or "" if via else host, via.port if via else port,
                                                    timeout=self.timeout)
            if via is not None:
                self._target = f"http://{parts.netloc}"
        self._local.connection = connection
        return connection, False


class SchemaLookup(RegistryClient):
    """``SchemaIds`` of a registry whose schemas are registered by someone else (the Avro converter's
    ``auto.register.schemas=false``): each schema is looked up under its subject (``POST /subjects/<subject>``),
    never registered; a subject, or a schema, the registry does not have is ``SchemaRefused``."""

    _ask = "/subjects/{}"  # answers the id of the subject's version that is the schema

    def _refusal(self, status: int, body: Any, subject: str) -> SchemaRefused:
        if status != 404:
            return super()._refusal(status, body, subject)
        code = body.get("error_code") if isinstance(body, dict) else None
        reason = "no such subject" if code == 40401 else "none of the subject's versions is this schema"
        return SchemaRefused(f"schema of subject {subject} not found in the registry at {self.shown}: {reason} "
                             "(debezium.auto_register_schemas is false: register it first)")
