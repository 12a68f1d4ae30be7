"""`crossroads llm check` through the real anthropic SDK against the loopback fake: one call per
configured model, what it cost, and whether forced tool use and prompt caching work."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer

from core.settings import Settings
from tests.conftest import ROOT
from tests.fakes.anthropic_server import FakeAnthropic, error, tool_use

FAST, ANSWER = "claude-haiku-4-5", "claude-sonnet-5"


def llm_check(tmp_path, **env_vars) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("CROSSROADS_")}
    env.update(CROSSROADS_STATE_DIR=str(tmp_path), CROSSROADS_LLM_MAX_RETRIES="0", **env_vars)
    return subprocess.run([sys.executable, "-m", "api.cli.main", "llm", "check", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_llm_check_calls_each_model_once_and_reports_tool_use_and_caching(tmp_path):
    ready = lambda body: tool_use("report_ready", {"ready": True})  # noqa: E731
    # the answer model rejects a forced tool_choice, as a model with thinking on does
    with FakeAnthropic(handler=ready, forced_tool_rejected=(ANSWER,)) as api:
        proc = llm_check(tmp_path, ANTHROPIC_API_KEY="test-key", CROSSROADS_ANTHROPIC_BASE_URL=api.url,
                         CROSSROADS_LLM_MODEL_FAST=FAST, CROSSROADS_LLM_MODEL_ANSWER=ANSWER)
        models = [b["model"] for b in api.bodies]
    assert proc.returncode == 0, proc.stderr
    fast, answer = json.loads(proc.stdout)
    assert models == [FAST, ANSWER, ANSWER]  # the second answer call: tool_choice auto after the 400
    assert (fast["model"], fast["tasks"], answer["tasks"]) == (FAST, ["fast"], ["answer"])
    assert fast["ok"] and fast["forced_tool"] == "works" and fast["prompt_caching"].startswith("works")
    assert answer["ok"] and answer["forced_tool"].startswith("rejected (400)")
    assert fast["input_tokens"] > 4096 and fast["output_tokens"] > 0 and fast["cost_usd"] > 0
    assert fast["latency_ms"] > 0


def test_llm_check_without_a_key_says_what_to_do(monkeypatch, capsys):
    from api.cli import llm as cli_llm

    monkeypatch.setattr(cli_llm, "get_settings", lambda: Settings(anthropic_api_key=None))
    with pytest.raises(typer.Exit) as exit_:
        cli_llm.check_command(json_out=True)
    assert exit_.value.exit_code == 1 and "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err


def test_a_model_that_fails_the_check_exits_1_and_one_model_for_both_tasks_is_called_once(tmp_path):
    with FakeAnthropic(error(404, "model: claude-haiku-4-5-typo")) as api:
        proc = llm_check(tmp_path, ANTHROPIC_API_KEY="test-key", CROSSROADS_ANTHROPIC_BASE_URL=api.url,
                         CROSSROADS_LLM_MODEL_FAST=FAST, CROSSROADS_LLM_MODEL_ANSWER=FAST)
        calls = api.calls
    [only] = json.loads(proc.stdout)
    assert proc.returncode == 1 and calls == 1 and only["tasks"] == ["fast", "answer"]
    assert not only["ok"] and "not found: check the model id" in only["error"]
