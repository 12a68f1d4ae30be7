"""LLM community reports: GraphRAG's community report on Anthropic tool use (one forced call each).

Context, as GraphRAG's sort_context / build_mixed_context: the community's entities (by degree) and
relationships (by their endpoints' combined degree, then weight) as CSV tables with short numeric
ids, every row XML-escaped. If the whole community does not fit `max_context_tokens` (estimated as
chars / 4) and its sub-communities have reports, those reports stand in for their members' rows,
the largest sub-community first, until the rest fits; if even all of them do not make it fit (or
there are no sub-reports) the rows are packed greedily in importance order until the budget is full.
Claims about the members (when claims were extracted) come last, in a <claims> table, and are the
first thing dropped: they fill whatever budget the entity, relationship and report rows leave, only
for entities whose rows were sent (by entity rank, fact before suspicion before refutation, then
best-attested first). A community without claims gets exactly the context it got before claims.

Validation (`ReportInput`, through the call kernel core.llm.prompting): ids, sent as numbers or numeric
strings, must name rows actually sent (unknown ids are dropped; a finding left with no valid reference
is dropped); rating a number or numeric string, clamped to 0-10. No valid finding, no tool call or a
missing title is malformed: asked once more; a reply cut at max_tokens is asked again with twice the
budget. Then, or on a refusal (never retried) or an API error (the SDK already retried), the offline
extractive report is returned flagged `"fallback": "offline"` (and `"refused": true` for a refusal).
Never raises.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Sequence

from core.llm.client import LLM
from core.llm.errors import LLMError, RefusedError
from core.llm.prompting import MalformedReply, call_tool
from core.llm.stats import CHARS_PER_TOKEN
from graph.types import Community
from graph.prompts import (CLAIMS_CLOSE, CLAIMS_OPEN, MAX_FINDINGS, REPORT, REPORT_SYSTEM, REPORT_TOOL, ReportInput,
                           report_block, report_row)
from graph.indexing.reports import STATUS_RANK, offline_report
from graph.types import GraphClaim, GraphEntity, GraphRelationship


log = logging.getLogger(__name__)

MAX_TOKENS = 4096  # a 10-finding report is ~1.5-2.5k tokens of JSON; a reply cut short is asked again with 2x
CHUNKS_PER_FINDING = 10


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN["english"])  # language-blind: English's ratio bounds every text


@dataclass
class Context:
    """The user message and the rows it carries, by the ids the model sees (for validating citations)."""

    text: str
    entities: dict[int, GraphEntity] = field(default_factory=dict)
    relationships: dict[int, GraphRelationship] = field(default_factory=dict)
    reports: dict[int, dict] = field(default_factory=dict)
    claims: dict[int, GraphClaim] = field(default_factory=dict)


def build_context(community: Community, ents: Sequence[GraphEntity], rels: Sequence[GraphRelationship],
                  sub_reports: Sequence[dict], max_tokens: int, claims: Sequence[GraphClaim] = ()) -> Context:
    degree = {e.key: e.degree for e in ents}
    names = {e.key: e.name for e in ents}
    ents = sorted(ents, key=lambda e: (-e.degree, e.key))
    rels = sorted(rels, key=lambda r: (-(degree.get(r.source_key, 0) + degree.get(r.target_key, 0)),
                                       -r.weight, r.source_key, r.target_key))
    # Ids are ranks over the whole community, fixed before packing: the same row keeps its id
    # whatever else fits, and ids of rows left out are simply never valid.
    erows = {e.key: (i, e, report_row(i, e.name, e.type, e.degree, e.description)) for i, e in enumerate(ents, 1)}
    rrows = [(i, r, report_row(i, names.get(r.source_key, r.source_key), names.get(r.target_key, r.target_key),
                         f"{r.weight:g}", r.description)) for i, r in enumerate(rels, 1)]
    rank = {key: row[0] for key, row in erows.items()}
    claims = sorted((c for c in claims if c.subject_key in rank),
                    key=lambda c: (rank[c.subject_key], STATUS_RANK.get(c.status, 3), -len(c.chunk_ids),
                                   c.claim_type, c.description, c.chunk_ids))
    crows = [(i, c, report_row(i, names[c.subject_key], c.claim_type, c.status, c.description))
             for i, c in enumerate(claims, 1)]
    subs = sorted(sub_reports, key=lambda s: (-len(s.get("members", ())), s.get("id", 0)))
    blocks = [(i, s, report_block(i, s)) for i, s in enumerate(subs, 1)]
    head = (f'<community level="{community.level}" entities="{len(ents)}">\n<reports>\n', "</reports>\n<entities>\n"
            "id,name,type,degree,description\n", "</entities>\n<relationships>\nid,source,target,weight,description\n",
            "</relationships>\n", f"</community>\nCall {REPORT_TOOL} with the report on this community.")
    budget = int(max_tokens * CHARS_PER_TOKEN["english"]) - sum(map(len, head))

    def render(bs: list, es: list, rs: list) -> Context:
        # Claims last and lowest: they take only what the other rows left (their table's header
        # included), and only for entities shown. None fitting leaves the context as without claims.
        used = sum(len(x[2]) for x in bs + es + rs)
        shown, cs = {x[1].key for x in es}, []
        for c in crows:
            cost = len(c[2]) + (0 if cs else len(CLAIMS_OPEN) + len(CLAIMS_CLOSE))
            if c[1].subject_key in shown and used + cost <= budget:
                used += cost
                cs.append(c)
        return _render(head, bs, es, rs, cs)

    def split(k: int) -> tuple[list, list]:
        # Rows a substituted sub-report covers: its members, and relationships inside it. A
        # relationship to a member still shown stays: no sub-report describes that link.
        hidden = {m for s in subs[:k] for m in s.get("members", ())}
        return ([x for x in erows.values() if x[1].key not in hidden],
                [x for x in rrows if not (x[1].source_key in hidden and x[1].target_key in hidden)])

    for k in range(len(subs) + 1):  # k = 0: the community's own rows only
        es, rs = split(k)
        if sum(len(x[2]) for x in blocks[:k] + es + rs) <= budget:
            return render(blocks[:k], es, rs)
    es, rs = split(len(subs))
    used, chosen_b, chosen_e, chosen_r = 0, [], {}, []
    for b in blocks:  # the largest sub-communities first, as GraphRAG
        if used + len(b[2]) <= budget:
            used += len(b[2])
            chosen_b.append(b)
    shown = {x[1].key: x for x in es}
    for r in rs:  # each relationship comes with its endpoints' rows, as sort_context does
        new = [shown[k] for k in dict.fromkeys((r[1].source_key, r[1].target_key)) if k in shown and k not in chosen_e]
        cost = len(r[2]) + sum(len(x[2]) for x in new)
        if used + cost <= budget:  # a row too long is skipped, not a reason to stop packing
            used += cost
            chosen_e.update((x[1].key, x) for x in new)
            chosen_r.append(r)
    for x in es:
        if x[1].key not in chosen_e and used + len(x[2]) <= budget:
            used += len(x[2])
            chosen_e[x[1].key] = x
    return render(chosen_b, sorted(chosen_e.values(), key=lambda x: x[0]), chosen_r)


def _render(head: tuple[str, ...], blocks: list, es: list, rs: list, cs: list) -> Context:
    claims = CLAIMS_OPEN + "".join(x[2] for x in cs) + CLAIMS_CLOSE if cs else ""
    text = (head[0] + "".join(b[2] for b in blocks) + head[1] + "".join(x[2] for x in es) + head[2]
            + "".join(x[2] for x in rs) + head[3] + claims + head[4])
    return Context(text, {x[0]: x[1] for x in es}, {x[0]: x[1] for x in rs}, {b[0]: b[1] for b in blocks},
                   {x[0]: x[1] for x in cs})


def _sent(ids: list[int], sent: dict) -> list:
    return [sent[i] for i in dict.fromkeys(ids) if i in sent]


def parse_report(data: ReportInput, ctx: Context) -> dict:
    """The validated tool input as a report dict, citations mapped to entity keys and chunk ids;
    MalformedReply when no finding rests on a row that was sent."""
    findings = []
    for f in data.findings:
        ents, rels = _sent(f.entity_ids, ctx.entities), _sent(f.relationship_ids, ctx.relationships)
        subs, claims = _sent(f.report_ids, ctx.reports), _sent(f.claim_ids, ctx.claims)
        if not (ents or rels or subs or claims):
            continue  # nothing sent backs it: an unsupported finding is worse than none
        keys = [e.key for e in ents] + [k for r in rels for k in (r.source_key, r.target_key)]
        keys += [c.subject_key for c in claims]
        chunks = [c for x in ents + rels + claims for c in x.chunk_ids]
        chunks += [c for s in subs for c in s.get("source_chunk_ids", ())]
        findings.append({"summary": f.summary, "explanation": f.explanation,
                         "entity_keys": list(dict.fromkeys(keys)),
                         "chunk_ids": list(dict.fromkeys(chunks))[:CHUNKS_PER_FINDING]})
    if not findings:
        raise MalformedReply("no finding cites a row that was sent")
    findings = findings[:MAX_FINDINGS]
    return {"title": data.title, "summary": data.summary, "rating": data.rating,
            "rating_explanation": data.rating_explanation, "findings": findings,
            "source_chunk_ids": sorted({c for f in findings for c in f["chunk_ids"]})}


class LLMReporter:
    """`Reporter` over an `LLM` (the `answer` task); `model` is that task's model id (stored with reports)."""

    recipe = ""  # the prompt of the first stored reports

    def __init__(self, llm: LLM, model: str, max_context_tokens: int = 8000):
        if max_context_tokens < 500:
            raise ValueError(f"max_context_tokens must be >= 500, got {max_context_tokens}")
        self.llm, self.model, self.max_context_tokens = llm, model, max_context_tokens

    def report(self, community: Community, ents: list[GraphEntity], rels: list[GraphRelationship],
               sub_reports: list[dict], claims: Sequence[GraphClaim] = ()) -> dict:
        ctx = build_context(community, ents, rels, sub_reports, self.max_context_tokens, claims)
        if not (ctx.entities or ctx.reports):
            return self._fallback(community, ents, rels, claims,
                                  f"no row fits max_context_tokens={self.max_context_tokens}")
        try:
            return call_tool(self.llm, REPORT, task="answer", system=REPORT_SYSTEM, max_tokens=MAX_TOKENS,
                             messages=[{"role": "user", "content": ctx.text}],
                             convert=lambda data: parse_report(data, ctx)).value
        except LLMError as err:  # refused, malformed or cut twice, or the API failed after the SDK's retries
            return self._fallback(community, ents, rels, claims, str(err), refused=isinstance(err, RefusedError))

    def _fallback(self, community: Community, ents, rels, claims, reason: str, refused: bool = False) -> dict:
        # Degraded, not down: the build goes on with an extractive report, flagged so it is not
        # mistaken for (or cached as) the model's work.
        log.warning("community %s: LLM report failed (%s); wrote the offline extractive report instead",
                    community.id, reason)
        return {**offline_report(ents, rels, claims), "fallback": "offline", "error": reason,
                **({"refused": True} if refused else {})}
