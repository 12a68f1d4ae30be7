"""Read replicas in the HTTP API (active only with CROSSROADS_DATABASE_READ_URLS).

Each request's reads form one read session (core.replicas): searches and asks read from a healthy
replica, everything else from the primary. Three headers:

- `X-Crossroads-LSN` on the response to a request that changed something (a non-GET request that
  read nothing through the replicas): the primary's WAL position after it, e.g. `0/3000148`;
- `X-Crossroads-Min-LSN` on a later request: its reads wait (bounded) for a replica that has replayed
  that far, else read the primary, so a client sees its own writes;
- `X-Crossroads-Read` on a response that read: `replica` or `primary`, where its reads went.

A replica that fails under a request (killed, restarted, a query cancelled by replay) makes the
request run once more, on the primary, before anything is sent: the client gets the answer, not a
503 or a degraded one. Only a streamed answer (SSE) that has started cannot be taken back.
"""
from __future__ import annotations

import logging

import anyio
import psycopg
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.http import problems
from core.replicas import PRIMARY, format_lsn, parse_lsn, read_session

log = logging.getLogger("crossroads.api")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class ReadRoutingMiddleware:
    def __init__(self, app: ASGIApp, services):
        self.app, self.services = app, services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.services.settings.database_read_urls:
            await self.app(scope, receive, send)
            return
        raw = Headers(scope=scope).get("x-crossroads-min-lsn")
        try:
            min_lsn = parse_lsn(raw) if raw else None
        except ValueError as exc:
            await problems.problem_response(
                400, "Bad X-Crossroads-Min-LSN", f"{exc}; pass back the X-Crossroads-LSN header of a write's response.",
                scope.get("path", ""), slug="bad-min-lsn")(scope, receive, send)
            return
        received: list[Message] = []

        async def recording_receive() -> Message:
            message = await receive()
            received.append(message)
            return message

        if await self._attempt(scope, recording_receive, send, min_lsn, primary=False):
            return
        log.warning("a read replica failed under %s %s; running it again on the primary", scope["method"],
                    scope.get("path"))
        replay = iter(received)

        async def replaying_receive() -> Message:
            return next(replay, None) or await receive()

        await self._attempt(scope, replaying_receive, send, min_lsn, primary=True)

    async def _attempt(self, scope: Scope, receive: Receive, send: Send, min_lsn: int | None, *, primary: bool) -> bool:
        """Run the request; False when a replica failed under it before its response started (nothing was
        sent: the caller runs it again on the primary)."""
        dropped = False
        with read_session(min_lsn, primary=primary) as session:
            async def routed_send(message: Message) -> None:
                nonlocal dropped
                if message["type"] == "http.response.start":
                    if session.replica_failed and not primary:
                        dropped = True
                    else:
                        await self._headers(scope, message, session)
                if not dropped:
                    await send(message)

            await self.app(scope, receive, routed_send)
        return not dropped

    async def _headers(self, scope: Scope, message: Message, session) -> None:
        headers = MutableHeaders(scope=message)
        if session.reads:
            headers["X-Crossroads-Read"] = "primary" if session.replica in (None, PRIMARY) else "replica"
        elif scope["method"] not in SAFE_METHODS and 200 <= message["status"] < 300:
            try:
                lsn = await anyio.to_thread.run_sync(self.services.db().current_lsn)
            except psycopg.Error as exc:  # the write is done; only the client's read-your-writes hint is lost
                log.warning("could not read the primary's WAL position for X-Crossroads-LSN: %s", exc)
                return
            headers["X-Crossroads-LSN"] = format_lsn(lsn)
