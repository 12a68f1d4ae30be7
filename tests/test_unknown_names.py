"""A question naming something no readable document spells gets the no-answer naming it (answers/writer.py,
vector/search/unmentioned.py `check_names`): names in either script, misspelt or translated count as
spelt; a word only documents the reader may not read use is unknown to that reader (ACL in SQL)."""
from __future__ import annotations

import pytest

from answers.question import Question
from core.text.skeletons import skeleton
from vector.search.unmentioned import _near_skeletons, _spellings

EVERYONE = ["public", "staff"]


@pytest.fixture(scope="module")
def offline(db, settings, local_embedder):
    from router.service import QuestionRouter

    with QuestionRouter(db, settings, embedder=local_embedder, use_llm=False) as router:
        yield router


@pytest.mark.parametrize("question, names", [
    ("Who is Elena Smirnova's manager at the Dock Scheduler team?",
     {"Elena Smirnova": ("Elena", "Smirnova"), "Dock Scheduler": ("Dock", "Scheduler")}),
    # the first word of a sentence is capitalised whatever it is
    ("Сколько стран находится в бассейне Амазонки?", {"Амазонки": ("Амазонки",)}),
    ("Anna Kirillova's team owns a service. Roughly how much does it cost?", {"Anna Kirillova": ("Kirillova",)}),
    ("Чьё имя носит премия?", {}),
    # abbreviations are translated, not spelt; Roman numerals and codes are no name's words
    ("Как звали лидера, которому Генрихом III пожаловал дворянство?", {"Генрихом III": ("Генрихом",)}),
    ("Сколько узлов в GPU-разделе кластера и где стоит ИБП?", {}),
    ("What does ERR_5120 mean?", {}),
    # a hyphen parts a name's words
    ("Какую сумму вносит совет О-де-Франс?", {"О-де-Франс": ("Франс",)}),
    ("", {}), ("\u200b\x00 ??? 123", {}),
])
def test_the_words_that_make_a_name_one_thing(question, names):
    assert Question(question).name_words == names


@pytest.mark.parametrize("word, stems, other", [
    ("Koltsevaya", ["koltsevaya"], "Кольцевая"),  # ц is "ts"
    ("Кольцевая", ["кольцев"], "Koltsevaya"),
    ("Заандамском", ["заандамск"], "Zaandam"),  # an adjective made of a name
    ("Марлоу", ["марлоу"], "Marlow"),  # one consonant more in one script
    ("Smirnova", ["smirnova"], "Смирновой"),
])
def test_a_name_and_its_spelling_in_the_other_script_meet(word, stems, other):
    near = {n for form in _spellings(word, stems) if len(sk := skeleton(form)) >= 3 for n in _near_skeletons(sk)}
    assert skeleton(other) in near


def test_a_short_skeleton_stays_close():
    assert "mrlv" in _near_skeletons("mrl")
    assert not {"krl", "rl"} & _near_skeletons("mrl")  # one replaced or left out of three is another word
    assert "lsbm" in _near_skeletons("lsbn") and "lsn" not in _near_skeletons("lsbn")
    assert "smrnv" in _near_skeletons("smrnvm")


def test_a_name_no_readable_document_spells_withholds_the_answer_and_is_named(offline, demo_tenant):
    answer = offline.ask(demo_tenant, EVERYONE, "Who is the site lead of the Lisbon office?", route="local")
    assert answer.no_answer and answer.trace["unmentioned"] == ["Lisbon"]
    assert "No document you can read mentions: Lisbon." in answer.answer and answer.citations
    answer = offline.ask(demo_tenant, EVERYONE, "Кто руководит командой Елены Смирновой?", route="multihop")
    assert answer.no_answer and answer.trace["unmentioned"] == ["Елены Смирновой"]


def test_names_spelt_in_the_other_script_misspelt_or_translated_are_known(offline, demo_tenant):
    # the demo corpus spells these in Russian only ("Анна Кириллова", "Екатеринбург", "Москва")
    for question in ("Which team does Anna Kirillova lead?", "When did the Yekaterinburg office open?",
                     "Who is the site lead of the Moskow office?", "Which team does Anna Kirilova lead?"):
        answer = offline.ask(demo_tenant, EVERYONE, question, route="local")
        assert "unmentioned" not in answer.trace, question


def test_a_name_only_documents_the_reader_may_not_read_spell_is_unknown_to_that_reader(offline, demo_tenant):
    assert offline.searcher.unmentioned(demo_tenant, EVERYONE, ["Sandpiper", "Kirillova"], misspellings=True,
                                        spellings=True) == ("Sandpiper",)
    assert offline.searcher.unmentioned(demo_tenant, EVERYONE + ["hr"], ["Sandpiper"], misspellings=True,
                                        spellings=True) == ()
    assert offline.searcher.unmentioned(demo_tenant, [], ["Kirillova"], spellings=True) == ("Kirillova",)


def test_a_failed_name_check_answers_degraded(offline, demo_tenant, monkeypatch):
    import psycopg

    real = offline.searcher.unmentioned

    def lost_for_names(tenant, groups, items, *, misspellings=False, spellings=False):
        if spellings:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(tenant, groups, items, misspellings=misspellings)

    monkeypatch.setattr(offline.searcher, "unmentioned", lost_for_names)
    answer = offline.ask(demo_tenant, EVERYONE, "When did the Berlin office open?", route="local")
    assert not answer.no_answer and answer.degraded
    assert any("names no readable document mentions failed" in e for e in answer.errors)


def test_the_setting_off_answers_from_the_closest_passages(offline, demo_tenant, monkeypatch):
    monkeypatch.setattr(offline.writer, "unknown_names", False)
    answer = offline.ask(demo_tenant, EVERYONE, "Who is the site lead of the Lisbon office?", route="local")
    assert "unmentioned" not in answer.trace


def test_a_flood_of_names_claims_no_more_than_the_words_it_checked(offline, demo_tenant):
    from vector.search.unmentioned import MAX_CHECKED_CODES

    question = "Who are " + ", ".join(f"Zqxwv{chr(0x430 + i % 32)}lk Фываолд{chr(0x61 + i % 26)}" for i in range(400)) + "?"
    answer = offline.ask(demo_tenant, EVERYONE, question, route="local")
    assert answer.no_answer and 0 < len(answer.trace["unmentioned"]) <= MAX_CHECKED_CODES


def test_an_inflected_name_reaches_the_lexeme_its_stemmer_cut_shorter():
    from vector.search.unmentioned import _stem_prefixes

    assert "медарх" in _stem_prefixes("МедАрхива")  # the stemmer: МедАрхив -> медарх, МедАрхива -> медархив
    assert _stem_prefixes("Lisbon") == {"lisbo"} and _stem_prefixes("Oslo") == set()


def test_an_offline_global_question_about_an_unknown_name_is_the_no_answer_naming_it(offline, demo_tenant):
    answer = offline.ask(demo_tenant, EVERYONE, "What are the main themes in the documents about Elena Smirnova?",
                         route="global")
    assert answer.no_answer and answer.citations == [] and answer.trace["unmentioned"] == ["Elena Smirnova"]
    assert answer.answer.endswith("No document you can read mentions: Elena Smirnova.")
    themed = offline.ask(demo_tenant, EVERYONE, "What are the main themes in the incident reviews of Larkspur?",
                         route="global")
    assert not themed.no_answer and themed.citations


def test_a_failed_name_check_on_the_global_route_degrades_its_answer(offline, demo_tenant, monkeypatch):
    import psycopg

    def lost(tenant, groups, items, *, misspellings=False, spellings=False):
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(offline.searcher, "unmentioned", lost)
    answer = offline.ask(demo_tenant, EVERYONE, "What are the main themes in the incident reviews of Larkspur?",
                         route="global")
    assert not answer.no_answer and answer.degraded
    assert any("names no readable document mentions failed" in e for e in answer.errors)
