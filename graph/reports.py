"""Community reports. Pure: inputs are a community's entities, relationships and claims, output a report dict.

The offline report is extractive and labelled as such (`model` = ""): its title names the most
connected entities, its summary is the most central sentences of their descriptions, and each
finding is an entity, a claim about one (when claims were extracted) or a strong relationship,
with the chunks it comes from.
"""
from __future__ import annotations

import hashlib
import math
from typing import Mapping, Sequence

from core.sentences import split_sentences
from graph.assemble import central_sentences
from graph.communities import Community
from graph.types import GraphClaim, GraphEntity, GraphRelationship

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
               claims: Sequence[GraphClaim] = ()) -> str:
    """Changes exactly when what a report is written from changes: members, descriptions, relations,
    claims. Without claims it is the hash of before claims were reported (stored reports stay valid)."""
    h = hashlib.sha256()
    for e in sorted(ents, key=lambda e: e.key):
        h.update(f"E\x1f{e.key}\x1f{e.name}\x1f{e.type}\x1f{e.description}\x1f{e.chunk_ids}\n".encode())
    for r in sorted(rels, key=lambda r: (r.source_key, r.target_key)):
        h.update(f"R\x1f{r.source_key}\x1f{r.target_key}\x1f{r.description}\x1f{r.weight}\n".encode())
    for c in sorted(claims, key=lambda c: (c.subject_key, c.claim_type, c.description, c.status, c.chunk_ids)):
        h.update(f"C\x1f{c.subject_key}\x1f{c.claim_type}\x1f{c.status}\x1f{c.description}\x1f{c.chunk_ids}\n"
                 .encode())
    return h.hexdigest()


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

    findings = []
    for e in top:
        findings.append({
            "summary": f"{e.name} ({e.type})",
            "explanation": e.description or f"{e.name} is mentioned in {len(e.chunk_ids)} passages.",
            "entity_keys": [e.key],
            "chunk_ids": list(e.chunk_ids[:CHUNKS_PER_FINDING]),
        })
    members = {e.key for e in ents}
    best_claims = sorted((c for c in claims if c.subject_key in members),
                         key=lambda c: (STATUS_RANK.get(c.status, 3), -len(c.chunk_ids), c.subject_key,
                                        c.claim_type, c.description))[:MAX_CLAIM_FINDINGS]
    for c in best_claims:
        findings.append({
            "summary": f"{names[c.subject_key]}: {c.claim_type} ({c.status.lower()})",
            "explanation": c.description or f"A {c.claim_type} claim about {names[c.subject_key]}.",
            "entity_keys": [c.subject_key],
            "chunk_ids": list(c.chunk_ids[:CHUNKS_PER_FINDING]),
        })
    for r in strong:
        if len(findings) >= MAX_FINDINGS:
            break
        findings.append({
            "summary": f"{names[r.source_key]} — {names[r.target_key]}",
            "explanation": r.description or f"{names[r.source_key]} and {names[r.target_key]} appear together.",
            "entity_keys": [r.source_key, r.target_key],
            "chunk_ids": list(r.chunk_ids[:CHUNKS_PER_FINDING]),
        })

    chunks = sorted({c for e in ents for c in e.chunk_ids})
    title_names = [e.name for e in ranked[:3]]
    title = title_names[0] if len(title_names) == 1 else ", ".join(title_names[:-1]) + " and " + title_names[-1]
    summary = " ".join(central_sentences([s for e in ranked[:6] for s in split_sentences(e.description)], 2))
    rating = round(min(10.0, 1.2 * math.log2(1 + len(chunks)) + 0.3 * math.log2(1 + len(rels))), 1)
    return {
        "title": title,
        "summary": summary or f"A group of {len(ents)} related entities.",
        "rating": rating,
        "rating_explanation": f"offline estimate from {len(chunks)} source passages and {len(rels)} relationships",
        "findings": findings,
        "source_chunk_ids": sorted({c for f in findings for c in f["chunk_ids"]}),
    }


