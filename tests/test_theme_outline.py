"""The sections documents of one kind share (answers/themes/outline.py), shown after the themes of a
corpus-wide answer (graph/query/global_search.py). Pure: invented passages and reports, no database."""
from __future__ import annotations

import time

from graph.levels import AccessLevel
from graph.query.global_search import global_search
from answers.themes.outline import section_names, shared_sections
from graph.types import ScopePassage
from answers.themes.answer import themes_in_scope
from answers.themes.text import field_label


def page(id_, doc, heading, content, title="Page"):
    return ScopePassage(id_, doc, title, content, heading)


SERVICES = [
    page(1, "services/a.md", "Alpha", "- **Owner:** Billing team\n- **Tier:** 1\n\nAlpha charges cards and "
         "retries failed charges twice."),
    page(2, "services/a.md", "Alpha > Error codes", "- `ERR_1` — the acquirer timed out; retried twice."),
    page(3, "services/a.md", "Alpha > Configuration", "The configuration lives in the config repository."),
    page(4, "services/b.md", "Beta", "- **Owner:** Routing team\n\nBeta plans routes for the couriers every night."),
    page(5, "services/b.md", "Beta > Errors", "- `ERR_2` — no route was found for the stop list."),
    page(6, "services/b.md", "Beta > Rate limits", "Beta accepts ten plans a second per tenant."),
    page(7, "services/c.md", "Гамма", "- **Владелец:** команда Платформы\n\nГамма рассылает уведомления клиентам."),
    page(8, "services/c.md", "Гамма > Коды ошибок", "- `ERR_3` — поставщик SMS не ответил."),
    page(9, "services/c.md", "Гамма > Client-side rate limits", "Гамма отправляет не больше 50 SMS в секунду."),
    page(10, "guides/style.md", "Style guide > Error codes", "Write error codes in capitals."),
]
KIND = {"services/a.md", "services/b.md", "services/c.md"}


def test_a_section_is_a_heading_under_the_title_or_a_record_fields_label():
    # the title's own heading is the document
    assert section_names(SERVICES[:3]) == [("Owner", 1), ("Tier", 1), ("Error codes", 2), ("Configuration", 3)]
    # a label a document writes again and again opens a transcript's turns: no field
    transcript = [page(50 + i, "talks/a.md", "Talk", "KEVIN SCOTT: Yeah.\n\nGUEST: Right.\n\n- **Date:** May")
                  for i in range(2)] + [page(52, "talks/a.md", "Talk", "KEVIN SCOTT: Indeed.")]
    assert section_names(transcript) == [("GUEST", 50), ("Date", 50), ("GUEST", 51), ("Date", 51)]
    assert field_label("- **Team lead:** Marcus Oyelaran") == "Team lead"
    assert field_label("- **Руководитель команды:** Дмитрий Соколов") == "Руководитель команды"
    # a dash joins a name to its gloss; a time is no label; a sentence with a colon is prose
    assert field_label("Tamsin Hale — Head of Customer Support") == ""
    assert field_label("11:40 — the Austin support team noticed a cluster of tickets") == ""
    assert field_label("Note: the connector retries every failed booking with backoff until it succeeds.") == ""


def test_the_sections_most_of_the_kinds_documents_have_come_first():
    sections = shared_sections(SERVICES, KIND, asked_cyrillic=False)
    # "Error codes" narrows "Errors", "Client-side rate limits" narrows "Rate limits": one section each,
    # named by the general name; nothing is translated: "Коды ошибок" is the Russian page's own; the
    # style guide is no service page
    assert [(s.name, len(s.documents)) for s in sections] == [("Owner", 2), ("Errors", 2), ("Rate limits", 2)]
    assert sections[1].documents == ("services/a.md", "services/b.md") and sections[1].chunk_ids == (2, 5)
    assert shared_sections(SERVICES, KIND, asked_cyrillic=False) == sections  # deterministic
    # one shared section is a coincidence, not a template; one document has none to share
    assert shared_sections(SERVICES[:3] + SERVICES[6:8], {"services/a.md", "services/c.md"}, False) == []
    assert shared_sections(SERVICES, {"services/a.md"}, False) == []
    assert shared_sections([], KIND, False) == []


def test_the_outline_follows_the_themes_in_the_questions_language():
    reviews = [page(20 + i, f"services/{i}.md", f"S{i} > Error codes" if i < 3 else f"S{i} > Configuration",
                    f"The connector retried the failed booking and the queue of bookings grew again ({i}).")
               for i in range(5)] + [page(30 + i, f"services/{i}.md", f"S{i} > Configuration",
                                          "Every value lives in the config repository.") for i in range(3)]
    others = [ScopePassage(40 + i, f"notes/{i}.md", "Note", "The team agreed on the roadmap.") for i in range(4)]
    passages = reviews + others
    reports = [{"id": 1, "parent": None, "title": "Bookings", "summary": "Bookings.", "rating": 5.0, "findings": [],
                "source_chunk_ids": [p.id for p in passages], "embedding": None}]
    similarities = {p.id: (0.9 if p.doc_id.startswith("services/") else 0.1) for p in passages}
    level = AccessLevel("staff", ("staff",), 6)
    result = global_search([level], {"staff"}, lambda name: reports, "What do all service pages cover?", None,
                           load_scope=lambda lvl: (passages, similarities), scope_themes=themes_in_scope)
    assert result.themes[-1].label == "sections these documents share", [t.label for t in result.themes]
    assert result.themes[-1].summary == "Configuration (5 of 5); Error codes (3 of 5)"
    assert result.answer.splitlines()[-1].startswith("- sections these documents share: Configuration (5 of 5)")
    russian = global_search([level], {"staff"}, lambda name: reports, "Что есть на всех страницах сервисов?", None,
                            load_scope=lambda lvl: (passages, similarities), scope_themes=themes_in_scope)
    assert russian.themes[-1].summary == "Configuration (5 из 5); Error codes (3 из 5)"


def test_hostile_headings_and_fields_read_quickly():
    huge = [page(1, "k/a.md", "A" + " > x" * 20_000, "- **" + "y" * 100_000 + ":** z"),
            page(2, "k/b.md", " > " * 10_000, ":" * 50_000),
            page(3, "k/c.md", "\ufdfa > \u0000 > 🙂", "- **\u200b:** \ufdfa" * 1_000)]
    started = time.perf_counter()
    assert shared_sections(huge, {"k/a.md", "k/b.md", "k/c.md"}, False) == []
    assert time.perf_counter() - started < 5.0
