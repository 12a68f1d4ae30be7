"""Answer generation over numbered passages: the prompt contract and the citation check.

The contract (from the seeds): passages go in numbered XML tags, most relevant first, every value
escaped so a passage cannot close its tag and smuggle in instructions; the model cites [N] after each
claim and answers with one fixed sentence when the passages do not answer. Every [N] of the reply
is checked against the passages sent; a reply citing outside them is never returned.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

from core.citations import cited_numbers
from core.llm.client import LLM
from core.llm.usage import Usage
from core.llm.prompting import complete_text, stream_text
from answers.prompts import SYSTEM_PROMPT, build_prompt
from answers.types import Citation, Passage


NO_ANSWER = {
    "english": "The knowledge base has no answer to this question.",
    "russian": "В базе знаний нет ответа на этот вопрос.",
}


class CitationError(ValueError):
    """The model cited a passage that was not in its prompt: the answer must not be returned."""

    def __init__(self, message: str, answer: str):
        super().__init__(message)
        self.answer = answer  # kept for the trace / logs, never shown as an answer


def no_answer_sentence(language: str) -> str:
    return NO_ANSWER.get(language, NO_ANSWER["english"])


def _sentence_form(text: str) -> str:
    return " ".join(text.strip().strip('"«»“”').strip().rstrip(".").split()).casefold()


_NO_ANSWER_FORMS = {_sentence_form(sentence) for sentence in NO_ANSWER.values()}


def is_no_answer(text: str) -> bool:
    """The whole reply is the no-answer sentence (quotes, case, spacing and a final period aside). A
    reply that starts with it and goes on is an answer, and has its citations checked like any other."""
    return _sentence_form(text) in _NO_ANSWER_FORMS


def check_citations(text: str, n_passages: int) -> list[int]:
    """The cited numbers, or CitationError when one is outside 1..n_passages."""
    numbers = cited_numbers(text)
    bad = [n for n in numbers if not 1 <= n <= n_passages]
    if bad:
        raise CitationError(f"the answer cites [{bad[0]}] but only {n_passages} passages were sent "
                            f"(valid: 1..{n_passages})", text)
    return numbers


def citations_for(numbers: list[int], passages: list[Passage], quotes: dict[int, str] | None = None,
                  quote_chars: int = 600) -> list[Citation]:
    out = []
    for n in sorted(set(numbers)):
        p = passages[n - 1]
        quote = (quotes or {}).get(n) or (p.text if len(p.text) <= quote_chars else p.text[:quote_chars].rstrip() + "…")
        out.append(Citation(n, p.kind, p.id, p.doc_id, p.title, p.heading, quote, list(p.documents)))
    return out


_token_sink: ContextVar[Callable[[str], None] | None] = ContextVar("crossroads_answer_tokens", default=None)


@contextmanager
def streaming_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, answers are written by streaming calls whose text goes to `sink` as it arrives
    (before the citation check: the caller must withdraw it when the answer it gets is another)."""
    token = _token_sink.set(sink)
    try:
        yield
    finally:
        _token_sink.reset(token)


def token_sink() -> Callable[[str], None] | None:
    """Where an answer being streamed goes (`streaming_to`), or None: for routes that write their answer
    below the router (the global reduce)."""
    return _token_sink.get()


@dataclass
class Generated:
    text: str
    numbers: list[int]
    usage: Usage
    prompt_chars: int
    no_answer: bool


def llm_answer(llm: LLM, question: str, passages: list[Passage], language: str, *,
               partial: bool = False, max_tokens: int = 1024) -> Generated:
    """The answer model's reply, whole (core.llm.prompting: a refusal or a reply cut twice raises) and its
    citations checked. Raises CitationError or LLMError."""
    sentence = no_answer_sentence(language)
    if not passages:
        return Generated(sentence, [], Usage(), 0, True)
    system = SYSTEM_PROMPT.format(no_answer=sentence)
    if partial:
        system += ("\nThe search stopped on its budget before finding everything: answer what the documents "
                   "support and say plainly which part of the question they leave open.")
    prompt = build_prompt(question, passages)
    messages = [{"role": "user", "content": prompt}]
    sink = _token_sink.get()
    if sink is None:
        response = complete_text(llm, task="answer", system=system, messages=messages, max_tokens=max_tokens)
    else:  # shown as it comes; checked once whole, like any other (a failed check withdraws it)
        response = stream_text(llm, task="answer", system=system, messages=messages, max_tokens=max_tokens,
                               on_text=sink)
    text = response.text.strip()
    if is_no_answer(text):
        return Generated(sentence, [], response.usage, len(prompt), True)
    numbers = check_citations(text, len(passages))
    if not numbers:
        raise CitationError("the answer cites no passage, so none of its claims can be checked", text)
    return Generated(text, numbers, response.usage, len(prompt), False)
