"""The calibrated cut across scripts (vector/search/rerank/cut.py) and where POST /v1/search applies it."""
from __future__ import annotations

from api import usecases
from vector.search.hybrid import Candidate, SearchResult
from vector.search.rerank.cut import OTHER_SCRIPT_SHARE, foreign_phrases, passing, quotes_any
from vector.search.rerank.offline import OfflineReranker


SHARE = OTHER_SCRIPT_SHARE


def test_a_page_in_the_question_s_script_is_held_to_the_threshold_alone():
    assert passing([0.9, 0.4, 0.2], [False, False, False], 0.3, SHARE) == [True, True, False]


def test_a_page_in_the_other_script_passes_near_the_best_once_the_best_passed():
    near, far = 0.9 * OTHER_SCRIPT_SHARE, 0.9 * OTHER_SCRIPT_SHARE * 0.99
    assert passing([0.9, 0.2, near, far], [False, True, True, True], 0.3, SHARE) == [True, True, True, False]
    # the best passage may itself be in the other script: it passes on the threshold as any page does
    assert passing([0.5, 0.06], [True, True], 0.3, SHARE) == [True, True]


def test_a_list_whose_best_fails_the_threshold_stays_empty_in_either_script():
    # a question the corpus knows nothing about comes back with nothing, whatever script its pages are in
    assert passing([0.25, 0.2, 0.1], [True, True, False], 0.3, SHARE) == [False, False, False]
    assert passing([], [], 0.3, SHARE) == []


def test_a_reranker_that_declares_no_share_holds_every_page_to_the_threshold():
    # an API's cross-encoder reads both languages itself
    assert passing([0.9, 0.2], [False, True], 0.3) == [True, False]
    assert OfflineReranker().other_script_share == SHARE


def test_a_page_quoting_a_name_the_question_writes_in_the_other_script_passes_below_the_threshold():
    # "Кто написал Liber servitoris?": the dictionary cannot read the name, so the reranker scores the page
    # that quotes it no better than any other; quoting it word for word, the page is about it
    phrases = foreign_phrases("Кто написал Liber servitoris?")
    assert phrases == ["liber servitoris"]
    quoted = [quotes_any(t, phrases) for t in ("Глава Liber  servitoris из его книги.", "Другая глава.")]
    assert passing([0.07, 0.05], [False, False], 0.17, SHARE, quoted) == [True, False]


def test_a_foreign_name_is_two_words_or_more_opening_capitalised_past_the_first_word():
    assert foreign_phrases("Сколько стоит Payments Gateway, Webhook Relay?") == ["payments gateway", "webhook relay"]
    assert foreign_phrases("Через какой спутник вещал Sky Digital в 1998 году?") == ["sky digital"]
    # one word may be any acronym or common loan ("SLA", "ABC"); a question's opening words are no name
    assert foreign_phrases("Кого Нобл сделал президентом ABC?") == []
    assert foreign_phrases("Who leads the Команда Платформы team?") == []
    assert foreign_phrases("What does ERR_2043 mean?") == []


def test_no_threshold_passes_everything():
    assert passing([0.01, -3.0], [False, True], None, SHARE) == [True, True]


class TwoScriptSearcher:
    """Reranked: an English page at 0.9, Russian pages at 0.2 and 0.05, an English one at 0.1; threshold 0.3;
    a reranker that declares the offline share."""

    def __init__(self, best: float = 0.9):
        self.best = best

    def search(self, tenant, groups, query, k=10, mode="hybrid+rerank"):
        langs = ["english", "russian", "russian", "english"]
        scores = [self.best, 0.2, 0.05, 0.1]
        candidates = [Candidate(id=i + 1, doc_id=f"d{i + 1}", title="", heading="", text="t", lang=lang)
                      for i, lang in enumerate(langs)]
        stage = [{"id": c.id, "rank": r, "score": s} for r, (c, s) in enumerate(zip(candidates, scores), start=1)]
        return SearchResult([], candidates, trace={"stages": {"rerank": stage}, "rerank_threshold": 0.3,
                                                   "other_script_share": SHARE})


def test_the_api_keeps_the_other_script_s_page_that_the_calibrated_cut_would_drop():
    out = usecases.search(TwoScriptSearcher(), "t", ["g"], "When did the Yekaterinburg office open?", 10)
    assert [h["id"] for h in out.hits] == [1, 2]  # the Russian page at 0.2 >= 0.09; 0.05 and the English 0.1 cut
    assert out.threshold["cut"] == 2 and out.threshold["cut_at_rank"] == 3 and out.threshold["other_script_kept"] == 1
    # nothing passes when the best does not: an empty answer stays empty
    assert usecases.search(TwoScriptSearcher(best=0.25), "t", ["g"], "When did the office open?", 10).hits == []


def test_a_threshold_the_request_sets_is_applied_as_it_is():
    out = usecases.search(TwoScriptSearcher(), "t", ["g"], "When did the Yekaterinburg office open?", 10,
                          min_score=0.3)
    assert [h["id"] for h in out.hits] == [1] and out.threshold["source"] == "request"
    assert out.threshold["other_script_kept"] == 0
