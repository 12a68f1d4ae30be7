"""Contextual retrieval: a short context per chunk, prepended to it for embedding and full-text.

A chunk like "revenue grew 3% over the previous quarter" names neither the company nor the quarter;
1-2 sentences written with the whole document in view fix that for both legs of search. With an LLM
the document goes in a cached prompt prefix and only the chunk changes per call; without one the
context is the document's location and title (the heading path is added to every chunk anyway).

A document's location is the folders or URL path its id names: a section titled "3. Run your eval"
says nothing of what it evaluates until `use-cases/classification` is read with it. Measured on
anthropic_docs (sections of documentation pages, ids are their URLs): hybrid recall@10 0.82 -> 0.89,
nDCG@10 0.776 -> 0.814; opaque ids (numbers, BEIR keys) have no location and keep the title alone.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, Sequence

from core.llm.batches import BatchLLM, Deferred
from core.llm.client import LLM
from core.llm.errors import LLMError
from core.llm.limiter import concurrency_of, map_ordered
from core.llm.prompting import MalformedReply, complete_text
from vector.ingest.chunking import ChunkDraft
from vector.location import document_location
from vector.prompts import CONTEXT_INSTRUCTIONS, chunk_message, document_prefix
from vector.ingest.sources import SourceDocument


@dataclass(frozen=True)
class ChunkContext:
    text: str
    # why the LLM could not write this context; `text` is then the offline context, which is indexed
    # but never cached, so the next ingest asks again
    failed: str = ""


class Contextualizer(Protocol):
    mode: str  # part of every document's index key: switching modes re-chunks

    def contexts(self, doc: SourceDocument, drafts: Sequence[ChunkDraft]) -> list[ChunkContext]:
        ...


def offline_context(doc: SourceDocument) -> str:
    return " > ".join(p for p in [*document_location(doc.doc_id, doc.title), doc.title] if p)


class TitleContextualizer:
    """Offline: the document's location and title are each chunk's context."""

    mode = "location+title"

    def contexts(self, doc: SourceDocument, drafts: Sequence[ChunkDraft]) -> list[ChunkContext]:
        return [ChunkContext(offline_context(doc))] * len(drafts)


# --- checking a reply before it becomes searchable text -------------------------------------------

MAX_CONTEXT_CHARS = 500  # 1-2 short sentences were asked for; a longer reply is not a context
_PREAMBLE = re.compile(r"^(?:(?:here(?: is|'s)|this is) (?:the |a )?(?:short |brief )?context"
                       r"(?: for (?:this|the) chunk)?|context)\s*[:\-]\s*", re.IGNORECASE)
_REFUSAL = re.compile(r"^(?:i(?:'m| am)? (?:sorry|unable|not able)|i can(?:'|no)t|sorry\b|as an ai\b)",
                      re.IGNORECASE)


def checked_context(reply: str) -> str:
    """The reply as a context: a preamble ("Here is the context:") and wrapping quotes stripped;
    MalformedReply for an empty, refusal-like or overlong reply, which must never be indexed."""
    context = _PREAMBLE.sub("", " ".join(reply.split())).strip().strip('"\u201c\u201d').strip()
    if not context:
        raise MalformedReply("empty context")
    if _REFUSAL.match(context):
        raise MalformedReply(f"a refusal, not a context: {context[:80]!r}")
    if len(context) > MAX_CONTEXT_CHARS:
        raise MalformedReply(f"context of {len(context)} characters, over {MAX_CONTEXT_CHARS}")
    return context


# --- a document over the model's context window ---------------------------------------------------

_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")
MIN_EXCERPT_CHARS = 1_000  # below this an excerpt says little more than the chunk itself


def _excerpt_chars(err: LLMError, sent_chars: int) -> int | None:
    """Characters of the document to send after `err`, or None when `err` is not a prompt over the
    context window (or the excerpt would be too small to help). The API names both sizes: scale by
    them, with a margin for the instructions and the chunk, which do not shrink."""
    if err.status != 400 or "prompt is too long" not in str(err):
        return None
    sizes = _TOO_LONG.search(str(err))
    ratio = int(sizes.group(2)) / int(sizes.group(1)) if sizes else 0.5
    chars = int(sent_chars * ratio * 0.7)
    return chars if chars >= MIN_EXCERPT_CHARS else None


def excerpt_around(text: str, draft: ChunkDraft, chars: int) -> str:
    """`chars` characters of `text` centred on the chunk (found by its opening; else the start)."""
    found = text.find(draft.content[:200].strip())
    centre = max(found, 0) + len(draft.content) // 2
    start = max(0, min(centre - chars // 2, len(text) - chars))
    return text[start:start + chars]


class LLMContextualizer:
    """One `fast`-model call per chunk, the whole document in the cached prefix; a document over the
    model's context window is sent as an excerpt around each chunk instead. A context the model
    cannot write (refused, cut twice, malformed twice, an API error after retries) is the offline
    one, flagged: the ingest indexes it, does not cache it, and asks again next time."""

    def __init__(self, llm: LLM, model: str, max_tokens: int = 150):
        self.llm = llm
        self.mode = f"llm:{model}"
        self.max_tokens = max_tokens

    def contexts(self, doc: SourceDocument, drafts: Sequence[ChunkDraft]) -> list[ChunkContext]:
        if not drafts:
            return []
        if isinstance(self.llm, BatchLLM):
            return self._batched(doc, drafts)
        # The first chunk alone: its call writes the document to the prompt cache (and finds whether
        # only an excerpt fits), so the others, sent concurrently after it, read the cache at 0.1x
        # instead of each paying the cache write.
        excerpt: int | None = None  # characters sent around each chunk, once the whole is too long
        first = self._guarded(doc, drafts[0], excerpt)
        if isinstance(first, tuple):
            first, excerpt = ChunkContext(first[0]), first[1]
        rest = map_ordered(lambda draft: self._guarded(doc, draft, excerpt), drafts[1:], concurrency_of(self.llm))
        out = [first]
        for item in rest:
            if isinstance(item, BaseException):
                raise item
            out.append(ChunkContext(item[0]) if isinstance(item, tuple) else item)
        return out

    def _batched(self, doc: SourceDocument, drafts: Sequence[ChunkDraft]) -> list[ChunkContext]:
        """Every chunk asked at once (`ingest --batch`): the first chunk alone would cost a whole second batch
        (minutes to hours) for a cache write that a batch applies only best-effort. Each request still marks
        the document prefix cacheable. `Deferred` once every chunk without a collected result is noted, so
        they all go into the same batch (core.llm.batches.BatchLLM.map runs the document again once it is in)."""
        out, deferred = [], None
        for draft in drafts:
            try:
                item = self._guarded(doc, draft, None)
            except Deferred as exc:
                deferred = exc
                continue
            out.append(ChunkContext(item[0]) if isinstance(item, tuple) else item)
        if deferred is not None:
            raise deferred
        return out

    def _guarded(self, doc: SourceDocument, draft: ChunkDraft, excerpt: int | None):
        """(context, excerpt), or the offline context flagged failed."""
        try:
            return self._context(doc, draft, excerpt)
        except LLMError as err:
            if err.status in (401, 403, 404):
                raise  # the key or model is wrong: every chunk would fail alike, fix it first
            return ChunkContext(offline_context(doc), failed=str(err))

    def _context(self, doc: SourceDocument, draft: ChunkDraft, excerpt: int | None) -> tuple[str, int | None]:
        asked_again = False
        while True:
            try:
                reply = self._ask(doc, draft, excerpt)
            except LLMError as err:
                smaller = _excerpt_chars(err, excerpt or len(doc.text))
                if smaller is None:
                    raise
                excerpt = smaller
                continue
            try:
                return checked_context(reply), excerpt
            except MalformedReply:
                if asked_again:
                    raise
                asked_again = True

    def _ask(self, doc: SourceDocument, draft: ChunkDraft, excerpt: int | None) -> str:
        # a refusal or a context cut twice raises (core.llm.prompting): never indexed as searchable text
        if excerpt is None:  # the whole document, cached: every chunk of it reads it at 0.1x
            prefix, message = document_prefix(doc), chunk_message(draft)
        else:  # an excerpt differs per chunk: caching it would only add the cache-write premium
            prefix = None
            message = document_prefix(doc, excerpt_around(doc.text, draft, excerpt)) + "\n" + chunk_message(draft)
        return complete_text(self.llm, task="fast", system=CONTEXT_INSTRUCTIONS, cached_prefix=prefix,
                             messages=[{"role": "user", "content": message}], max_tokens=self.max_tokens).text


def make_contextualizer(settings, llm: LLM | None) -> Contextualizer:
    if settings.contextual_retrieval == "title" or llm is None:
        if settings.contextual_retrieval == "llm":
            from core.errors import CrossroadsError

            raise CrossroadsError(
                "CROSSROADS_CONTEXTUAL_RETRIEVAL=llm needs ANTHROPIC_API_KEY; set the key or use `auto` / `title`"
            )
        return TitleContextualizer()
    return LLMContextualizer(llm, settings.llm_model_fast)
