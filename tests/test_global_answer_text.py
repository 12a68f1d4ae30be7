"""A corpus-wide answer's own words (graph/query/answer_text.py) are in the question's language. Pure."""
from __future__ import annotations

from graph.levels import AccessLevel
from graph.query.answer_text import _TEXTS, say
from graph.query.global_search import global_search
from graph.types import ScopePassage
from answers.themes.answer import themes_in_scope

LEVEL = AccessLevel("staff", ("staff",), 2)
REPORTS = [{"id": 10, "parent": None, "title": "Алерты", "summary": "Порог алерта.", "rating": 5.0, "findings": [],
            "source_chunk_ids": [1, 2], "embedding": None}]
PASSAGES = [ScopePassage(1, "reviews/a.md", "Разбор A", "Устаревший порог алерта скрыл сбой на несколько часов."),
            ScopePassage(2, "reviews/b.md", "Разбор B", "Устаревший порог алерта снова промолчал ночью.")]


def test_every_text_is_written_in_both_languages():
    assert all(set(texts) == {"english", "russian"} and all(texts.values()) for texts in _TEXTS.values())


def test_a_russian_question_gets_russian_words_around_its_themes_and_any_other_english():
    russian = global_search([LEVEL], {"staff"}, lambda name: REPORTS, "Какие темы повторяются в разборах?", None,
                            load_scope=lambda level: (PASSAGES, {1: 0.9, 2: 0.8}), scope_themes=themes_in_scope)
    assert russian.themes and russian.answer.startswith(say("scope_header", "Какие темы?"))
    assert russian.answer.startswith("Офлайн-ответ")
    english = global_search([LEVEL], {"staff"}, lambda name: REPORTS, "What recurs across the reviews?", None,
                            load_scope=lambda level: (PASSAGES, {1: 0.9, 2: 0.8}), scope_themes=themes_in_scope)
    assert english.answer.startswith("Offline answer")
    german = global_search([LEVEL], {"staff"}, lambda name: REPORTS, "Welche Themen wiederholen sich?", None)
    assert german.answer == "No community report in the corpus addresses this question."  # English, not Russian


def test_a_user_of_no_level_is_told_so_in_the_questions_language_and_what_to_do():
    refused = global_search([LEVEL], {"nobody"}, lambda name: REPORTS, "Какие риски упоминаются везде?", None)
    assert refused.level is None and refused.answer.startswith("Для ваших групп доступа нет графа")
    assert "crossroads graph build" in refused.answer
