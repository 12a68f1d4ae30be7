"""CLI: `crossroads serve` (the HTTP API) and `crossroads token create|revoke|list`."""
from __future__ import annotations

import asyncio
from typing import Optional

import h11
import typer
from rich.table import Table
from uvicorn.protocols.http.h11_impl import H11Protocol

from api.cli.common import JsonOption, app, database, err, fail, out, parse_groups, print_json
from core.errors import CrossroadsError
from core.settings import get_settings

token_app = typer.Typer(help="API tokens: each maps to a tenant, its groups and a role.", no_args_is_help=True)
app.add_typer(token_app, name="token")


# Idle keep-alive connections close after this (uvicorn's default, stated: it bounds idle sockets).
KEEP_ALIVE_S = 5
# A request head (request line + headers) larger than this is refused with 400 (h11's default, stated).
MAX_HEAD_BYTES = 16 * 1024


class HeadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's head.

    uvicorn (0.54) has no header-read timeout: its keep-alive timer runs only between requests and is
    cancelled by the first byte, so a client that connects and sends nothing, half a request line,
    or a header byte now and then holds its connection, and one of CROSSROADS_API_MAX_CONNECTIONS,
    forever (slowloris). Here the whole head must arrive within CROSSROADS_API_HEADER_TIMEOUT_S of the
    connection opening or of the previous response, however it trickles in; else the connection is
    closed. The body is not timed (a slow upload is legitimate); CROSSROADS_API_MAX_BODY_BYTES bounds it.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.head_timeout_s = get_settings().api_header_timeout_s
        self.head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head is in (or the connection is done)
            self._cancel_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # a pipelined request already buffered has been read by now: wait only for one not yet here
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._cancel_deadline()
        self.head_deadline = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _cancel_deadline(self) -> None:
        if self.head_deadline is not None:
            self.head_deadline.cancel()
            self.head_deadline = None

    def _head_too_slow(self) -> None:
        self.head_deadline = None
        if not self.transport.is_closing():
            self.logger.info("%s: no complete request head within %g s (CROSSROADS_API_HEADER_TIMEOUT_S); closed",
                             "%s:%d" % self.client if self.client else "client", self.head_timeout_s)
            self.transport.close()


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0 for every interface)."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level: debug, info, warning, error."),
    workers: int = typer.Option(1, "--workers", min=1, max=64,
                                help="Worker processes (each with its own pool and models; about one per core)."),
) -> None:
    """Run the HTTP API (FastAPI + uvicorn). Docs at /docs; every /v1 call needs a bearer token."""
    import uvicorn

    from api.http.app import create_app

    settings = get_settings()
    # fail here, with a clear message, when the database is unreachable or too old
    with database(settings) as db, db.connection() as conn:
        conn.execute("SELECT 1")
    _check_port_free(host, port)
    err.print(f"Crossroads API on http://{host}:{port} (docs: /docs, health: /healthz, metrics: /metrics)")
    options = {"host": host, "port": port, "log_level": log_level, "proxy_headers": True,
               "http": HeadDeadlineProtocol, "timeout_keep_alive": KEEP_ALIVE_S,
               "h11_max_incomplete_event_size": MAX_HEAD_BYTES, "limit_concurrency": settings.api_max_connections}
    if workers == 1:
        uvicorn.run(create_app(settings), **options)
    else:  # each worker process builds its own app from the same environment
        uvicorn.run("api.http.app:create_app", factory=True, workers=workers, **options)


def _check_port_free(host: str, port: int) -> None:
    """Fail before printing the URL when something already listens there (uvicorn would print it, then exit 3)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        fail(CrossroadsError(f"cannot listen on {host!r}: {exc.strerror}; pass an address of this machine with --host"))
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as exc:
            fail(CrossroadsError(f"cannot listen on {host}:{port}: {exc.strerror}; another server (an earlier "
                                 f"`crossroads serve`?) holds it: stop it, or pick another port with --port"))


@token_app.command("create")
def token_create(
    tenant: str = typer.Option(..., "--tenant", "-t", help="Tenant the token reads and writes."),
    groups: str = typer.Option(..., "--groups", "-g", help="Comma-separated groups; the token sees documents of these."),
    role: str = typer.Option("reader", "--role", help="reader (ask, search, browse), writer (+ documents), "
                                                      "admin (+ graph builds)."),
    name: str = typer.Option("", "--name", help="A note saying who or what uses the token."),
    json_out: bool = typer.Option(False, "--json", metavar="", help="Print {token, id, tenant, groups, role} instead of the bare token."),
) -> None:
    """Create a token and print it (only once: just its hash is stored)."""
    from api import tokens

    with database(get_settings()) as db, db.connection() as conn:
        try:
            token, record = tokens.create_token(conn, tenant, parse_groups(groups), role, name)
        except ValueError as exc:
            fail(CrossroadsError(str(exc)))
    if json_out:
        print_json({"token": token, **record.to_dict()})
        return
    print(token)


@token_app.command("revoke")
def token_revoke(
    token_or_id: str = typer.Argument(..., help="The token, or its id from `crossroads token list`."),
    json_out: bool = JsonOption,
) -> None:
    """Revoke a token at once: the next request with it gets 401."""
    from api import tokens

    with database(get_settings()) as db, db.connection() as conn:
        revoked = tokens.revoke_token(conn, token_or_id)
    if revoked is None:
        fail(CrossroadsError("no live token matches; see `crossroads token list`"))
    if json_out:
        print_json({"revoked": revoked})
        return
    out.print(f"revoked token {revoked}")


@token_app.command("list")
def token_list(
    tenant: Optional[str] = typer.Option(None, "--tenant", "-t", help="Only this tenant's tokens."),
    json_out: bool = JsonOption,
) -> None:
    """Tokens by id (never the secret), with tenant, groups, role and whether revoked."""
    from api import tokens

    with database(get_settings()) as db, db.connection() as conn:
        records = tokens.list_tokens(conn, tenant)
    if json_out:
        print_json({"tokens": [r.to_dict() for r in records]})
        return
    table = Table(title=f"{len(records)} tokens")
    for col in ("id", "tenant", "groups", "role", "name", "created", "revoked"):
        table.add_column(col)
    for r in records:
        table.add_row(r.id, r.tenant, ",".join(r.groups), r.role, r.name, f"{r.created_at:%Y-%m-%d %H:%M}",
                      f"{r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "")
    out.print(table)
