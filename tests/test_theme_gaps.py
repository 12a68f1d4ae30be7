"""What documents say was missing (answers/themes/gaps.py) and the theme it makes among the scoped themes
(answers/themes/scoped.py). Pure: invented passages, no database."""
from __future__ import annotations

import time

import pytest

from answers.themes.gaps import GAP_TERM, gaps, missing_things
from graph.query.global_search import stems
from graph.types import ScopePassage
from answers.themes.answer import themes_in_scope
from answers.themes.text import level_text
from answers.themes.scoped import scoped_themes


@pytest.mark.parametrize("sentence, missing", [
    ("No runbook. There was no runbook for a vendor outage.", ["runbook", "runbook"]),
    ("No client-side rate limit: the connector had no limit of its own.", ["client-side rate limit", "limit"]),
    ("A missing runbook slowed the response.", ["runbook"]),  # the verb ends the thing's name
    ("Lack of load testing before the release.", ["load testing"]),
    ("Нет описанной процедуры отката (runbook) для решателя.", ["описанной процедуры отката (runbook)"]),
    ("Отсутствие нагрузочного тестирования перед выкладкой.", ["нагрузочного тестирования"]),
    ("У Webhook Relay не было лимита на клиента.", ["лимита"]),
    # a denied event, an idiom of what cannot be done, a manner, a name or a code is no missing thing
    ("No data was lost.", []),
    ("Tell your lead in the morning; no approval is needed.", []),
    ("With only one acquirer there was no way to route around it.", []),
    ("A carrier changed a limit without notice.", []),
    ("There is no GeoMesh fallback and no `ERR_1107` alert.", []),
    ("Nobody noticed; it is not known.", []),
    ("In 2011 he was no longer with Sony, and the sanctions were to no avail.", []),
    ("Многие классы подозреваются как неравные, но это не было доказано.", []),
    ("", []),
])
def test_an_absence_states_the_missing_thing(sentence, missing):
    assert [g.text for g in gaps(sentence)] == missing


def test_a_missing_thing_told_in_two_languages_is_one_by_its_borrowed_word():
    told = [("No client-side rate limit.", "r/a.md"), ("Нет лимита на отправку SMS.", "r/b.md"),
            ("Нет лимитов и изоляции.", "r/c.md"), ("No runbook.", "r/a.md"),
            ("Нет описанной процедуры отката (runbook).", "r/d.md"), ("No load test.", "r/e.md")]
    told = [(tuple(gaps(sentence)), doc) for sentence, doc in told]
    english = missing_things(told, asked_cyrillic=False)
    # the limit is missed by three documents, the runbook by two, the load test by one
    assert english.label == "no client-side rate limit, runbook, load test"
    assert "limit" in english.first
    russian = missing_things(told, asked_cyrillic=True)
    assert russian.label == "нет лимита, описанной процедуры отката (runbook), load test"
    assert missing_things([], False).label == "no " and not missing_things([], False).first


REVIEWS = [
    ScopePassage(1, "reviews/a.md", "Review A", "No runbook existed for the failover. The cache was cold after the deploy."),
    ScopePassage(2, "reviews/b.md", "Review B", "There was no runbook for a vendor outage. The deploy went out on Friday."),
    ScopePassage(3, "reviews/c.md", "Разбор C", "Нет описанной процедуры отката (runbook) для решателя. Отсутствие "
                 "нагрузочного тестирования перед выкладкой."),
    ScopePassage(4, "reviews/d.md", "Review D", "There was no load test before the release. The cache was cold again."),
    ScopePassage(5, "guides/deploys.md", "Deploy guide", "No production deploys on Fridays, ever."),
    ScopePassage(6, "guides/style.md", "Style guide", "Write short sentences and name the owner of every page."),
    ScopePassage(7, "guides/travel.md", "Travel guide", "Book trains for trips under four hours."),
] + [ScopePassage(10 + i, f"notes/{i}.md", f"Note {i}", f"Meeting note {i}: the team discussed the roadmap and "
                  "agreed on the next steps.") for i in range(6)]  # what the reviews say is key against


def test_what_the_reviews_say_was_missing_is_a_theme_named_by_the_things_most_of_them_miss():
    assert GAP_TERM in level_text(REVIEWS).terms[0]
    scope = {p.doc_id for p in REVIEWS if p.doc_id.startswith("reviews/")} | {"guides/deploys.md"}
    themes = scoped_themes(set(stems("What are the main risks across all reviews?")), REVIEWS, scope, {}, 6)
    gap = [t for t in themes if t.label.startswith("no ")]
    assert len(gap) == 1, [t.label for t in themes]
    # the runbook three reviews miss comes first; the guide's rule ("no production deploys") is no finding
    # nothing is translated: the Russian review's load testing and the English one's stay two things
    assert gap[0].label == "no runbook, нагрузочного тестирования, load test", gap[0].label
    assert gap[0].summary in {"No runbook existed for the failover.", "There was no runbook for a vendor outage."}
    assert not any(t.label == "runbook" for t in themes)  # told by the gaps, not a theme again
    russian = scoped_themes(set(stems("Какие риски повторяются во всех разборах?")), REVIEWS, scope, {}, 6)
    assert [t.label for t in russian if t.label.startswith("нет ")] == [
        "нет описанной процедуры отката (runbook), нагрузочного тестирования, load test"]


def _fastest_of_three(sentence: str) -> float:
    """This thread's CPU seconds (not the wall clock, which a test worker beside it stretches at random)."""
    times = []
    for _ in range(3):
        started = time.thread_time()
        gaps(sentence)
        times.append(time.thread_time() - started)
    return min(times)


@pytest.mark.parametrize("hostile", [
    lambda n: "no " * 12_500 * n,
    lambda n: "нет " * 12_500 * n + "лимита",
    lambda n: "no a-" * 5_000 * n,
    lambda n: "(" * 2_500 * n + "no x (" * 1_250 * n,
], ids=["no", "нет", "no a-", "brackets"])
def test_hostile_absences_read_in_linear_time(hostile):
    # Four times the text must take about four times the CPU time, not sixteen (backtracking): a ratio of CPU
    # times, so the bound holds on a slow or shared machine as on a fast one (a fixed 2 s of wall clock did not).
    assert _fastest_of_three(hostile(4)) < 8 * max(_fastest_of_three(hostile(1)), 1e-3)


def test_a_hostile_level_answers_with_gaps_and_sections_in_bounded_time():
    from graph.levels import AccessLevel
    from graph.query.global_search import global_search
    hostile = [ScopePassage(100 + i, f"reviews/h{i}.md", "Review \ufdfa" * 50, text, heading)
               for i, (text, heading) in enumerate([
                   ("No " * 20_000 + "runbook.", "R > " * 5_000),
                   ("Нет " + "лимита " * 10_000 + "(" * 500, " > \u0000 > \ud7ff"),
                   ("- **\u200b" * 2_000 + ":** no runbook", "R > No runbook"),
                   ("There was no runbook (" + "x" * 60 + ") and no " + "\U0001F642" * 1_000, ""),
               ])]
    passages = REVIEWS + hostile
    reports = [{"id": 1, "parent": None, "title": "All", "summary": "All.", "rating": 5.0, "findings": [],
                "source_chunk_ids": [p.id for p in passages], "embedding": None}]
    started = time.perf_counter()
    result = global_search([AccessLevel("staff", ("staff",), 6)], {"staff"}, lambda name: reports,
                           "What are the main risks across all reviews?", None,
                           load_scope=lambda lvl: (passages, {p.id: 0.5 for p in passages}), scope_themes=themes_in_scope)
    assert result.answer and time.perf_counter() - started < 20.0
