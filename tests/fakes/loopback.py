"""A tiny HTTP server on 127.0.0.1 for tests that stand in for paid APIs.

The real client code (httpx, the anthropic SDK) talks to it over a socket, so wire format,
headers, retries and timeouts are exercised for real. Each fake is a `respond(request)` function
returning `Reply`; every request is recorded for assertions.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, bytes/str -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (to trigger client timeouts)


class LoopbackServer:
    """Start with `with LoopbackServer(respond) as srv:`; `srv.url` is the base URL."""

    def __init__(self, respond: Callable[[Request], Reply]):
        self.respond = respond
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with outer._lock:
                    outer.requests.append(req)
                reply = outer.respond(req)
                if reply.delay_s:
                    threading.Event().wait(reply.delay_s)
                payload = reply.body
                if isinstance(payload, (dict, list)):
                    data = json.dumps(payload).encode("utf-8")
                    ctype = "application/json"
                elif isinstance(payload, str):
                    data = payload.encode("utf-8")
                    ctype = "text/plain; charset=utf-8"
                else:
                    data = payload or b""
                    ctype = "application/octet-stream"
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Type": ctype, **reply.headers}
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

            def log_message(self, *args) -> None:  # keep test output clean
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
