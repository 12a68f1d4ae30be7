"""CLI: `crossroads serve` (the HTTP API) and `crossroads token create|revoke|list`."""
from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from api.cli import JsonOption, _database, _fail, _groups, _print_json, app, err, out
from core.errors import CrossroadsError
from core.settings import get_settings

token_app = typer.Typer(help="API tokens: each maps to a tenant, its groups and a role.", no_args_is_help=True)
app.add_typer(token_app, name="token")


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

    from api.app import create_app

    settings = get_settings()
    # fail here, with a clear message, when the database is unreachable or too old
    with _database(settings) as db, db.connection() as conn:
        conn.execute("SELECT 1")
    err.print(f"Crossroads API on http://{host}:{port} (docs: /docs, health: /healthz, metrics: /metrics)")
    if workers == 1:
        uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level, proxy_headers=True)
    else:  # each worker process builds its own app from the same environment
        uvicorn.run("api.app:create_app", factory=True, workers=workers, host=host, port=port, log_level=log_level,
                    proxy_headers=True)


@token_app.command("create")
def token_create(
    tenant: str = typer.Option(..., "--tenant", "-t", help="Tenant the token reads and writes."),
    groups: str = typer.Option(..., "--groups", "-g", help="Comma-separated groups; the token sees documents of these."),
    role: str = typer.Option("reader", "--role", help="reader (ask, search, browse), writer (+ documents), "
                                                      "admin (+ graph builds)."),
    name: str = typer.Option("", "--name", help="A note saying who or what uses the token."),
    json_out: bool = typer.Option(False, "--json", help="Print {token, id, tenant, groups, role} instead of the bare token."),
) -> None:
    """Create a token and print it (only once: just its hash is stored)."""
    from api import tokens

    with _database(get_settings()) as db, db.connection() as conn:
        try:
            token, record = tokens.create_token(conn, tenant, _groups(groups), role, name)
        except ValueError as exc:
            _fail(CrossroadsError(str(exc)))
    if json_out:
        _print_json({"token": token, **record.to_dict()})
        return
    print(token)


@token_app.command("revoke")
def token_revoke(
    token_or_id: str = typer.Argument(..., help="The token, or its id from `crossroads token list`."),
    json_out: bool = JsonOption,
) -> None:
    """Revoke a token at once: the next request with it gets 401."""
    from api import tokens

    with _database(get_settings()) as db, db.connection() as conn:
        revoked = tokens.revoke_token(conn, token_or_id)
    if revoked is None:
        _fail(CrossroadsError("no live token matches; see `crossroads token list`"))
    if json_out:
        _print_json({"revoked": revoked})
        return
    out.print(f"revoked token {revoked}")


@token_app.command("list")
def token_list(
    tenant: Optional[str] = typer.Option(None, "--tenant", "-t", help="Only this tenant's tokens."),
    json_out: bool = JsonOption,
) -> None:
    """Tokens by id (never the secret), with tenant, groups, role and whether revoked."""
    from api import tokens

    with _database(get_settings()) as db, db.connection() as conn:
        records = tokens.list_tokens(conn, tenant)
    if json_out:
        _print_json({"tokens": [r.to_dict() for r in records]})
        return
    table = Table(title=f"{len(records)} tokens")
    for col in ("id", "tenant", "groups", "role", "name", "created", "revoked"):
        table.add_column(col)
    for r in records:
        table.add_row(r.id, r.tenant, ",".join(r.groups), r.role, r.name, f"{r.created_at:%Y-%m-%d %H:%M}",
                      f"{r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "")
    out.print(table)
