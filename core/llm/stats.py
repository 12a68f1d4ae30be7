"""What the API's `usage` measured per call, summed by (model, stage, language of the input, thinking
budget): the numbers graph.indexing.calibration keeps per tenant and estimates are calibrated from."""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Protocol


class MeasuredUsage(Protocol):
    """What a reply's usage (core.llm.usage.Usage) tells of a call's size."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


@dataclass
class StageStats:
    """Sums over the calls of one (model, stage, language, thinking budget); see graph.indexing.calibration."""

    calls: int = 0
    input_chars: int = 0
    message_chars: int = 0  # of input_chars, those of the messages; the rest is the system prompt and tools
    input_tokens: int = 0  # input + cache read + cache write: the whole prompt
    output_tokens: int = 0  # thinking included, as billed
    cpt_sum: float = 0.0  # per-call characters per token, summed, and squared: their spread
    cpt_squares: float = 0.0
    input_squares: float = 0.0
    output_squares: float = 0.0


class CallStats:
    """What the API's `usage` measured, summed by (model, stage, language of the input, thinking budget)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sums: dict[tuple[str, str, str, int], StageStats] = {}

    def add(self, model: str, stage: str, params: dict[str, Any], thinking: int, usage: MeasuredUsage) -> None:
        """One call's request parameters and the usage its reply reported."""
        tokens = usage.prompt_tokens
        if tokens <= 0:  # a reply without usage says nothing about the prompt's size
            return
        prompt, messages = prompt_text(params), _message_texts(params)
        message_chars, cpt = sum(len(t) for t in messages), len(prompt) / tokens
        # the language of what the call is about (the messages), not of the English instructions around it
        lang = language_of("\n".join(messages))
        with self._lock:
            s = self._sums.setdefault((model, stage, lang, thinking), StageStats())
            s.calls += 1
            s.input_chars += len(prompt)
            s.message_chars += message_chars
            s.input_tokens += tokens
            s.output_tokens += usage.output_tokens
            s.cpt_sum += cpt
            s.cpt_squares += cpt * cpt
            s.input_squares += tokens ** 2
            s.output_squares += usage.output_tokens ** 2

    def take(self) -> dict[tuple[str, str, str, int], StageStats]:
        """The sums so far, leaving none: each is saved once (graph.indexing.calibration)."""
        with self._lock:
            sums, self._sums = self._sums, {}
        return sums


_CYRILLIC = re.compile("[\u0400-\u04ff]")
_LATIN = re.compile("[A-Za-z]")


# Characters per token by the language of the text, before any call measured them (graph.indexing.calibration
# replaces these with what the API's `usage` counted): the one rough conversion every budget and estimate uses.
CHARS_PER_TOKEN = {"english": 4.0, "russian": 3.0, "simple": 3.5}


def estimated_tokens(text: str) -> float:
    """Tokens of `text` at the uncalibrated ratio of its language."""
    return len(text) / CHARS_PER_TOKEN[language_of(text)]


def language_of(text: str) -> str:
    """The language an estimate prices text of, by script as chunks are tagged: mostly Cyrillic letters ->
    "russian", else "english" (Latin letters, and any other script: priced as the defaults' "english")."""
    return "russian" if len(_CYRILLIC.findall(text)) > len(_LATIN.findall(text)) else "english"


def prompt_text(params: dict[str, Any]) -> str:
    """Every text of a request, as the model reads it (tool definitions as JSON)."""
    parts = [json.dumps(t, ensure_ascii=False) for t in params.get("tools", ())]
    system = params.get("system")
    parts += [system] if isinstance(system, str) else [b["text"] for b in system or ()]
    return "\n".join(parts + _message_texts(params))


def _message_texts(params: dict[str, Any]) -> list[str]:
    texts: list[str] = []
    for m in params["messages"]:
        content = m["content"]
        texts += [content] if isinstance(content, str) else [b.get("text", "") for b in content]
    return texts
