"""Community reports. Pure: inputs are a community's entities, relationships and claims, output a report dict.

The offline report is extractive and labelled as such (`model` = ""): its title names the most
connected entities, its summary is the most central sentences of their descriptions, and each
finding is an entity, a claim about one (when claims were extracted) or a strong relationship,
with the chunks it comes from. Entities mentioned together share the sentences that mention them,
so no sentence is said twice in one report: a sentence already in the summary or an earlier
finding, or one that only adds a prefix to it (a heading run into the sentence), is left out, and a
finding left with no sentence of its own is dropped rather than filled with "X is mentioned in N
passages" (recipe "3").
"""
from __future__ import annotations

import hashlib
import math
import re
from typing import Mapping, Sequence

from core.sentences import split_sentences
from graph.indexing.assemble import central_sentences
from graph.types import Community
from graph.types import GraphClaim, GraphEntity, GraphRelationship

# The offline report's recipe: "2" says each sentence once; "3" writes only what a person reads as
# text: no type tags, no "mentioned in N passages" or co-occurrence filler (stored reports are rewritten).
OFFLINE_RECIPE = "3"
MAX_FINDINGS = 8
MAX_CLAIM_FINDINGS = 2
CHUNKS_PER_FINDING = 5
STATUS_RANK = {"TRUE": 0, "SUSPECTED": 1, "FALSE": 2}


def community_inputs(
    community: Community, entities: dict[str, GraphEntity], relationships: Sequence[GraphRelationship]
) -> tuple[list[GraphEntity], list[GraphRelationship]]:
    members = set(community.members)
    ents = [entities[k] for k in community.members if k in entities]
    rels = [r for r in relationships if r.source_key in members and r.target_key in members]
    return ents, rels


def community_claims(community: Community, claims: Mapping[str, Sequence[GraphClaim]]) -> list[GraphClaim]:
    """The members' claims, in member order, each member's in its given (deterministic) order."""
    return [c for k in community.members for c in claims.get(k, ())]


def input_chunk_ids(ents: Sequence[GraphEntity], rels: Sequence[GraphRelationship],
                    claims: Sequence[GraphClaim] = ()) -> set[int]:
    """Every chunk behind a report's inputs: a change to any of them withdraws the report."""
    return ({c for e in ents for c in e.chunk_ids} | {c for r in rels for c in r.chunk_ids}
            | {c for claim in claims for c in claim.chunk_ids})


def input_hash(ents: Sequence[GraphEntity], rels: Sequence[GraphRelationship],
               claims: Sequence[GraphClaim] = (), recipe: str = "") -> str:
    """Changes exactly when what a report is written from changes: members, descriptions, relations,
    claims, and the reporter's `recipe` (a reporter that writes differently now rewrites every report
    once). Without claims and recipe it is the hash of before either existed (stored reports stay valid)."""
    h = hashlib.sha256()
    for e in sorted(ents, key=lambda e: e.key):
        h.update(f"E\x1f{e.key}\x1f{e.name}\x1f{e.type}\x1f{e.description}\x1f{e.chunk_ids}\n".encode())
    for r in sorted(rels, key=lambda r: (r.source_key, r.target_key)):
        h.update(f"R\x1f{r.source_key}\x1f{r.target_key}\x1f{r.description}\x1f{r.weight}\n".encode())
    for c in sorted(claims, key=lambda c: (c.subject_key, c.claim_type, c.description, c.status, c.chunk_ids)):
        h.update(f"C\x1f{c.subject_key}\x1f{c.claim_type}\x1f{c.status}\x1f{c.description}\x1f{c.chunk_ids}\n"
                 .encode())
    if recipe:
        h.update(f"V\x1f{recipe}\n".encode())
    return h.hexdigest()


_WORDS = re.compile(r"\w+")
# A sentence holding one already said, plus at most this share of words more (a heading or a
# speaker's name run into it), says nothing new; a longer one keeps what it adds.
REPEAT_EXTRA_WORDS = 1 / 3


def _words(sentence: str) -> tuple[str, ...]:
    return tuple(_WORDS.findall(sentence.lower()))


def _holds(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    """Whether `shorter` is a run of whole words inside `longer`."""
    return f" {' '.join(shorter)} " in f" {' '.join(longer)} "


class _SaidOnce:
    """The sentences a report has said so far, compared by their words (case and punctuation aside)."""

    def __init__(self) -> None:
        self.said: list[tuple[str, ...]] = []

    def repeats(self, sentence: str) -> bool:
        """Whether it says nothing new: it is part of a sentence already said, or one of those with
        little around it."""
        words = _words(sentence)
        return not words or any(
            _holds(said, words) or (_holds(words, said) and len(words) - len(said) <= REPEAT_EXTRA_WORDS * len(words))
            for said in self.said)

    def say(self, sentence: str) -> bool:
        """Count the sentence as said; False (and nothing counted) when it repeats."""
        if self.repeats(sentence):
            return False
        self.said.append(_words(sentence))
        return True

    def keep_new(self, text: str) -> str:
        """The sentences of `text` not said before, in order; they count as said from now on."""
        return " ".join(sentence for sentence in split_sentences(text) if self.say(sentence))


# The offline extractor's description of a pair seen only in one section ("A and B co-occur in H"):
# a fact about the index, not about the world, so a report does not show it.
_CO_OCCURRENCE = re.compile(r"^.+ and .+ co-occur in .+$")


def _readable(description: str) -> str:
    return " ".join(s for s in split_sentences(description) if not _CO_OCCURRENCE.match(s.strip()))


def distinct_sentences(sentences: Sequence[str]) -> list[str]:
    """Each thought once, in first-seen order: of two sentences that repeat each other, the shorter
    (the sentence rather than the heading run into it)."""
    unique = list(dict.fromkeys(x.strip() for x in sentences if x.strip()))
    said = _SaidOnce()
    kept = {x for x in sorted(unique, key=len) if said.say(x)}
    return [x for x in unique if x in kept]


def offline_report(ents: Sequence[GraphEntity], rels: Sequence[GraphRelationship],
                   claims: Sequence[GraphClaim] = ()) -> dict:
    """An extractive report: no LLM, every finding cites the chunks it was taken from. Up to
    MAX_CLAIM_FINDINGS claims (stated as fact first, then suspected, then refuted; the best-attested
    first) follow the top entities; without claims the report is what it was before claims existed."""
    strength = {e.key: 0.0 for e in ents}
    for r in rels:
        strength[r.source_key] += r.weight
        strength[r.target_key] += r.weight
    ranked = sorted(ents, key=lambda e: (-strength[e.key], -len(e.chunk_ids), e.key))
    names = {e.key: e.name for e in ents}
    top = ranked[: max(1, MAX_FINDINGS // 2 + 1)]
    strong = sorted(rels, key=lambda r: (-r.weight, r.source_key, r.target_key))[: MAX_FINDINGS - len(top) + 2]

    summary = " ".join(central_sentences(distinct_sentences(
        [s for e in ranked[:6] for s in split_sentences(_readable(e.description))]), 2))
    said = _SaidOnce()
    said.keep_new(summary)
    findings = []

    def add(summary: str, explanation: str, keys: list[str], chunk_ids) -> None:
        if explanation:  # a finding without a sentence of its own would be filler
            findings.append({"summary": summary, "explanation": explanation, "entity_keys": keys,
                             "chunk_ids": list(chunk_ids[:CHUNKS_PER_FINDING])})

    for e in top:
        add(e.name, said.keep_new(_readable(e.description)), [e.key], e.chunk_ids)
    members = {e.key for e in ents}
    best_claims = sorted((c for c in claims if c.subject_key in members),
                         key=lambda c: (STATUS_RANK.get(c.status, 3), -len(c.chunk_ids), c.subject_key,
                                        c.claim_type, c.description))[:MAX_CLAIM_FINDINGS]
    for c in best_claims:
        add(f"{names[c.subject_key]}: {c.claim_type} ({c.status.lower()})", said.keep_new(c.description),
            [c.subject_key], c.chunk_ids)
    for r in strong:
        if len(findings) >= MAX_FINDINGS:
            break
        add(f"{names[r.source_key]} — {names[r.target_key]}", said.keep_new(_readable(r.description)),
            [r.source_key, r.target_key], r.chunk_ids)

    chunks = sorted({c for e in ents for c in e.chunk_ids})
    title_names = [e.name for e in ranked[:3]]
    title = title_names[0] if len(title_names) == 1 else ", ".join(title_names[:-1]) + " and " + title_names[-1]
    rating = round(min(10.0, 1.2 * math.log2(1 + len(chunks)) + 0.3 * math.log2(1 + len(rels))), 1)
    return {
        "title": title,
        "summary": summary or f"A group of {len(ents)} related entities.",
        "rating": rating,
        "rating_explanation": f"offline estimate from {len(chunks)} source passages and {len(rels)} relationships",
        "findings": findings,
        "source_chunk_ids": sorted({c for f in findings for c in f["chunk_ids"]}),
    }


