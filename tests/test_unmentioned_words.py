"""A question whose content words the reader's documents never use gets the no-answer naming them
(router/service.py `_unmentioned_words`, vector/search/unmentioned.py): at least two such words, the
answer in the question's language, misspellings counted as mentioned, ACL in SQL."""
from __future__ import annotations

import pytest

from core.text.terms import content_words
from vector.search.unmentioned import one_edit_apart


@pytest.fixture(scope="module")
def offline(db, settings, local_embedder):
    from router.service import QuestionRouter

    # off by default (core/settings.py); the relation judge, which runs first and withholds the espresso question
    # on its own, off: these tests are of the words check
    checked = settings.model_copy(update={"answer_unmentioned_words": 2, "answer_relation_judge": False})
    with QuestionRouter(db, checked, embedder=local_embedder, use_llm=False) as router:
        yield router


def test_content_words_are_letters_only_and_skip_closed_class_words_codes_and_numerals():
    assert content_words("What was the profession of Amy Johnson, whom's life was in Henry VIII's court?") == (
        "profession", "Amy", "Johnson", "life", "Henry", "court")
    assert content_words("Что означает ошибка ERR_3310 после SEV1 on-call?") == ("означает", "ошибка", "call")
    assert content_words("") == () and content_words("\u200b\x00 ??? 123") == ()


@pytest.mark.parametrize("a, b, near", [
    ("brittish", "british", True), ("sponser", "sponsor", True), ("offic", "offfic", True),
    ("berlin", "berlin", False), ("berlin", "brelin", False), ("abc", "abcde", False), ("", "a", True),
])
def test_one_edit_apart(a, b, near):
    assert one_edit_apart(a, b) is near and one_edit_apart(b, a) is near


def test_two_words_no_readable_document_uses_withhold_the_answer_and_are_named(offline, demo_tenant):
    answer = offline.ask(demo_tenant, ["public", "staff"], "What brand of espresso machine stands in the Berlin office?",
                         route="local")
    assert answer.no_answer and answer.trace["unmentioned"] == ["brand", "espresso", "machine", "stands"]
    assert "No document you can read mentions: brand, espresso, machine, stands." in answer.answer
    assert answer.trace["withheld"] and answer.citations  # what it would have said, and where it looked


def test_one_missing_word_or_a_misspelling_still_answers(offline, demo_tenant):
    # "mean" is in no document, but one word is no topic; "Conector" is one edit from "connector"
    answer = offline.ask(demo_tenant, ["public", "staff"], "What does error ERR_2043 mean in the Carrier Conector?",
                         route="local")
    assert not answer.no_answer and "rate limit" in answer.answer and "unmentioned" not in answer.trace
    assert offline.searcher.unmentioned(demo_tenant, ["public", "staff"], ["Conector", "Carrrier", "espresso"],
                                        misspellings=True) == ("espresso",)
    assert offline.searcher.unmentioned(demo_tenant, ["public", "staff"], ["Conector"]) == ("Conector",)  # codes: exact


def test_words_only_documents_the_reader_may_not_read_use_are_unmentioned_for_that_reader(offline, demo_tenant):
    words = ["forecast", "expenditure", "office"]
    assert offline.searcher.unmentioned(demo_tenant, ["public", "staff"], words, misspellings=True) == (
        "forecast", "expenditure")
    assert offline.searcher.unmentioned(demo_tenant, ["public", "staff", "finance", "hr"], words,
                                        misspellings=True) == ()


def test_the_setting_at_zero_turns_the_check_off(offline, demo_tenant, monkeypatch):
    monkeypatch.setattr(offline.writer, "unmentioned_words", 0)
    answer = offline.ask(demo_tenant, ["public", "staff"], "What brand of espresso machine stands in the Berlin office?",
                         route="local")
    assert "unmentioned" not in answer.trace


def test_a_failed_word_check_answers_degraded(offline, demo_tenant, monkeypatch):
    import psycopg

    real = offline.searcher.unmentioned

    def lost_for_words(tenant, groups, items, *, misspellings=False, spellings=False):
        if misspellings and not spellings:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(tenant, groups, items, misspellings=misspellings, spellings=spellings)

    monkeypatch.setattr(offline.searcher, "unmentioned", lost_for_words)
    answer = offline.ask(demo_tenant, ["public", "staff"], "What brand of espresso machine stands in the Berlin office?",
                         route="local")
    assert not answer.no_answer and answer.degraded
    assert any("words no readable document mentions failed" in e for e in answer.errors)


def test_multi_hop_answers_are_not_checked(offline, demo_tenant, monkeypatch):
    checked = []
    real = offline.searcher.unmentioned

    def spy(tenant, groups, items, *, misspellings=False, spellings=False):
        checked.append(misspellings and not spellings)  # the content words' check, not the names'
        return real(tenant, groups, items, misspellings=misspellings, spellings=spellings)

    monkeypatch.setattr(offline.searcher, "unmentioned", spy)
    offline.ask(demo_tenant, ["public", "staff"], "Who leads the team that owns the Notification Service, and in which "
                "office does that person work?", route="multihop")
    assert True not in checked
