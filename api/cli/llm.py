"""CLI: `crossroads llm check`, the first thing to run after setting ANTHROPIC_API_KEY."""
from __future__ import annotations

import typer
from rich.table import Table
from rich.text import Text

from api.cli.common import JsonOption, app, fail, out, print_json
from core.settings import get_settings

llm_app = typer.Typer(help="The Anthropic API as Crossroads uses it.", no_args_is_help=True)
app.add_typer(llm_app, name="llm")


@llm_app.command("check")
def check_command(json_out: bool = JsonOption) -> None:
    """One small real call per configured model (about $0.01 each): latency, tokens, cost, and whether
    forced tool use and prompt caching work. Exit 1 when a model fails the check or no key is set."""
    from core.llm.check import check_models

    settings = get_settings()
    if not settings.llm_enabled:
        fail(ValueError("ANTHROPIC_API_KEY is not set: export it (or put it in .env) and run "
                         "`crossroads llm check` again; without it every step runs offline"))
    checks = check_models(settings)
    if json_out:
        print_json([c.as_dict() for c in checks])
    else:
        table = Table(title="crossroads llm check")
        for name in ("model", "tasks", "latency", "tokens in / out", "cost", "forced tool use", "prompt caching"):
            table.add_column(name)
        for c in checks:
            if c.error:
                # the error quotes the API's reply: printed as Text, never read as markup
                table.add_row(c.model, ", ".join(c.tasks), "", "", "", Text.assemble(("failed", "red"), f": {c.error}"), "")
                continue
            table.add_row(c.model, ", ".join(c.tasks), f"{c.latency_ms:.0f} ms", f"{c.input_tokens} / {c.output_tokens}",
                          "cost unknown" if c.cost_usd is None else f"${c.cost_usd:.4f}", c.forced_tool, c.prompt_caching)
        out.print(table)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
