"""The analysts' web page: `/` serves `web/index.html`, `/static/` its script and style sheet.

Everything the page needs ships in this package (hand-written JavaScript and CSS, no framework and
no CDN), so it works offline. The page talks to the same app's `/v1` API with the bearer token the
analyst pastes in; it holds no secret of its own. A strict Content-Security-Policy allows nothing
but this origin: no inline script, no third-party resource, no framing.
"""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

WEB_DIR = Path(__file__).resolve().parent / "web"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # revalidate every load (ETag makes that cheap), so a new release is never mixed with a cached script
    "Cache-Control": "no-cache",
}


class _Assets(StaticFiles):
    """StaticFiles with the page's security and caching headers."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                for name, value in PAGE_HEADERS.items():
                    if name.lower().encode() not in present:
                        headers.append((name.lower().encode(), value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await super().__call__(scope, receive, with_headers)


def mount_web(app: FastAPI) -> None:
    """Serve the page at `/` and its assets under `/static/`."""
    index = WEB_DIR / "index.html"

    @app.get("/", include_in_schema=False)
    def web_index() -> FileResponse:
        return FileResponse(index, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    app.mount("/static", _Assets(directory=WEB_DIR), name="static")
