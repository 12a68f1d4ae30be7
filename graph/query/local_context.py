"""Graph-local context for relation questions ("how is X related to Y", "кто связан с ..."), built as
GraphRAG's local search builds its context: the entities the question names, their strongest
relationships, the passages those come from and the community report that covers them, cut to a
budget. The answer cites the passages as every answer does; the entity, relationship and report
lines say why those passages were chosen (they go to the trace and, with an LLM, to the prompt).

Everything is read from the reader's level (GraphSearcher.level) and the passages through SQL with
the reader's ACL, so nothing here comes from a document the reader may not read.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from core.llm.stats import CHARS_PER_TOKEN
from graph import browse_store, retrieval_store, store
from graph.query.graph_search import GraphHit, GraphSearcher, hit_of

MAX_ENTITIES = 5  # linked entities kept, best linked first
MAX_RELATIONSHIPS = 20  # relationships read per question, strongest first
MAX_PASSAGES = 8  # passages handed to the answer


@dataclass
class LocalContext:
    level: str | None
    entities: list[dict] = field(default_factory=list)  # key, name, type, description
    relationships: list[dict] = field(default_factory=list)  # source, target, description, weight
    passages: list[GraphHit] = field(default_factory=list)
    report: dict | None = None  # the covering community's title and summary
    trace: dict = field(default_factory=dict)


def rank_sources(relationships: Sequence[dict], entity_chunks: dict[str, Sequence[int]], linked: Sequence[str]
                 ) -> list[int]:
    """Chunk ids, best first: a relationship joining two linked entities before one touching a
    single one (stronger first), then chunks naming the most linked entities."""
    keys = set(linked)
    score: Counter = Counter()
    for r in relationships:
        both = r["source"] in keys and r["target"] in keys
        for c in r["chunk_ids"]:
            score[c] += (10.0 if both else 1.0) * r["weight"]
    for key in linked:
        for c in entity_chunks.get(key, ()):
            score[c] += 1.0
    return sorted(score, key=lambda c: (-score[c], c))


def covering_community(communities: Sequence, linked: Sequence[str]) -> int | None:
    """The deepest community holding the most linked entities (the smallest one that covers them)."""
    keys = set(linked)
    best = None
    for c in communities:
        held = len(keys & set(c.members))
        if held and (best is None or (held, c.level) > (best[0], best[1])):
            best = (held, c.level, c.id)
    return best[2] if best else None


def local_context(graph: GraphSearcher, tenant: str, groups: Sequence[str], question: str,
                  budget_tokens: int = 3000) -> LocalContext:
    """The graph-local context of `question` for this reader; empty when no level fits or nothing is linked."""
    groups = sorted({g for g in groups if g})
    level = graph.level(tenant, groups) if groups else None
    if level is None:
        return LocalContext(None, trace={"empty_reason": "no access level fits the reader"})
    matrix, _ = graph.matrix(tenant, level.name)
    links = [link for link in graph.link(tenant, level.name, matrix, question) if link.how == "name"]
    linked = [link.key for link in links[:MAX_ENTITIES]]
    if not linked:
        return LocalContext(level.name, trace={"empty_reason": "the question names no entity of the graph"})
    budget = int(budget_tokens * CHARS_PER_TOKEN["english"])  # a rough, language-blind conversion keeps it cheap
    db = graph.db
    with db.connection() as conn:
        entities = browse_store.entities_by_key(conn, tenant, level.name, linked)
        relationships = retrieval_store.relationships_of(conn, tenant, level.name, linked, MAX_RELATIONSHIPS)
        chunks_of = retrieval_store.entity_chunk_ids(conn, tenant, level.name, linked)
        ranked = rank_sources(relationships, chunks_of, linked)[: 3 * MAX_PASSAGES]
        rows = {r[0]: r for r in retrieval_store.readable_chunks(conn, tenant, groups, ranked)}
        community = covering_community(store.load_communities(conn, tenant, level.name), linked)
        reports = store.list_reports(conn, tenant, level.name, community) if community is not None else []
    context = LocalContext(level.name, trace={"linked": linked})
    for e in entities:  # the budget is spent in GraphRAG's order: entities, relationships, report, passages
        line = {"key": e["key"], "name": e["name"], "type": e["type"], "description": e["description"][:300]}
        budget -= len(line["description"]) + len(line["name"])
        context.entities.append(line)
    for r in relationships:
        if budget - len(r["description"]) < 0:
            break
        budget -= len(r["description"])
        context.relationships.append({k: r[k] for k in ("source", "target", "description", "weight")})
    if reports and budget > 0:
        # a quarter of what is left: the report frames the answer, the passages are what it cites
        context.report = {"id": reports[0]["id"], "title": reports[0]["title"],
                          "summary": reports[0]["summary"][: max(0, budget // 4)]}
        budget -= len(context.report["summary"])
    for c in ranked:
        if c not in rows or len(context.passages) >= MAX_PASSAGES:
            continue
        text = rows[c][4]
        if context.passages and budget - len(text) < 0:
            break
        budget -= len(text)
        context.passages.append(hit_of(rows[c], 0.0))
    context.trace |= {"relationships": len(context.relationships), "passages": [p.id for p in context.passages],
                      "report": context.report["id"] if context.report else None}
    return context
