"""The analysts' web page: `/` serves `web/index.html`, `/static/` its script, style sheet and the
vendored libraries; `/docs` and `/redoc` serve Swagger UI and ReDoc from the same vendored files.

Everything the page needs ships in this package, so it works offline: hand-written JavaScript and
CSS, plus minified builds of npm packages in `web/vendor/` (versions and licences in
`web/vendor/README.md`). The page talks to the same app's `/v1` API with the bearer token the
analyst pastes in; it holds no secret of its own. A strict Content-Security-Policy allows nothing
but this origin: no inline script, no third-party resource, no framing.
"""
from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.types import Receive, Scope, Send

from api.http.auth import Principal, reader
from api.http.routes_query import ERRORS

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


class Me(BaseModel):
    tenant: str
    groups: list[str]
    role: str
    subject: str  # the token's public id, or `jwt:<sub>`


session_routes = APIRouter(prefix="/v1", tags=["query"])


@session_routes.get("/me", response_model=Me, responses=ERRORS,
                    summary="Who the token is: tenant, groups, role (the page shows them and keys its history by them)")
def me(principal: Principal = Depends(reader)) -> Me:
    return Me(tenant=principal.tenant, groups=list(principal.groups), role=principal.role, subject=principal.subject)


def mount_web(app: FastAPI) -> None:
    """Serve the page at `/`, its assets under `/static/`, and the API docs at `/docs` and `/redoc`.

    The app must be created with `docs_url=None, redoc_url=None`: FastAPI's own pages load their
    scripts from a CDN and are blank offline."""
    index = WEB_DIR / "index.html"
    app.include_router(session_routes)

    @app.get("/", include_in_schema=False)
    def web_index() -> FileResponse:
        return FileResponse(index, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    oauth2_redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} — API",
                                   swagger_js_url="/static/vendor/swagger-ui-bundle.js",
                                   swagger_css_url="/static/vendor/swagger-ui.css",
                                   swagger_favicon_url="data:,", oauth2_redirect_url=oauth2_redirect)

    @app.get(oauth2_redirect, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        page = get_redoc_html(openapi_url=app.openapi_url, title=f"{app.title} — API reference",
                              redoc_js_url="/static/vendor/redoc.standalone.js", redoc_favicon_url="data:,",
                              with_google_fonts=False)
        # ReDoc's menu always shows Redocly's logo from their CDN: the browser is told not to fetch it
        page.headers["Content-Security-Policy"] = "img-src 'self' data:"
        return page

    app.mount("/static", _Assets(directory=WEB_DIR), name="static")
