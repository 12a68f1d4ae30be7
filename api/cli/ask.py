"""CLI: ask a question through the router, or only classify questions."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from api.cli.common import (JsonOption, TenantOption, app, database, err, fail, out, parse_groups, print_json,
                            require_groups, require_tenant)
from core.errors import CrossroadsError
from core.settings import get_settings

RouteOption = typer.Option("auto", "--route", "-r", help="auto (classify) | local | global | multihop | drift "
                           "(global to local: community reports, then follow-up local searches).")


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question, in Russian or English."),
    tenant: str = TenantOption,
    groups: str = typer.Option(..., "--groups", "-g", help="The asker's groups (comma-separated); ACLs are applied in SQL."),
    route: str = RouteOption,
    offline: bool = typer.Option(False, "--offline", metavar="", help="Answer without the LLM even when a key is set."),
    budget: Optional[str] = typer.Option(
        None, "--budget", help="The global route's cost dial: LLM calls for the question (6: one for the answer, the "
        "rest split between rating and mapping community reports) or dollars ($0.05). No effect offline."),
    json_out: bool = JsonOption,
) -> None:
    """Answer a question by its route, with checked citations.

    local: hybrid search + rerank; global: map-reduce over the graph's community reports;
    multihop: an agentic search loop. Without ANTHROPIC_API_KEY answers are extractive (labelled offline).
    """
    from graph.query.global_budget import parse_budget
    from router.service import QuestionRouter

    settings = get_settings()
    try:
        dial = parse_budget(budget)
        with database(settings) as db:
            require_tenant(db, tenant)
            require_groups(db, tenant, parse_groups(groups))
            with QuestionRouter(db, settings, use_llm=False if offline else None) as router:
                if json_out:
                    print_json(router.ask(tenant, parse_groups(groups), question, route, budget=dial).to_dict())
                    return
                answer = _stream_answer(router.ask_events(tenant, parse_groups(groups), question, route, budget=dial))
    except (CrossroadsError, ValueError) as exc:
        fail(exc)
    _print_sources(answer)


def _stream_answer(events) -> dict:
    """Prints the route, then the answer's tokens as they arrive (a withdrawn answer is said to be so,
    and the one that stands follows); returns the final answer."""
    for name, data in events:
        if name == "error":
            raise CrossroadsError(f"{data['title']}: {data['detail']}")
        if name == "route":
            out.print(f"[bold]route:[/bold] {data['route']} ({data['classifier']}, confidence "
                      f"{data['confidence']:.2f}): {escape(data['reason'])}")
            out.print()
        elif name == "token":
            out.file.write(data["text"])
            out.file.flush()
        elif name == "withdraw":
            out.print()
            err.print(f"[red]the answer above is withdrawn:[/red] {escape(data['reason'])}; the answer that stands:")
        elif name == "done":
            out.print()
            return data
    raise CrossroadsError("the answer ended before it was complete; ask again")


def _print_sources(answer: dict) -> None:
    labels = [label for label, on in (("offline (extractive, no LLM)", answer["offline"]),
                                      ("degraded", answer["degraded"]),
                                      ("partial: the search budget ran out", answer["partial"])) if on]
    if labels:
        out.print(f"[yellow]{escape('; '.join(labels))}[/yellow]")
    out.print()
    for c in answer["citations"]:
        where = c["doc_id"] or "report"
        out.print(f"[bold][{c['number']}][/bold] {escape(c['title'])} [dim]({escape(where)}"
                  f"{' › ' + escape(c['heading']) if c['heading'] else ''})[/dim]")
        out.print(f"    [dim]{escape(c['quote'][:300])}[/dim]")
        if c["documents"]:
            out.print("    [dim]documents: " + escape(", ".join(doc["doc_id"] for doc in c["documents"][:10])) + "[/dim]")
    for reason in answer["degraded_reasons"]:
        err.print(f"[yellow]degraded:[/yellow] {escape(reason)}")
    for error in answer["errors"]:
        err.print(f"[red]error:[/red] {escape(error)}")
    u = answer["usage"]
    cost = "cost unknown" if u.get("cost_usd") is None else f"${u['cost_usd']:.4f}"
    out.print(f"[dim]{answer['latency_ms']:.0f} ms · LLM calls {u.get('llm_calls', 0)} · tokens in "
              f"{u.get('input_tokens', 0)} out {u.get('output_tokens', 0)} · {cost}[/dim]")


@app.command()
def route(
    question: Optional[str] = typer.Argument(None, help="One question (or use --file)."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="JSONL with `question` (and optional `qid`) per line; - for stdin."),
    llm: bool = typer.Option(False, "--llm", metavar="", help="Use the LLM classifier (needs ANTHROPIC_API_KEY); default: offline."),
    cues: bool = typer.Option(False, "--cues", metavar="", help="Route by the cue table alone: no embedding model, ~5,000 questions/s."),
    json_out: bool = JsonOption,
) -> None:
    """Only classify: local, global or multihop, with a confidence and the reason. No database needed.

    Offline, the learned router (question embedding + cues, as `ask` routes) unless --cues. With --json, one
    JSON object per question (`qid` when given, `route`, `confidence`, `reason`; `probabilities` and
    `low_confidence` from the learned router).
    """
    from core.embeddings import make_embedder
    from core.llm.client import make_llm
    from router.classify import HeuristicClassifier, classify
    from router.route_model import offline_classifier

    if (question is None) == (file is None):
        fail(ValueError("give one question or --file questions.jsonl (not both)"))
    model = make_llm(get_settings()) if llm else None
    if llm and model is None:
        fail(ValueError("--llm needs ANTHROPIC_API_KEY; without it drop --llm to use the offline classifier"))
    items = [{"question": question}] if question is not None else list(_read_questions(file))
    settings = get_settings()
    offline = HeuristicClassifier() if cues else offline_classifier(settings, make_embedder(settings))
    bad = 0
    rows = []
    for item in items:
        if "error" in item:
            bad += 1
            err.print(f"[red]skipped[/red] {item['error']}")
            continue
        decision = classify(item["question"], llm=model, offline=offline)
        row = {**({"qid": item["qid"]} if "qid" in item else {}), "route": decision.route,
               "confidence": round(decision.confidence, 3), "reason": decision.reason}
        if "probabilities" in decision.features:
            row |= {"probabilities": decision.features["probabilities"],
                    "low_confidence": bool(decision.features["low_confidence"])}
        rows.append(row)
        if json_out:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    if not json_out:
        table = Table("qid", "route", "confidence", "reason", "question")
        for row, item in zip(rows, [i for i in items if "error" not in i]):
            table.add_row(str(row.get("qid", "")), row["route"], f"{row['confidence']:.2f}", escape(row["reason"]),
                          escape(item["question"][:80]))
        out.print(table)
    if bad:
        raise typer.Exit(3)


def _read_questions(path: Path):
    stream = sys.stdin if str(path) == "-" else None
    try:
        lines = (stream or path.open(encoding="utf-8")).read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        fail(ValueError(f"cannot read {path}: {exc}"))
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            text = item.get("question") if isinstance(item, dict) else None
            if not isinstance(text, str) or not text.strip():
                raise ValueError("no non-empty `question` string")
        except ValueError as exc:
            yield {"error": f"{path}:{n}: {exc}"}
            continue
        yield {"question": text, **({"qid": str(item["qid"])} if "qid" in item else {})}
