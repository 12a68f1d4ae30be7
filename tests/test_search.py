"""Hybrid search against a real PostgreSQL and the real local model: ACL, languages, fusion, rerank."""
from __future__ import annotations

import math
import time

import psycopg
import pytest

from tests.conftest import ingest_corpus
from vector.search import sql as search_sql
from vector.search.bm25 import select_match_groups, select_match_terms, select_translations, translation_concepts
from core.text.skeletons import skeleton
from vector.search.fulltext import (MAX_SPELLINGS, bm25_idf, build_query, name_skeletons, query_pieces, quote_lexeme,
                                    with_spellings)
from vector.search.fusion import DENSE_WEIGHT, rrf, zscore_fusion
from vector.search.hybrid import HybridSearcher, use_exact_scan
from vector.search.rerank.cut import OTHER_SCRIPT_SHARE

CORPUS = {
    "payments.md": """---
title: Payments Gateway
acl: [staff]
---
# Payments Gateway

## Retries

Failed calls are retried with exponential backoff; `retry_max_attempts` defaults to five.
Error ERR_2043 means the carrier rate limit was hit and the call is parked.
""",
    "status.md": """---
title: Status page
acl: [staff, public]
---
The status page refreshes every minute. Incident 2043 on the status page was an error in the CDN.
""",
    "hr/bonus.md": """---
title: Bonus formula
acl: [hr]
---
The Thornbury bonus formula multiplies the base salary by the quarterly performance factor.
""",
    "hr/vacation.md": """---
title: Отпуск
acl: [hr]
---
Сотрудник получает 28 календарных дней отпуска в год. Заявление подаётся за две недели.
""",
    "ops/backup_ru.md": """---
title: Резервное копирование
acl: [public]
---
Резервное копирование базы данных выполняется каждую ночь в два часа. Копии хранятся тридцать дней.
""",
    "ops/backup_en.md": """---
title: Database backups
acl: [public]
---
Database backups run every night at two o'clock. Backup copies are kept for thirty days.
""",
}


@pytest.fixture(scope="module")
def corpus_tenant(db, settings, local_embedder, tmp_path_factory) -> str:
    return ingest_corpus(db, settings, local_embedder, tmp_path_factory.mktemp("search_corpus"), CORPUS, "t_search")


@pytest.fixture(scope="module")
def searcher(db, local_embedder):
    s = HybridSearcher(db, local_embedder)
    yield s
    s.close()


def acl_of(db, ids) -> dict[int, list[str]]:
    with db.connection() as conn:
        return dict(conn.execute("SELECT id, acl FROM chunks WHERE id = ANY(%s)", (list(ids),)).fetchall())


def every_traced_id(result) -> set[int]:
    return {e["id"] for stage in result.trace["stages"].values() for e in stage}


# --- pure ------------------------------------------------------------------------------------


def test_rrf_two_lists_hand_computed():
    fused = rrf([[1, 2, 3], [3, 1, 4]], k=60)
    assert [i for i, _ in fused] == [1, 3, 2, 4]
    expected = {1: 1 / 61 + 1 / 62, 3: 1 / 63 + 1 / 61, 2: 1 / 62, 4: 1 / 63}
    assert all(math.isclose(s, expected[i]) for i, s in fused)


def test_rrf_ties_are_broken_by_id_and_repeats_count_once():
    assert [i for i, _ in rrf([[7, 2], [2, 7]])] == [2, 7]  # same score: smaller id first
    assert [i for i, _ in rrf([[9], [3], [5]])] == [3, 5, 9]
    assert rrf([[4, 4, 1]], k=0) == [(4, 1.0), (1, 1 / 3)]
    assert rrf([]) == [] and rrf([[], []]) == []


def test_query_pieces_keep_identifiers_and_phrases():
    pieces = query_pieces('What does ERR_2043 mean for "dead letter" retries?', "english")
    assert ("ERR_2043", "english") in pieces and ("ERR_2043", "simple") in pieces
    assert ("dead letter", "english") in pieces and ("retries", "english") in pieces
    assert query_pieces("rate limit headers", "simple") == [
        (w, cfg) for w in ("rate", "limit", "headers") for cfg in ("english", "simple")
    ]
    q = build_query([("'err' <-> '2043'", ["2043", "err"]), ("", []), ("'retri'", ["retri"])])
    own = tuple(x for x in q.lexemes if x not in q.translated)  # the rest: "retri"'s Russian translations
    assert own == ("2043", "err", "retri") and q.phrases == ("'err' <-> '2043'",)
    assert q.match(tuple((x,) for x in own)) == "'2043' | 'err' | 'retri'"
    assert bm25_idf(100, 1) > bm25_idf(100, 50) > 0 and bm25_idf(10, 20) > 0


def test_candidates_come_from_the_rarest_terms_within_the_budget():
    assert select_match_terms(("a", "b", "c"), [10, 0, 3], budget=12) == ("c",)
    assert select_match_terms(("a", "b", "c"), [10, 0, 3], budget=13) == ("a", "c")
    assert select_match_terms(("a", "b"), [900, 800], budget=10) == ("b",)  # always the rarest one
    assert select_match_terms(("a",), [0], budget=10) == ()


def test_a_question_word_brings_its_translations_into_the_other_languages_chunks():
    q = build_query([("'vacat'", ["vacat"]), ("'thornburi'", ["thornburi"])], "english")
    assert "отпуск" in q.translated and {"vacat", "thornburi"}.isdisjoint(q.translated)
    assert q.script_of("отпуск") is True and q.script_of("vacat") is None  # own words count everywhere
    # a Russian question's Latin words are names, not English to translate
    ru = build_query([("'отпуск'", ["отпуск"]), ("'vacat'", ["vacat"])], "russian")
    assert "vacat" not in {t for t in ru.translated} and ru.script_of("vacat") is None
    assert all(ru.script_of(t) is False for t in ru.translated) and ru.translated


def test_translations_select_only_within_what_the_own_words_leave_of_the_budget():
    q = build_query([("'vacat'", ["vacat"])], "english")
    lexemes = q.lexemes
    dfs = [0 if x == "vacat" else 7 if x == "отпуск" else 500 for x in lexemes]
    own = (("vacat",),)
    assert select_translations(q, dfs, own, budget=10) == (("отпуск",),)  # the rarest that fits
    assert select_translations(q, dfs, own, budget=5) == ()  # nothing fits
    assert select_translations(q, dfs, (("a", "b"),), budget=10_000) == ()  # own words already in pairs: none


def test_the_translations_of_one_word_count_as_one_concept():
    # Pirkola's structured query: "lead" has many senses, "vacation" one; each is one concept whose idf is
    # that of its translations' summed frequency, so the word of many common senses weighs little
    q = build_query([("'lead'", ["lead"]), ("'vacat'", ["vacat"])], "english")
    assert {"руководств", "свинец", "отпуск"} <= q.translated and len(q.senses) == 2
    vacation = next(g for g in q.senses if "отпуск" in g)
    dfs = [0 if x in ("lead", "vacat") else 3 if x in vacation else 40 for x in q.lexemes]
    idf, concept = translation_concepts(q, dfs, n=1000)
    at = {x: i for i, x in enumerate(q.lexemes)}
    assert concept[at["руководств"]] == concept[at["свинец"]] != concept[at["отпуск"]]
    assert idf[at["руководств"]] == idf[at["свинец"]] < idf[at["отпуск"]] == bm25_idf(1000, 3 * len(vacation))
    assert len(set(concept)) == 2 + len(q.senses)  # each own word alone, one per translated word
    # no translations: every lexeme its own concept with its own idf, as before
    plain = build_query([("'2043'", ["2043"])], "english")
    assert translation_concepts(plain, [5], n=100) == ([bm25_idf(100, 5)], [0])


def test_a_second_sense_of_a_word_finds_the_page(corpus_tenant, searcher):
    # "application" is "применение" in its first sense; the leave page writes "заявление", its second
    result = searcher.search(corpus_tenant, ["hr"], "How early is the leave application handed in?", mode="bm25")
    assert result.hits and result.hits[0].doc_id == "hr/vacation.md"
    assert "заявлен" in result.trace["bm25"]["df"]


def test_an_english_question_finds_a_russian_page_by_its_words(corpus_tenant, searcher):
    result = searcher.search(corpus_tenant, ["hr"], "How many days of vacation a year?", mode="bm25")
    assert result.hits and result.hits[0].doc_id == "hr/vacation.md"
    # the same corpus without the reader's group: the page stays unseen whatever the words
    hidden = searcher.search(corpus_tenant, ["staff", "public"], "How many days of vacation a year?", mode="bm25")
    assert all(h.doc_id != "hr/vacation.md" for h in hidden.hits)


def test_in_a_large_tenant_candidates_hold_two_rare_terms():
    # the rarest term fits the budget: single terms, as above
    assert select_match_groups(("a", "b", "c"), [10, 0, 3], n=1000, budget=12) == (("c",),)
    # even the rarest is over the budget: pairs among the rarest terms, as many as the expected size allows
    dfs = [5_000, 3_000, 4_000, 900_000]
    assert select_match_groups(("a", "b", "c", "d"), dfs, n=1_000_000, budget=2000) == (
        ("a", "b"), ("a", "c"), ("b", "c"))  # adding d would expect ~11,000 rows
    assert select_match_groups(("a", "b"), [5_000, 3_000], n=10_000, budget=10) == (("a", "b"),)  # at least a pair
    assert select_match_groups(("a", "b"), [5_000, 0], n=10_000, budget=10) == (("a",),)  # one term: no pair
    q = build_query([("'a'", ["a"]), ("'b'", ["b"]), ("'c'", ["c"])])
    assert q.match((("a", "b"), ("c",))) == "( 'a' & 'b' ) | 'c'"


def test_pair_candidates_are_filled_from_the_rarest_term(corpus_tenant, db, local_embedder):
    with HybridSearcher(db, local_embedder, bm25_max_scored=1) as tight:  # every question term is "common"
        result = tight.search(corpus_tenant, ["staff", "public"], "error 2043 every", k=5, mode="bm25")
    bm25 = result.trace["bm25"]
    assert bm25["match"] == ["2043 & error"] and bm25["match_fallback"] == ["2043"]
    # one row scored, the budget is also the cap: the first of the two holding "2043" in scan order,
    # which depends on where earlier writes left free space, so either may be the one
    assert len(result.hits) == 1 and result.hits[0].doc_id in {"payments.md", "status.md"}


def test_capped_candidates_are_the_same_on_every_run(corpus_tenant, db, local_embedder):
    # a budget of 2 rows for words in many chunks: which rows are kept must not vary between runs
    with HybridSearcher(db, local_embedder, bm25_max_scored=2) as tight:
        runs = [tight.search(corpus_tenant, ["staff", "public"], "the policy for every team", k=5, mode="bm25")
                for _ in range(3)]
    first = runs[0].trace["stages"]["fts"]
    assert 0 < len(first) <= 2
    assert all(r.trace["stages"]["fts"] == first for r in runs[1:])
    with db.connection() as conn, search_sql.read_only(conn, search_sql.STABLE_SCAN_ORDER):
        assert conn.execute("SELECT current_setting('max_parallel_workers_per_gather'),"
                            " current_setting('synchronize_seqscans')").fetchone() == ("0", "off")
    with db.connection() as conn:  # local to the transaction: the pooled connection is unchanged
        assert conn.execute("SELECT current_setting('synchronize_seqscans')").fetchone() == ("on",)


def test_exact_vector_scan_only_where_it_is_cheaper_than_the_walk():
    assert use_exact_scan(1_500, 10_000_000, 100)  # tiny reader: always exact
    assert use_exact_scan(11_000, 1_000_000, 400)  # 1% of 1M: the walk would step over ~40k nodes
    assert not use_exact_scan(10_000, 100_000, 400)  # 10% of 100k: the walk is cheaper
    assert not use_exact_scan(100_000, 1_000_000, 400)
    assert use_exact_scan(20_000, 1_000_000, 400) and not use_exact_scan(20_000, 1_000_000, 100)


def test_lexeme_quoting_round_trips_through_postgres(db):
    odd = ["it's", "a\\b", "x y", "ab:*", "!&|", "отпуск"]
    with db.connection() as conn:
        for lexeme in odd:
            assert conn.execute(
                "SELECT array_to_tsvector(%s::text[]) @@ CAST(%s AS tsquery)", ([lexeme], quote_lexeme(lexeme))
            ).fetchone()[0], lexeme


def test_search_transactions_cannot_write_and_leave_the_pooled_connection_as_they_found_it(db):
    with db.connection() as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            with search_sql.read_only(conn):
                conn.execute("CREATE TEMP TABLE must_not_exist (x int)")
        assert conn.read_only is None  # restored: the next user of the connection may write
        with search_sql.read_only(conn):
            search_sql.set_local_and_dimension(conn, {"hnsw.ef_search": "7", "enable_indexscan": "off"},
                                               model="test/unknown-model", staged=False)
            assert conn.execute("SHOW hnsw.ef_search").fetchone() == ("7",)
        # SET LOCAL ended with the transaction
        assert conn.execute("SHOW hnsw.ef_search").fetchone() != ("7",)
        assert conn.execute("SHOW enable_indexscan").fetchone() == ("on",)
        conn.rollback()


# --- access control --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid", "hybrid+rerank"])
def test_chunk_of_hr_never_reaches_a_user_without_hr(db, corpus_tenant, searcher, mode):
    query = "Thornbury bonus formula"  # the words exist only in the hr document
    outsider = searcher.search(corpus_tenant, ["staff", "public"], query, k=10, mode=mode)
    assert all(h.doc_id != "hr/bonus.md" for h in outsider.hits + outsider.candidates)
    assert all({"staff", "public"} & set(acl) for acl in acl_of(db, every_traced_id(outsider)).values())
    if mode == "bm25":
        assert outsider.hits == []  # the only match is unreadable: nothing, not the hr chunk
    insider = searcher.search(corpus_tenant, ["hr"], query, k=10, mode=mode)
    assert insider.hits[0].doc_id == "hr/bonus.md" and insider.hits[0].title == "Bonus formula"


def test_bm25_reads_exact_counts_of_what_the_reader_may_see(corpus_tenant, searcher):
    query = "Thornbury bonus formula"  # the words exist only in the hr document
    outsider = searcher.search(corpus_tenant, ["staff", "public"], query, mode="bm25").trace["bm25"]
    insider = searcher.search(corpus_tenant, ["hr"], query, mode="bm25").trace["bm25"]
    assert set(outsider["df"].values()) == {0} and outsider["match"] == []
    assert sorted(insider["df"].values())[-3:] == [1, 1, 1] and len(insider["match"]) >= 3


def test_no_groups_means_no_results(corpus_tenant, searcher):
    result = searcher.search(corpus_tenant, [], "Thornbury bonus formula")
    assert result.hits == [] and result.candidates == [] and result.trace["empty_reason"] == "no groups"


def test_other_tenants_are_invisible(corpus_tenant, searcher):
    assert searcher.search("t_nobody", ["hr", "staff", "public"], "Thornbury bonus formula").hits == []


# --- full text: languages and exact tokens ---------------------------------------------------


def test_russian_question_finds_inflected_form_through_stemming(corpus_tenant, searcher):
    result = searcher.search(corpus_tenant, ["hr"], "Сколько дней можно быть в отпуске?", mode="bm25")
    assert result.trace["query_lang"] == "russian" and "'отпуск'" in result.trace["tsquery"]
    top = result.hits[0]
    assert top.doc_id == "hr/vacation.md" and "отпуска" in top.text and "отпуске" not in top.text


@pytest.mark.parametrize(
    "query, token",
    [("ERR_2043", "ERR_2043"), ("what does error ERR_2043 mean?", "ERR_2043"), ("retry_max_attempts", "retry_max_attempts")],
)
def test_exact_identifier_is_found_by_full_text(corpus_tenant, searcher, query, token):
    # status.md also says "2043" and "error": the whole identifier must still rank first
    result = searcher.search(corpus_tenant, ["staff", "public"], query, mode="bm25")
    assert result.hits[0].doc_id == "payments.md" and token in result.hits[0].text


@pytest.mark.parametrize(
    "query, expected",
    [
        ("Когда выполняется резервное копирование базы данных?", "ops/backup_ru.md"),
        ("When do the database backups run?", "ops/backup_en.md"),
    ],
)
def test_mixed_corpus_each_language_finds_its_own_document_first(corpus_tenant, searcher, query, expected):
    result = searcher.search(corpus_tenant, ["public"], query, k=5)
    assert result.hits[0].doc_id == expected
    assert result.hits[0].fts_rank == 1  # the full-text leg matched it in its own language


# --- fusion, modes, trace, determinism -------------------------------------------------------


def test_hybrid_is_zscore_fusion_of_both_legs_and_deterministic(corpus_tenant, searcher):
    query = "how long are backup copies kept?"
    first = searcher.search(corpus_tenant, ["public", "staff"], query, k=5)
    again = searcher.search(corpus_tenant, ["staff", "public"], query, k=5)
    assert [(h.id, h.score) for h in first.hits] == [(h.id, h.score) for h in again.hits]
    vec = [(e["id"], e["score"]) for e in first.trace["stages"]["vector"]]
    fts = [(e["id"], e["score"]) for e in first.trace["stages"]["fts"]]
    assert first.trace["fusion"] == "zscore" and first.trace["dense_weight"] == DENSE_WEIGHT
    assert [(h.id, h.score) for h in first.hits] == zscore_fusion([vec, fts], [DENSE_WEIGHT, 1 - DENSE_WEIGHT])[:5]
    assert [(e["id"], e["score"]) for e in first.trace["stages"]["rrf"]][:5] == [(h.id, h.score) for h in first.hits]
    for h in first.hits:
        assert (h.vector_rank is None) == (h.id not in dict(vec)) and (h.fts_rank is None) == (h.id not in dict(fts))
        assert h.score == h.rrf_score and -1.0 <= (h.vector_score or 0.0) <= 1.0


def test_rrf_fusion_stays_available(corpus_tenant, db, local_embedder):
    s = HybridSearcher(db, local_embedder, fusion="rrf", rrf_k=10)
    result = s.search(corpus_tenant, ["public", "staff"], "how long are backup copies kept?", k=5)
    s.close()
    vec = [e["id"] for e in result.trace["stages"]["vector"]]
    fts = [e["id"] for e in result.trace["stages"]["fts"]]
    assert result.trace["fusion"] == "rrf" and [(h.id, h.score) for h in result.hits] == rrf([vec, fts], k=10)[:5]


@pytest.mark.parametrize("kwargs", [{"fusion": "combsum"}, {"dense_weight": 1.5}, {"dense_weight": -0.1}])
def test_bad_fusion_settings_are_refused(db, local_embedder, kwargs):
    with pytest.raises(ValueError):
        HybridSearcher(db, local_embedder, **kwargs)


@pytest.mark.parametrize("mode, leg, other", [("dense", "vector", "fts"), ("bm25", "fts", "vector")])
def test_single_leg_modes_return_that_legs_order(corpus_tenant, searcher, mode, leg, other):
    result = searcher.search(corpus_tenant, ["public", "staff"], "status page error", k=3, mode=mode)
    assert other not in result.trace["stages"]
    assert [(h.id, h.score) for h in result.hits] == [(e["id"], e["score"]) for e in result.trace["stages"][leg][:3]]


class FixedReranker:
    """Scores the candidates in reverse RRF order (a real reranker would compute them)."""

    name = "fixed"

    def __init__(self, output=None, scores=None, delay=0.0):
        self.output, self.scores, self.delay = output, scores, delay

    def rerank(self, query, candidates, top_k):
        time.sleep(self.delay)
        if self.output is not None:
            return self.output
        n = len(candidates)
        return [(i, (self.scores or 1.0) * (i + 1) / n) for i in reversed(range(n))][:top_k]


class FailingReranker:
    name = "failing"

    def rerank(self, query, candidates, top_k):
        raise ConnectionError("reranker API returned 500")


def test_trace_has_every_stage_with_ranks(corpus_tenant, db, local_embedder):
    s = HybridSearcher(db, local_embedder, reranker=FixedReranker(), ef_search=64)
    result = s.search(corpus_tenant, ["public", "staff"], "How often does the status page refresh?", k=3, mode="hybrid+rerank")
    s.close()
    trace = result.trace
    assert set(trace["stages"]) == {"vector", "fts", "rrf", "rerank", "final"}
    for stage in trace["stages"].values():
        assert stage and [e["rank"] for e in stage] == list(range(1, len(stage) + 1))
        assert all(set(e) == {"id", "rank", "score"} for e in stage)
    assert {"embed", "vector", "fts", "fetch", "rerank", "total"} <= set(trace["timings_ms"])
    assert trace["ef_search"] == 64 and trace["query_lang"] == "english" and trace["tsquery"]
    assert trace["reranker"] == "fixed" and not result.degraded
    reversed_rrf = [c.id for c in reversed(result.candidates)][:3]
    assert [h.id for h in result.hits] == reversed_rrf and [e["id"] for e in trace["stages"]["final"]] == reversed_rrf


@pytest.mark.parametrize(
    "reranker, timeout",
    [
        (FailingReranker(), None),
        (FixedReranker(output=[(999, 1.0)]), None),  # index out of range (untrusted API output)
        (FixedReranker(output=[(-1, 1.0)]), None),
        (FixedReranker(output=[(0, 1.0), (0, 0.5)]), None),  # duplicate
        (FixedReranker(output=[(0, float("nan"))]), None),
        (FixedReranker(output=[("0", 1.0)]), None),
        (FixedReranker(output=42), None),  # not even a list
        (FixedReranker(delay=2.0), 0.2),  # slow
    ],
)
def test_failing_reranker_gives_rrf_order_flagged_degraded(corpus_tenant, db, local_embedder, reranker, timeout):
    s = HybridSearcher(db, local_embedder, reranker=reranker, rerank_timeout_s=timeout, rerank_threshold=0.99)
    query = "database backups"
    plain = s.search(corpus_tenant, ["public"], query, k=3, mode="hybrid")
    result = s.search(corpus_tenant, ["public"], query, k=3, mode="hybrid+rerank")
    s.close()
    assert result.degraded and reranker.name in result.degraded_reason
    assert [(h.id, h.score) for h in result.hits] == [(h.id, h.score) for h in plain.hits] and result.hits
    assert not plain.degraded


def test_threshold_that_removes_everything_gives_an_honest_empty_result(corpus_tenant, db, local_embedder):
    s = HybridSearcher(db, local_embedder, reranker=FixedReranker(scores=0.1), rerank_threshold=0.5)
    result = s.search(corpus_tenant, ["public"], "database backups", k=3, mode="hybrid+rerank")
    s.close()
    assert result.hits == [] and not result.degraded and result.candidates
    assert result.trace["stages"]["rerank"] and result.trace["stages"]["final"] == []


def test_hits_in_the_other_script_can_be_left_to_the_caller_below_the_threshold(corpus_tenant, db, local_embedder):
    # the offline answer judges pages in the other script itself (answers/other_language_gate.py): the
    # search keeps them below the cut, and still cuts the ones in the query's own script
    s = HybridSearcher(db, local_embedder, reranker=FixedReranker(scores=0.1), rerank_threshold=0.5)
    held = s.search(corpus_tenant, ["public", "staff", "hr"], "database backups", k=10, mode="hybrid+rerank")
    left = s.search(corpus_tenant, ["public", "staff", "hr"], "database backups", k=10, mode="hybrid+rerank",
                    hold_other_script=False)
    s.close()
    assert held.hits == [] and "other_script_below_threshold" not in held.trace
    assert left.hits and all(h.lang == "russian" for h in left.hits) and left.trace["other_script_below_threshold"]
    assert {c.id for c in left.candidates if c.lang == "russian"} >= {h.id for h in left.hits}


def test_a_page_in_the_other_script_passes_near_the_best_once_the_best_passed(corpus_tenant, db, local_embedder):
    # the threshold was calibrated on lists of one language (vector/search/rerank/cut.py)
    reranker = FixedReranker()
    reranker.other_script_share = OTHER_SCRIPT_SHARE  # as the offline reranker declares it
    s = HybridSearcher(db, local_embedder, reranker=reranker, rerank_threshold=0.95)
    result = s.search(corpus_tenant, ["public", "staff", "hr"], "database backups", k=50, mode="hybrid+rerank")
    s.close()
    scores = {e["id"]: e["score"] for e in result.trace["stages"]["rerank"]}
    best = max(scores.values())
    langs = {c.id: c.lang for c in result.candidates}
    assert best >= 0.95 and any(lang == "russian" for lang in langs.values())
    assert {h.id for h in result.hits} == {i for i, score in scores.items() if score >= 0.95 or (
        langs[i] == "russian" and score >= OTHER_SCRIPT_SHARE * best)}
    assert any(langs[h.id] == "russian" and h.score < 0.95 for h in result.hits)
    assert result.trace["other_script_share"] == OTHER_SCRIPT_SHARE
    # a reranker that declares no share (an API's cross-encoder) holds every page to the threshold
    s = HybridSearcher(db, local_embedder, reranker=FixedReranker(), rerank_threshold=0.95)
    held = s.search(corpus_tenant, ["public", "staff", "hr"], "database backups", k=50, mode="hybrid+rerank")
    s.close()
    assert held.hits and all(h.score >= 0.95 for h in held.hits) and held.trace["other_script_share"] is None


def test_without_reranker_hybrid_rerank_is_hybrid(corpus_tenant, searcher):
    a = searcher.search(corpus_tenant, ["public"], "database backups", k=3, mode="hybrid")
    b = searcher.search(corpus_tenant, ["public"], "database backups", k=3, mode="hybrid+rerank")
    assert [(h.id, h.score) for h in a.hits] == [(h.id, h.score) for h in b.hits] and not b.degraded


class BrokenEmbedder:
    def __init__(self, inner):
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def embed_query(self, text):
        raise TimeoutError("embedding API timed out")


def test_failed_vector_leg_degrades_hybrid_to_full_text(corpus_tenant, db, local_embedder):
    s = HybridSearcher(db, BrokenEmbedder(local_embedder))
    result = s.search(corpus_tenant, ["staff"], "ERR_2043", mode="hybrid")
    assert result.degraded and "vector leg failed" in result.degraded_reason
    assert result.hits[0].doc_id == "payments.md"
    with pytest.raises(TimeoutError):
        s.search(corpus_tenant, ["staff"], "ERR_2043", mode="dense")
    s.close()


def test_a_question_names_its_names_by_their_consonants():
    names = name_skeletons("How many beds does the Petrozavodsk branch have, says Маркусом? ERR_2043 The")
    # the word and its stem; not the first word, a code or a stop word
    assert names == {"ptrzvdsk": False, "mrks": True, "mrksm": True}
    # a question's first word is capitalised whatever it is: a name there only as a word the dictionary lacks
    assert name_skeletons("Office hours?") == {} and name_skeletons("Petrozavodsk?") == {"ptrzvdsk": False}
    # Russian "х" is "kh" in a Latin spelling of a Russian name and "h" in a Russian spelling of an English
    # one: both are read as an "h", which the skeleton drops
    assert name_skeletons("Where is the Arkhangelsk branch?") == {"rnglsk": False}
    assert skeleton("архангельск") == skeleton("Arkhangelsk") == "rnglsk"
    assert skeleton("Хан") == skeleton("Khan") == "n" and skeleton("Хастингс") == skeleton("Hastings") == "stngs"
    # a lower-case word the dictionary lacks, of four consonants or more: an adjective of a town
    assert name_skeletons("Сколько коек в петрозаводском филиале?") == {"ptrzvdsk": True, "ptrzvdskm": True}
    terms = build_query([("'petrozavodsk'", ["petrozavodsk"]), ("'bed'", ["bed"])], "english")
    spelled = {"ptrzvdsk": ["petrozavodsk", "петрозаводск", "петрозаводскi"]}
    found = with_spellings(terms, {"ptrzvdsk": False}, spelled)
    # the other script's spellings, as one more concept counted in Russian chunks only; the own word stays own
    assert found.senses[-1] == ("петрозаводск", "петрозаводскi") and "петрозаводск" in found.lexemes
    assert found.script_of("петрозаводск") is True and found.script_of("petrozavodsk") is None
    assert with_spellings(terms, {"ptrzvdsk": False}, {}) is terms
    many = {"ptrzvdsk": [f"петрозаводск{i:02d}" for i in range(20)]}
    assert len(with_spellings(terms, {"ptrzvdsk": False}, many).senses[-1]) == MAX_SPELLINGS


def test_the_servers_skeleton_of_a_lexeme_is_the_answers_skeleton(db):
    import random

    rng = random.Random(7)
    letters = "абвгдеёжзийклмнопрстуфхцчшщъыьэюяabcdefghijklmnopqrstuvwxyz0123456789-"
    words = ["петрозаводск", "ойеларан", "marcus", "щукин", "пхеньян", "chichester", "xerox", "ссср", "жёлтый", "",
             "arkhangelsk", "бакхаус", "kkhh", "khх"]
    words += ["".join(rng.choice(letters) for _ in range(rng.randint(1, 14))) for _ in range(400)]
    with db.connection() as conn:
        server = [r[0] for r in conn.execute("SELECT lexeme_skeleton(w) FROM unnest(%s::text[]) WITH ORDINALITY "
                                             "AS x(w, i) ORDER BY i", (words,)).fetchall()]
    assert server == [skeleton(w) for w in words]


NAMED = {
    "ru/petrozavodsk.md": "---\ntitle: Филиал\nacl: [public]\n---\nВ Петрозаводске филиал открыт с 2011 года.\n",
    "ru/other.md": "---\ntitle: Филиал\nacl: [public]\n---\nФилиал в Вологде открыт с 2015 года.\n",
    "ru/kondopoga.md": "---\ntitle: Закрытый филиал\nacl: [board]\n---\nВ Кондопоге филиал закрыт в 2020 году.\n",
}


def test_a_name_finds_its_page_in_the_other_script_and_names_nothing_unreadable(db, settings, local_embedder,
                                                                                tmp_path, searcher):
    tenant = ingest_corpus(db, settings, local_embedder, tmp_path, NAMED, "t_search_names")
    result = searcher.search(tenant, ["public"], "Since when is Petrozavodsk open?", mode="bm25")
    assert result.hits and result.hits[0].doc_id == "ru/petrozavodsk.md"
    assert result.trace["bm25"]["df"].get("петрозаводск") == 1
    # a name only a page the reader may not read holds brings nothing: not found, not named in the trace
    hidden = searcher.search(tenant, ["public"], "Since when is Kondopoga closed?", mode="bm25")
    assert all(h.doc_id != "ru/kondopoga.md" for h in hidden.hits)
    assert not any(x.startswith("кондопог") for x in hidden.trace["bm25"]["df"])
    seen = searcher.search(tenant, ["board"], "Since when is Kondopoga closed?", mode="bm25")
    assert seen.hits and seen.hits[0].doc_id == "ru/kondopoga.md"
