"""`crossroads judge` (api/judging.py): the swapping and counting as pure functions, the harness end to end
against the loopback fake (scripted judgments, and a fake that misbehaves: 429, 529, refusal, malformed
verdicts, each counted as a failed judgment), and the CLI on the fixtures' graph."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from evaluation.judging import (CRITERIA, Case, faithfulness_score, judge_cases, pair_verdict, shown, split_claims,
                         table_rows, tally, unswap)
from core.llm.client import make_llm
from core.settings import Settings
from tests.conftest import ROOT, crossroads
from tests.fakes.anthropic_server import FakeAnthropic, error, refusal, text, tool_use
from tests.test_global_llm import _all_relevant, phases


def test_orders_swap_and_unswap_to_the_configuration():
    assert shown("ab", "A text", "B text") == ("A text", "B text")
    assert shown("ba", "A text", "B text") == ("B text", "A text")
    assert [unswap("ab", w) for w in ("1", "2", "tie", None)] == ["A", "B", "tie", None]
    assert [unswap("ba", w) for w in ("1", "2", "tie", None)] == ["B", "A", "tie", None]


def test_a_pair_disagreeing_between_orders_is_a_tie_and_a_failed_half_leaves_the_other():
    assert pair_verdict("A", "A") == "A" and pair_verdict("A", "B") == "tie"
    assert pair_verdict(None, "B") == "B" and pair_verdict("tie", None) == "tie" and pair_verdict(None, None) is None


def test_tally_counts_wins_ties_and_failures_per_criterion():
    j = [{"qid": "q1", "criterion": "directness", "order": "ab", "verdict": "A"},
         {"qid": "q1", "criterion": "directness", "order": "ba", "verdict": "B"},
         {"qid": "q2", "criterion": "directness", "order": "ab", "verdict": "A"},
         {"qid": "q2", "criterion": "directness", "order": "ba", "verdict": None}]
    t = tally(j)["directness"]
    assert t["judgments"] == {"a": 2, "b": 1, "tie": 0, "failed": 1, "judged": 3, "win_rate_a": 0.6667,
                              "win_rate_b": 0.3333}
    assert t["pairs"]["tie"] == 1 and t["pairs"]["a"] == 1  # q1 disagreed, q2 kept its one judgment
    assert tally([])["diversity"]["judgments"]["win_rate_a"] is None


def test_claims_are_sentences_with_their_citations():
    claims = split_claims("Themes:\n- Rate limits were missing [1][3]. Vendors failed [2].\nNo source here.")
    assert claims == [("Rate limits were missing [1][3].", [1, 3]), ("Vendors failed [2].", [2]),
                      ("No source here.", [])]
    assert faithfulness_score([True, False, True, True]) == 0.75 and faithfulness_score([]) is None


def llm_for(api, concurrency: int = 4):
    return make_llm(Settings(anthropic_api_key="test-key", anthropic_base_url=api.url, llm_model_fast="claude-haiku-4-5",
                             llm_model_answer="claude-sonnet-5", llm_max_retries=0, llm_timeout_s=5.0,
                             llm_concurrency=concurrency))


def judging(body: dict):
    """Prefers the answer holding "[1]" (A's), whichever position it is shown in; claims: the odd ones supported."""
    tool = (body.get("tool_choice") or {}).get("name")
    msg = body["messages"][0]["content"]
    if tool == "judge_answers":
        first = re.search(r"<answer_1>(.*?)</answer_1>", msg, re.S).group(1)
        return tool_use("judge_answers", {"winner": "1" if "[1]" in first else "2", "reason": "cites"})
    if tool == "check_claims":
        n = len(re.findall(r"<claim n=", msg))
        return tool_use("check_claims", {"verdicts": [{"claim": i, "supported": i % 2 == 1} for i in range(1, n + 1)]})
    return text("ok")


CASES = [Case("q1", "Main themes?", "Rate limits [1]. Vendors [2].", "Vendors.", {1: "rate limit", 2: "vendor"}, {}),
         Case("q2", "Risks?", "Config drift [1].", "Drift and alerts.", {1: "config drift"}, {})]


def test_the_harness_swaps_each_pair_and_a_consistent_judge_favours_one_side_in_both_orders():
    with FakeAnthropic(handler=judging) as api:
        result = judge_cases(llm_for(api), CASES)
        judge_calls = sum(1 for b in api.bodies if (b.get("tool_choice") or {}).get("name") == "judge_answers")
    assert judge_calls == len(CASES) * len(CRITERIA) * 2
    for crit in CRITERIA:
        assert result["criteria"][crit]["judgments"] == {"a": 4, "b": 0, "tie": 0, "failed": 0, "judged": 4,
                                                          "win_rate_a": 1.0, "win_rate_b": 0.0}
        assert result["criteria"][crit]["pairs"]["a"] == 2
    assert result["position"] == {"first": 8, "second": 8}  # A was shown first half the time
    assert result["faithfulness"]["A"]["answers"][0] == {"qid": "q1", "claims": 2, "supported": 1, "score": 0.5}
    assert result["faithfulness"]["B"]["mean"] == 0.0  # B cites nothing: no claim can be supported
    assert table_rows(result)[0] == ("comprehensiveness", "4", "0", "0", "0", "1.00", "2/0/0/0")


def test_a_judge_preferring_the_first_position_favours_no_configuration():
    first = lambda body: (tool_use("judge_answers", {"winner": "1", "reason": "first"})  # noqa: E731
                          if (body.get("tool_choice") or {}).get("name") == "judge_answers" else judging(body))
    with FakeAnthropic(handler=first) as api:
        result = judge_cases(llm_for(api), CASES, faithfulness=False)
    t = result["criteria"]["diversity"]
    assert t["judgments"]["win_rate_a"] == 0.5 and t["pairs"]["tie"] == 2 and result["position"]["second"] == 0


def test_a_misbehaving_judge_is_counted_as_failed_judgments_never_dropped():
    with FakeAnthropic(error(429), error(529), handler=judging) as api:  # the client's retries are spent (0 here)
        result = judge_cases(llm_for(api, concurrency=1), CASES[:1], criteria=("directness",), faithfulness=False)
        assert api.calls == 2
    t = result["criteria"]["directness"]["judgments"]
    assert t["failed"] == 2 and t["judged"] == 0 and t["win_rate_a"] is None
    errors = [f["error"] for f in result["failed"]]
    assert len(errors) == 2 and "rate limit" in errors[0] and "529" in errors[1]
    with FakeAnthropic(refusal(), tool_use("judge_answers", {"winner": "maybe"}),
                       tool_use("judge_answers", {"winner": "maybe"}), handler=judging) as api:
        result = judge_cases(llm_for(api, concurrency=1), CASES[:1], criteria=("directness",), faithfulness=False)
        assert api.calls == 3  # a refusal is not asked again; a malformed verdict is, once
    assert [f["error"].split(":")[0] for f in result["failed"]] == ["RefusedError", "MalformedReply"]
    assert result["criteria"]["directness"]["judgments"]["failed"] == 2


def test_the_http_app_never_imports_the_judge():
    code = "import sys, api.http.app; sys.exit(1 if 'evaluation.judging' in sys.modules or 'api.cli.judge' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def judge_and_answer(body: dict):
    tool = (body.get("tool_choice") or {}).get("name") or (body.get("tools") or [{}])[0].get("name")
    if tool in ("judge_answers", "check_claims"):
        return judging(body)
    if tool in ("rate_reports", "record_points"):
        return phases()(_all_relevant(body))
    return text("The fixtures say this [1].")  # answers: local and the global reduce both cite [1]


def test_crossroads_judge_on_the_fixtures_against_the_fake(db, demo_tenant, cli_env, tmp_path):
    questions = tmp_path / "q.jsonl"
    rows = [json.loads(line) for line in (ROOT / "fixtures" / "questions.jsonl").read_text().splitlines()]
    questions.write_text("\n".join(json.dumps({"qid": r["qid"], "question": r["question"]})
                                   for r in rows if r.get("route") == "global")[:2000])
    with FakeAnthropic(handler=judge_and_answer) as api:
        env = dict(cli_env, ANTHROPIC_API_KEY="test-key", CROSSROADS_ANTHROPIC_BASE_URL=api.url,
                   CROSSROADS_LLM_MAX_RETRIES="0", CROSSROADS_ROUTER_LLM_CLASSIFIER="false")
        proc = crossroads(env, "judge", str(questions), "--tenant", demo_tenant, "--groups", "public,staff",
                          "--a", "global@4", "--b", "local", "--limit", "1", "--out", str(tmp_path / "r.json"))
    print(proc.stdout)
    assert "comprehensiveness" in proc.stdout and "win A" in proc.stdout and "faithfulness A" in proc.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    for crit in CRITERIA:
        j = result["criteria"][crit]["judgments"]
        assert j["judged"] + j["failed"] == 2
    assert [a["route"] for a in result["answers"]["A"]] == ["global"] and result["answers"]["A"][0]["usage"][
        "llm_calls"] == 4  # the budget of 4 calls
    assert [a["route"] for a in result["answers"]["B"]] == ["local"]
