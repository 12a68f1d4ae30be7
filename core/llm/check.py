"""`crossroads llm check`: one small real call per configured model, to see before any ingest or build
that the key, the model ids, forced tool use and prompt caching work, and what a call costs.

Each call sends a cached prefix just over the largest minimum the API caches (4,096 tokens on Haiku
4.5 and Opus; below a model's minimum the API skips caching without an error, which would read as
"caching does not work") and forces a one-field tool. A model that rejects a forced `tool_choice` is
asked again with `auto`, as the call kernel (core/llm/prompting.py) does for it from then on.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from core.llm.client import AnthropicLLM
from core.llm.usage import Usage
from core.llm.errors import LLMError
from core.llm.prompting import rejects_forced_tool
from core.settings import Settings

PROBE_TOOL = {"name": "report_ready", "description": "Report that you can read this request.",
              "input_schema": {"type": "object", "properties": {"ready": {"type": "boolean"}}, "required": ["ready"]}}
# ~5,000 tokens (22k characters); every check sends the same text, so a rerun within five
# minutes reads it from the cache instead of writing it
CACHE_PROBE = "\n".join(f"Line {n} of the Crossroads prompt-caching probe; it carries no instructions."
                        for n in range(300))


@dataclass
class ModelCheck:
    model: str
    tasks: list[str]  # the settings' tasks that use this model ("fast", "answer")
    ok: bool
    latency_ms: float = 0.0
    input_tokens: int = 0  # the whole prompt: uncached, cache write and cache read
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: the model has no known price
    forced_tool: str = ""  # "works", or how it failed and what Crossroads does instead
    prompt_caching: str = ""
    error: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def check_models(settings: Settings) -> list[ModelCheck]:
    """One check per distinct configured model; needs the key (AnthropicLLM raises ValueError without)."""
    tasks: dict[str, list[str]] = {}
    for task, model in (("fast", settings.llm_model_fast), ("answer", settings.llm_model_answer)):
        tasks.setdefault(model, []).append(task)
    llm = AnthropicLLM(settings)
    return [_check(llm, names[0], model, names) for model, names in tasks.items()]


def _check(llm: AnthropicLLM, task: str, model: str, tasks: list[str]) -> ModelCheck:
    check = ModelCheck(model, tasks, ok=False)
    usage = Usage(calls=0)
    started = time.perf_counter()
    choice, forced_note = {"type": "tool", "name": PROBE_TOOL["name"]}, "works"
    try:
        while True:
            try:
                response = llm.complete(task=task, system="Call report_ready with ready=true.", max_tokens=64,
                                        cached_prefix=CACHE_PROBE, tools=[PROBE_TOOL], tool_choice=choice,
                                        messages=[{"role": "user", "content": "Are you ready?"}])
                break
            except LLMError as err:
                if choice["type"] == "auto" or not rejects_forced_tool(err):
                    raise
                choice, forced_note = {"type": "auto"}, "rejected (400): Crossroads asks this model with tool_choice auto"
    except LLMError as err:
        check.error = str(err)
        return check
    usage.add(response.usage)
    check.latency_ms = round((time.perf_counter() - started) * 1000, 1)
    check.input_tokens, check.output_tokens = usage.prompt_tokens, usage.output_tokens
    check.cost_usd = None if usage.cost_usd is None else round(usage.cost_usd, 6)
    called = response.tool_input is not None
    check.forced_tool = forced_note if called else f"no tool call (stop_reason {response.stop_reason})"
    if usage.cache_write_tokens or usage.cache_read_tokens:
        check.prompt_caching = (f"works ({usage.cache_write_tokens} tokens written, "
                                f"{usage.cache_read_tokens} read)")
    else:
        check.prompt_caching = "not applied: no cache write or read reported for a 5k-token prefix"
    check.ok = called and bool(usage.cache_write_tokens or usage.cache_read_tokens)
    return check
