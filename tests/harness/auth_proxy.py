"""A reverse proxy in front of a real REST catalog server that requires authentication: Iceberg's REST catalog
test server issues OAuth2 tokens (its ``/v1/oauth/tokens`` answers a client-credentials request with
``client-credentials-token:sub=<client_id>``) but accepts any request, authenticated or not. This proxy forwards
every request to it unchanged and answers 401 (the REST spec's error body) to one without an
``Authorization: Bearer <token>`` of ``accepted`` (the token endpoint excepted, as a server's own is); it keeps
the Authorization headers it saw, by path."""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit


class AuthProxy:
    def __init__(self, upstream: str, accepted: set[str]) -> None:
        self.upstream = urlsplit(upstream)
        self.accepted = accepted
        self.seen: list[tuple[str, str | None]] = []  # (path, Authorization header)
        self.refused = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                auth = self.headers.get("Authorization")
                proxy.seen.append((self.path, auth))
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.endswith("/oauth/tokens") and (auth or "").removeprefix("Bearer ") not in \
                        proxy.accepted:
                    proxy.refused += 1
                    error = {"error": {"message": "Not authorized: a bearer token is required",
                                       "type": "NotAuthorizedException", "code": 401}}
                    self._answer(401, json.dumps(error).encode(), [("Content-Type", "application/json")])
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body or None, headers)
                answer = conn.getresponse()
                data = answer.read()
                conn.close()
                kept = [(k, v) for k, v in answer.getheaders()
                        if k.lower() not in ("content-length", "transfer-encoding", "connection")]
                self._answer(answer.status, data, kept)

            def _answer(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
