"""Graph retrieval: entity linking, personalized PageRank, the cached matrix, ACLs, the graph leg.

Pure parts on tiny hand-made graphs; the rest over the fixtures corpus and its offline graph
(`demo_tenant`: level `staff` = public + staff, level `all` = every group). "Project Sandpiper" is
named only in hr documents: a reader without hr is served from `staff`, where it does not exist.
"""
from __future__ import annotations

import numpy as np
import pytest

from core.text.names import entity_key
from graph import retrieval_store
from graph.query.entity_link import meaning_links, name_links
from graph.query import graph_search
from graph.query.graph_search import GraphHit, GraphResult, GraphSearcher
from graph.query.local_context import local_context
from graph.query.ppr import HEAD_SHARE, build_matrix, personalized_pagerank, rank_passages, reset_vector
from router.graph_leg import HybridGraphSearcher, rrf
from router.question_cues import asks_relation
from router.service import QuestionRouter
from evaluation.datasets import Dataset, EvalQuery
from evaluation.runner import CHUNKS_PER_DOC_SLACK, evaluate
from vector.search.factory import make_searcher
from vector.search.hybrid import Candidate, SearchResult

STAFF = ["public", "staff"]
EVERYONE = ["finance", "hr", "public", "staff"]
SANDPIPER = "How is Project Sandpiper related to the Routing team?"

# A bridge: passage 10 names Alice and Acme; passage 20 names Acme and Berlin; passage 30 only Zed.
ENTITIES = [("alice", [10]), ("acme", [10, 20]), ("berlin", [20]), ("zed", [30])]
RELATIONSHIPS = [("acme", "alice", 2.0), ("acme", "berlin", 1.0)]


def test_ppr_reaches_the_bridge_passage_and_never_a_disconnected_one():
    matrix = build_matrix(ENTITIES, RELATIONSHIPS)
    assert matrix.nodes == 7 and list(matrix.chunk_ids) == [10, 20, 30]
    # column-stochastic: every node with edges hands on all its mass
    assert np.allclose(np.asarray(matrix.walk.sum(axis=0)).ravel(), 1.0)
    scores = personalized_pagerank(matrix, reset_vector(matrix, {"alice": 1.0}))
    assert abs(scores.sum() - 1.0) < 1e-6
    ranked = rank_passages(matrix, scores, 3)
    assert [c for c, _ in ranked] == [10, 20]  # the second hop is found through Acme; Zed's passage never


def test_reset_vector_weights_specific_entities_and_keeps_the_passage_share():
    matrix = build_matrix(ENTITIES, RELATIONSHIPS)
    assert reset_vector(matrix, {"nobody": 1.0}) is None  # nothing of the question in the graph: no walk
    reset = reset_vector(matrix, {"alice": 1.0, "acme": 1.0})
    assert reset[0] == pytest.approx(2 * reset[1])  # acme is in two passages: half as specific
    with_passages = reset_vector(matrix, {"alice": 1.0}, {20: 0.9, 30: 0.5}, passage_weight=0.05)
    entity_share = with_passages[:4].sum()
    assert entity_share == pytest.approx(1 / (1 + 0.05 + 0.05 * 0.01))


def test_first_hop_seed_takes_its_share_and_lifts_the_second_hop_over_closer_strangers():
    # passage 10 (the first hop) and 20 share Acme; 20 strangers (30..49) sit nearer the question
    matrix = build_matrix(ENTITIES[:3] + [(f"x{i}", [30 + i]) for i in range(20)], RELATIONSHIPS)
    dense = {10: 0.8, 20: 0.5} | {30 + i: 0.6 for i in range(20)}
    plain = reset_vector(matrix, {}, dense)
    assert [c for c, _ in rank_passages(matrix, personalized_pagerank(matrix, plain), 2)] == [10, 30]
    seeded = reset_vector(matrix, {}, dense, head=[10, 99])  # 99 is in no graph: ignored
    first = len(matrix.entity_keys) + matrix.chunk_index[10]
    assert seeded.sum() == pytest.approx(1.0)
    assert seeded[first] == pytest.approx(HEAD_SHARE + (1 - HEAD_SHARE) * plain[first])
    # query -> passage 10 -> Acme -> passage 20, now above every stranger
    assert [c for c, _ in rank_passages(matrix, personalized_pagerank(matrix, seeded), 2)] == [10, 20]
    only_head = reset_vector(matrix, {"nobody": 1.0}, head=[20])
    assert only_head[len(matrix.entity_keys) + matrix.chunk_index[20]] == pytest.approx(1.0)  # the first hop alone


class _Hybrid:
    """A HybridSearcher stand-in: reranked hits with fixed scores, the offline reranker's calibrated cut."""

    def __init__(self, scores: dict[int, float], degraded: bool = False):
        self.scores, self.degraded, self.rerank_threshold = scores, degraded, None
        self.reranker = type("R", (), {"provenance": {"embedder": "toy"}, "suggested_threshold": 0.5})()
        self.embedder = type("E", (), {"model_id": "toy-model"})()

    def search(self, tenant, groups, query, k=10, mode="hybrid+rerank", apply_threshold=True):
        hits = [Candidate(i, f"d{i}", "", "", "", "english", score=s) for i, s in self.scores.items()][:k]
        return SearchResult(hits, hits, degraded=self.degraded)


class _Graph:
    def __init__(self, ranked: list[int]):
        self.ranked, self.heads = ranked, []

    def level(self, tenant, groups):
        return None

    def search(self, tenant, groups, question, k, level=None, head=()):
        self.heads.append(list(head))
        return GraphResult([GraphHit(i, f"d{i}", "", "", "", score=1.0) for i in self.ranked[:k]], "all")


def test_fusion_keeps_hybrids_confident_head_and_fuses_the_rest_with_the_walk():
    graph = _Graph([9, 8, 3])
    fused = HybridGraphSearcher(_Hybrid({1: 0.9, 2: 0.6, 3: 0.2, 4: 0.1}), graph, "t", ["public"]).search("q", 4)
    assert graph.heads == [[1]]  # hybrid's top passage is the walk's first hop
    # 1 and 2 pass the reranker's cut and stay on top; 3 (in both legs) wins the RRF of the rest
    assert [p.id for p in fused] == [1, 2, 3, 9]
    # a degraded search's scores are not reranker scores: no confident head, plain RRF
    degraded = HybridGraphSearcher(_Hybrid({1: 0.9, 2: 0.6, 3: 0.2}, degraded=True), _Graph([9, 8, 3]), "t", ["public"])
    assert [p.id for p in degraded.search("q", 3)] == [3, 1, 9]


def test_a_name_links_its_entity_written_in_the_other_script():
    keys = {"ан кириллов", "екатеринбург", "anna", "берлин", "berlin office"}
    links = name_links("Who leads the Yekaterinburg office, Anna Kirillova?", keys)
    assert [(link.key, link.surface) for link in links] == [("ан кириллов", "Anna Kirillova"),
                                                              ("екатеринбург", "Yekaterinburg")]
    # an exact key wins over a spelling; too few consonants ("Anna") or a lower-case run links nothing
    assert [link.key for link in name_links("Is Anna in the Berlin office?", keys)] == ["anna", "berlin office"]
    assert [(link.key, link.score) for link in name_links("what about anna kirillova", keys)] == [("anna", 0.5)]
    assert [link.key for link in name_links("Где работает Anna?", {"ан"})] == []
    # a cached graph's index of spellings, built once for every question, links the same
    matrix = build_matrix([(k, [i]) for i, k in enumerate(sorted(keys))], [])
    assert matrix.entity_spellings is matrix.entity_spellings
    asked = "Who leads the Yekaterinburg office, Anna Kirillova?"
    assert name_links(asked, matrix.entity_index, matrix.entity_spellings) == name_links(asked, keys)


def test_name_links_follow_russian_inflection_and_prefer_the_longest_name():
    keys = {entity_key("команда Маршрутизации"), entity_key("New York Times"), entity_key("York")}
    links = name_links("Кто руководит командой Маршрутизации?", keys)
    assert [link.key for link in links] == [entity_key("команда Маршрутизации")]
    links = name_links("What did the New York Times write about York?", keys)
    assert {link.key for link in links} == {entity_key("New York Times"), entity_key("York")}
    assert name_links("what is the of the", {"the", "of"}) == []  # stop words name nothing


def test_meaning_links_scale_by_rank_band_and_leave_named_entities_alone():
    links = meaning_links([("a", 0.91), ("b", 0.88), ("c", 0.85)], named={"b"})
    assert [(link.key, round(link.score, 2)) for link in links] == [("a", 0.5)]


def test_rrf_fuses_and_keeps_the_first_rankings_order_on_ties():
    assert rrf([[1, 2, 3], [3, 4]]) == [3, 1, 2, 4]
    assert rrf([[1, 2], [2, 1]]) == [1, 2]


def test_graph_search_never_seeds_or_returns_what_the_reader_may_not_read(db, local_embedder, demo_tenant,
                                                                            monkeypatch):
    graph = GraphSearcher(db, local_embedder)
    sandpiper = entity_key("Project Sandpiper")
    everyone = graph.search(demo_tenant, EVERYONE, SANDPIPER, 10)
    assert everyone.level == "all" and sandpiper in {link.key for link in everyone.links}
    assert any(h.doc_id.startswith("hr/") for h in everyone.hits)
    staff = graph.search(demo_tenant, STAFF, SANDPIPER, 10)
    assert staff.level == "staff" and staff.hits
    assert sandpiper not in {link.key for link in staff.links} | {key for key, _ in staff.bridges}
    assert not any(h.doc_id.startswith("hr/") for h in staff.hits)
    assert "Sandpiper" not in " ".join(h.text for h in staff.hits)
    assert graph.search(demo_tenant, ["nobody"], SANDPIPER, 10).hits == []  # no level fits: no walk
    # every passage's dense seed comes through SQL with the reader's ACL, even over a wider level's matrix
    wide, _ = graph.matrix(demo_tenant, "all")
    seeds = graph.passage_scores(demo_tenant, STAFF, wide, local_embedder.embed_query(SANDPIPER))
    with db.connection() as conn:
        hr = {r[0] for r in conn.execute("SELECT id FROM chunks WHERE tenant_id = %s AND NOT acl && %s",
                                         (demo_tenant, STAFF))}
    assert seeds and hr and not hr & set(seeds) and staff.trace["dense_ms"] >= 0
    # a level too large for the exact scan is seeded by its nearest passages, with the same ACL
    monkeypatch.setattr(graph_search, "EXACT_SEEDS_UP_TO", 0)
    nearest = graph.passage_scores(demo_tenant, STAFF, wide, local_embedder.embed_query(SANDPIPER))
    assert nearest and not hr & set(nearest) and set(nearest) <= set(wide.chunk_ids.tolist())
    assert len(nearest) <= graph_search.NEAREST_SEEDS


def test_entity_vectors_link_by_meaning_and_follow_the_build(db, settings, local_embedder):
    from graph.indexing.contracts import BuildSettings, OfflineReporter
    from graph.indexing.extract_offline import OfflineExtractor
    from graph.indexing.runner import build_graph
    from vector.ingest.runner import ingest_documents
    from vector.ingest.sources import SourceDocument

    tenant = "entity_vectors"
    docs = [SourceDocument("team.md", "Routing", "Анна Кириллова руководит командой Маршрутизации в Екатеринбурге.",
                           ("staff",), "russian", "test"),
            SourceDocument("gw.md", "Gateway", "The Payments Gateway is owned by the Billing team in Austin.",
                           ("staff",), "english", "test")]
    ingest_documents(db, local_embedder, settings, tenant, docs, [])
    build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), local_embedder,
                BuildSettings(entity_vectors=True))
    with db.connection() as conn:
        assert not retrieval_store.entities_missing_vectors(conn, tenant, "all", local_embedder.model_id)
        vector = local_embedder.embed_query("Кто руководит командой Маршрутизации?")
        nearest = retrieval_store.nearest_entities(conn, tenant, "all", local_embedder.model_id, vector, 3)
    assert len(nearest) == 3 and nearest[0][1] >= nearest[-1][1]


def test_matrix_is_cached_per_graph_version(db, local_embedder, demo_tenant):
    graph = GraphSearcher(db, local_embedder)
    first, cached = graph.matrix(demo_tenant, "staff")
    again, cached_again = graph.matrix(demo_tenant, "staff")
    assert not cached and cached_again and again is first
    with db.connection() as conn:
        before = retrieval_store.graph_version(conn, demo_tenant, "staff")
        # any change of the level's rows (here a no-op update) bumps its version: the next read reloads
        conn.execute("UPDATE graph_relationships SET weight = weight WHERE tenant_id = %s AND access_level = 'staff'",
                     (demo_tenant,))
        assert retrieval_store.graph_version(conn, demo_tenant, "staff") > before
    reloaded, cached = graph.matrix(demo_tenant, "staff")
    assert not cached and reloaded is not first and reloaded.nodes == first.nodes


def test_hybrid_graph_search_fuses_both_legs_for_the_reader_only(db, settings, local_embedder, demo_tenant):
    graph = GraphSearcher(db, local_embedder)
    with make_searcher(db, settings, embedder=local_embedder, threshold=False) as searcher:
        fused = HybridGraphSearcher(searcher, graph, demo_tenant, STAFF)
        passages = fused.search(SANDPIPER, 8)
        only_graph = HybridGraphSearcher(searcher, graph, demo_tenant, STAFF, graph_only=True).search(SANDPIPER, 8)
    assert passages and only_graph and len(passages) <= 8
    assert not any(p.doc_id.startswith("hr/") for p in passages + only_graph)
    walked = fused.graph_trace()[-1]
    assert walked["hits"] and set(walked["hits"]) & {p.id for p in passages}
    assert walked["walk"]["head"] == fused.records[-1].hits[:1]  # hybrid's top passage is the first hop


def test_relation_cue_takes_only_explicit_relation_questions():
    assert asks_relation("How is Project Sandpiper related to the Routing team?")
    assert asks_relation("What connects Berlin and Moscow?")
    assert asks_relation("Кто связан с командой Маршрутизации?")
    assert asks_relation("Как команда Маршрутизации связана с Geomesh?")
    assert not asks_relation("Who directed Inception and Tenet?")
    assert not asks_relation("What is the retry limit for error 429?")


def test_local_context_for_a_relation_question_stays_in_the_readers_level(db, local_embedder, demo_tenant):
    graph = GraphSearcher(db, local_embedder)
    context = local_context(graph, demo_tenant, EVERYONE, SANDPIPER)
    assert context.level == "all" and entity_key("Project Sandpiper") in context.trace["linked"]
    assert context.relationships and context.passages and context.report
    assert any(p.doc_id.startswith("hr/") for p in context.passages)
    staff = local_context(graph, demo_tenant, STAFF, SANDPIPER)
    assert staff.level == "staff" and entity_key("Project Sandpiper") not in staff.trace.get("linked", [])
    shown = " ".join([p.text for p in staff.passages] + [r["description"] for r in staff.relationships]
                     + [e["description"] for e in staff.entities] + [str(staff.report)])
    assert "Sandpiper" not in shown and not any(p.doc_id.startswith("hr/") for p in staff.passages)


def test_eval_scores_configs_made_above_vector_through_their_search_functions(tmp_path):
    dataset = Dataset("toy", tmp_path, [EvalQuery("q1", "who?", {"a": 1, "b": 1}, multi_gold=True)], labelled=True)
    asked = []

    def graph(question: str, n: int) -> list[str]:
        asked.append((question, n))
        return ["b", "x", "a"]

    results = evaluate(None, dataset, ["graph"], 10, extra={"graph": graph})
    assert asked == [("who?", 10 * CHUNKS_PER_DOC_SLACK)]  # never reaches the hybrid searcher (None here)
    assert results["graph"]["evidence_recall"] == 1.0 and results["graph"]["recall"] == 1.0


def test_local_route_answers_relation_questions_from_the_graph_local_context(db, settings, local_embedder, demo_tenant):
    with QuestionRouter(db, settings, embedder=local_embedder, use_llm=False) as router:
        everyone = router.ask(demo_tenant, EVERYONE, SANDPIPER, route="local")
        staff = router.ask(demo_tenant, STAFF, SANDPIPER, route="local")
    assert entity_key("Project Sandpiper") in everyone.trace["graph_local"]["linked"]
    graph_passages = everyone.trace["graph_local"]["passages"]
    shown = [p["id"] for p in everyone.trace["passages"]]  # at most answer_passages, the graph's first
    assert graph_passages and shown == (graph_passages + shown[len(graph_passages):])[:len(shown)]
    # the question names Sandpiper; nothing the staff reader is shown may
    visible = str([staff.answer, staff.citations, staff.trace["graph_local"], staff.trace["passages"]])
    assert "Sandpiper" not in visible and "hr/" not in visible
