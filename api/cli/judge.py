"""CLI: `crossroads judge`: two configurations' answers to a question set, judged pairwise by the LLM, and their
faithfulness (evaluation/judging.py). Evaluation only: needs ANTHROPIC_API_KEY; the HTTP app never imports it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from api.cli.common import (JsonOption, TenantOption, app, database, err, fail, out, parse_groups, print_json,
                            require_groups, require_tenant)
from core.errors import CrossroadsError
from core.settings import get_settings


def parse_config(spec: str) -> tuple[str, str | None]:
    """"global", "local", "drift", "multihop", "auto"; "global@6" / "global@$0.05": with a budget."""
    route, _, budget = spec.partition("@")
    route = route.strip()
    if route not in ("auto", "local", "global", "multihop", "drift"):
        raise CrossroadsError(f"a configuration is ROUTE or ROUTE@BUDGET (auto, local, global, multihop, drift), "
                              f"got {spec!r}")
    return route, budget.strip() or None


def read_questions(path: Path, limit: int | None) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        if not isinstance(item, dict) or not str(item.get("question", "")).strip():
            raise CrossroadsError(f"{path}:{n}: no `question`")
        rows.append({"qid": str(item.get("qid", n)), "question": item["question"]})
    return rows[:limit] if limit else rows


@app.command()
def judge(
    questions: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL with `question` (and `qid`)."),
    tenant: str = TenantOption,
    groups: str = typer.Option(..., "--groups", "-g", help="The asker's groups (comma-separated)."),
    a: str = typer.Option("global", "--a", help="Configuration A: ROUTE or ROUTE@BUDGET (global@6)."),
    b: str = typer.Option("local", "--b", help="Configuration B (local: naive RAG, one hybrid search)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N questions."),
    faithfulness: bool = typer.Option(True, "--faithfulness/--no-faithfulness",
                                      help="Also score each answer's claims against its cited passages."),
    output: Optional[Path] = typer.Option(None, "--out", help="Write the whole result (answers, every judgment) here."),
    json_out: bool = JsonOption,
) -> None:
    """Pairwise LLM judging of two configurations on a question set: comprehensiveness, diversity, empowerment,
    directness (GraphRAG's criteria), each pair judged twice with the order swapped; ties and failed judgments
    counted. Prints win rates with their counts, and faithfulness (supported claims / claims)."""
    from evaluation.judging import Case, judge_cases, table_rows
    from core.llm.client import make_llm
    from graph.query.global_budget import parse_budget
    from router.service import QuestionRouter

    settings = get_settings()
    judge_llm = make_llm(settings)
    if judge_llm is None:
        fail(CrossroadsError("crossroads judge needs ANTHROPIC_API_KEY: the judge is an LLM"))
    try:
        configs = {"A": parse_config(a), "B": parse_config(b)}
        budgets = {side: parse_budget(budget) for side, (_, budget) in configs.items()}
        items = read_questions(questions, limit)
        with database(settings) as db:
            require_tenant(db, tenant)
            require_groups(db, tenant, parse_groups(groups))
            with QuestionRouter(db, settings) as router:
                answers = {side: [router.ask(tenant, parse_groups(groups), item["question"], route,
                                             budget=budgets[side]).to_dict() for item in items]
                           for side, (route, _) in configs.items()}
    except (CrossroadsError, ValueError) as exc:
        fail(exc)
    cases = [Case(item["qid"], item["question"], ans_a["answer"], ans_b["answer"],
                  {c["number"]: c["quote"] for c in ans_a["citations"]},
                  {c["number"]: c["quote"] for c in ans_b["citations"]})
             for item, ans_a, ans_b in zip(items, answers["A"], answers["B"])]
    result = judge_cases(judge_llm, cases, faithfulness=faithfulness)
    payload = {"questions_file": str(questions), "a": a, "b": b, **result,
               "answers": {side: [{"qid": c.qid, "route": x["route"]["route"], "answer": x["answer"],
                                   "degraded": x["degraded"], "usage": x["usage"]}
                                  for c, x in zip(cases, answers[side])] for side in "AB"}}
    if output:
        output.write_text(json.dumps(payload, ensure_ascii=False, indent=2, default=str), encoding="utf-8")
    if json_out:
        print_json({k: v for k, v in payload.items() if k != "judgments"})
        return
    table = Table(title=f"A = {a}  vs  B = {b}: {len(cases)} questions, each pair judged in both orders")
    for col in ("criterion", "A", "B", "tie", "failed", "win A", "pairs A/B/tie/fail"):
        table.add_column(col, justify="right")
    for row in table_rows(result):
        table.add_row(*row)
    out.print(table)
    out.print("A, B, tie, failed: judgments (each question twice per criterion, the order swapped); win A = "
              "(A + tie / 2) / judged; pairs: both orders read as one verdict (disagreeing: tie)")
    pos = result["position"]
    out.print(f"position: the answer shown first chosen {pos['first']}, second {pos['second']}")
    for side in ("A", "B") if faithfulness else ():
        f = result["faithfulness"][side]
        mean = "—" if f["mean"] is None else f"{f['mean']:.2f}"
        out.print(f"faithfulness {side}: {mean} (supported claims / claims, over {f['scored']} answers; "
                  f"{f['failed']} failed)")
    for failure in result["failed"][:10]:
        err.print(f"[yellow]failed judgment[/yellow] {escape(failure['qid'])} {failure['criterion']} "
                  f"{failure['order']}: {escape(failure['error'])}")
