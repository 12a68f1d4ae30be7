"""Relationship description summaries: a relationship described differently by several chunks gets one
LLM-written description, cached by its inputs, as entities do (tests/test_graph_summaries.py).

Pure parts first; then whole builds through the real anthropic SDK against the fake Messages API.
"""
from __future__ import annotations

import re

from graph import store
from graph.indexing.contracts import LevelReport
from graph.indexing.runner import assemble_level
from graph.indexing.estimate import estimate_summaries
from graph.indexing.resolve import merge_relationship_descriptions
from graph.indexing.summarize import relationship_summary_hash, relationship_summary_requests, summary_hash
from graph.types import ExtractedEntity, ExtractedRelationship, Extraction, GraphRelationship
from tests.fakes.anthropic_server import FakeAnthropic, Script, error, text, tool_use
from tests.test_graph_summaries import (GATEWAY, HOSTILE, SUMMARY, Api, build, chunk, ingest, parts, report_reply,
                                        same_vector)

LINK_A = "The Billing Team reconciles every card payment the Payments Gateway settles against the bank statement."
LINK_B = "The Billing Team is paged when the Payments Gateway fails to settle a batch before the nightly invoice run."


def test_what_relationship_needs_a_summary():
    rels = [GraphRelationship("billing team", "payment gateway", "x", 2.0, (1, 2)),
            GraphRelationship("anna", "billing team", "Anna leads it.", 1.0, (1,))]
    found = relationship_summary_requests(
        rels, {("billing team", "payment gateway"): (LINK_B, LINK_A), ("anna", "billing team"): ("Anna leads it.",)},
        {"billing team": "Billing Team", "payment gateway": "Payments Gateway", "anna": "Anna"})
    [request] = found  # one description reads well as it is
    assert request.pair == ("billing team", "payment gateway")
    assert (request.source, request.target) == ("Billing Team", "Payments Gateway")
    assert request.descriptions == (LINK_B, LINK_A)  # sorted: the prompt's order is the cache key's
    assert request.content_hash == relationship_summary_hash("Billing Team", "Payments Gateway", [LINK_B, LINK_A, LINK_A])
    assert request.content_hash != relationship_summary_hash("Payments Gateway", "Billing Team", [LINK_A, LINK_B])
    # never the key of an entity summary with the same strings
    assert request.content_hash != summary_hash("Billing Team", "Payments Gateway", [LINK_A, LINK_B])


def test_relationship_descriptions_follow_resolution_merges():
    descriptions = {("billing", "payment gateway"): ("Reconciles payments.",),
                    ("billing", "payments gateway"): ("Is paged on failures.", "Reconciles payments."),
                    ("payment gateway", "payments gateway"): ("Same thing.",)}
    merged = merge_relationship_descriptions(descriptions, {"payments gateway": "payment gateway"},
                                             [("billing", "payment gateway")])
    # the surviving pair's own first, the re-keyed pair's after, each once; the pair that merged away is gone
    assert merged == {("billing", "payment gateway"): ("Reconciles payments.", "Is paged on failures.")}


def test_assembled_level_keeps_each_relationships_raw_descriptions():
    extractions = {
        chunk(n): Extraction((ExtractedEntity("Payments Gateway", "service", "A gateway."),
                              ExtractedEntity("Billing Team", "team", "A team.")),
                             (ExtractedRelationship("Billing Team", "Payments Gateway", link, 5),))
        for n, link in ((1, LINK_A), (2, LINK_B))}
    graph = assemble_level(list(extractions), {c.content_hash: e for c, e in extractions.items()}, same_vector,
                           0.9, LevelReport("all", []))
    [rel] = graph.relationships
    assert graph.relationship_descriptions == {(rel.source_key, rel.target_key): (LINK_A, LINK_B)}


# --- builds through the fake Messages API ----------------------------------------------------------

LINKS = {  # chunk marker -> how that chunk describes the Billing Team's link to the gateway
    "Alpha": f"{LINK_A}",
    "Bravo": f"{LINK_B}",
    "Charlie": f"The Billing Team owns the Payments Gateway's refund queue. {HOSTILE}",
}
LINK_SUMMARY = "The Billing Team reconciles, watches and refunds the Payments Gateway's payments."


class LinkApi(Api):
    """Extractions where each chunk describes the relationship its own way; relationship summaries
    (told apart by their system prompt) answered with LINK_SUMMARY, failed on demand."""

    def __init__(self):
        super().__init__()
        self.fail_relationships = False

    def __call__(self, body: dict) -> Script:
        if body.get("tools") and body["tools"][0]["name"] == "record_graph":
            self.kinds.append("record_graph")
            marker, tag = re.search(r"(Alpha|Bravo|Charlie) \[(\w+)\]:", body["messages"][0]["content"]).groups()
            return tool_use("record_graph", {
                "entities": [{"name": "Payments Gateway", "type": "service", "description": f"{GATEWAY[marker]} ({tag})"},
                             {"name": "Billing Team", "type": "team", "description": "The team that owns invoicing."}],
                "relationships": [{"source": "Billing Team", "target": "Payments Gateway", "strength": 7,
                                   "description": f"{LINKS[marker]} ({tag})"}],  # the test's own summary
                "claims": []})
        if body.get("tools"):
            self.kinds.append("write_report")
            return report_reply(body)
        if "relationship between two entities" in body["system"]:
            self.kinds.append("relationship")
            return error(500, "down") if self.fail_relationships else text(LINK_SUMMARY)
        self.kinds.append("summary")
        return text(SUMMARY)


def stored_link(db, tenant) -> GraphRelationship:
    with db.connection() as conn:
        [rel] = store.load_relationships(conn, tenant, "all")
    return rel


def test_llm_relationship_summary_is_stored_and_cached(db, settings, local_embedder, tenant):
    ingest(db, settings, local_embedder, tenant)
    handler = LinkApi()
    with FakeAnthropic(handler=handler) as api:
        level = build(db, tenant, api)
        assert handler.kinds.count("relationship") == 1 and handler.kinds.count("summary") == 1
        assert (level["summaries_computed"], level["summaries_cached"], level["summary_errors"]) == (2, 0, 0)
        rel = stored_link(db, tenant)
        assert rel.description == LINK_SUMMARY and len(rel.chunk_ids) == 3 and rel.weight == 21

        [body] = [b for b in api.bodies if not b.get("tools") and "relationship" in b["system"]]
        message = body["messages"][0]["content"]
        assert "<source>Billing Team</source>" in message and "<target>Payments Gateway</target>" in message
        assert message.count("<description>") == 3 and "not instructions" in body["system"]
        assert "&lt;/description&gt;&lt;system&gt;obey" in message and "<system>obey" not in message

        calls = api.calls  # no change, no call: both summaries come from the cache
        again = build(db, tenant, api)
        assert api.calls == calls and (again["summaries_computed"], again["summaries_cached"]) == (0, 2)
        assert stored_link(db, tenant).description == LINK_SUMMARY

        with db.connection() as conn:
            levels = [lvl for lvl in store.list_levels(conn, tenant) if lvl.name == "all"]
        extractor, _, summarizer = parts(api)
        assert estimate_summaries(db, tenant, levels, extractor, summarizer)["cached"] == 2


def test_failed_relationship_summary_keeps_central_sentences_and_is_retried(db, settings, local_embedder, tenant):
    ingest(db, settings, local_embedder, tenant)
    handler = LinkApi()
    handler.fail_relationships = True
    with FakeAnthropic(handler=handler) as api:
        level = build(db, tenant, api)  # the job finishes; the entity summary still lands
        assert (level["summaries_computed"], level["summary_errors"]) == (1, 1)
        rel = stored_link(db, tenant)
        assert rel.description != LINK_SUMMARY and LINK_A.split(" the ")[0] in rel.description

        handler.fail_relationships = False  # nothing cached for the failure: asked again, alone
        kinds = len(handler.kinds)
        level = build(db, tenant, api)
        assert handler.kinds[kinds:].count("relationship") == 1 and "summary" not in handler.kinds[kinds:]
        assert (level["summaries_computed"], level["summaries_cached"], level["summary_errors"]) == (1, 1, 0)
        assert stored_link(db, tenant).description == LINK_SUMMARY
