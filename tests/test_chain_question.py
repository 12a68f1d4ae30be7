"""How a multi-hop question reads (answers/chain/question.py, answers/question_text.py): its names, the
fewest hops its form allows, and a clause that describes an entity split off as a question of its own.
Pure, no database."""
from __future__ import annotations

import pytest

from answers.chain.question import least_hops, nested_question
from answers.question import Question
from answers.question_text import question_mentions


@pytest.mark.parametrize("question, names", [
    ("What went wrong in the November 2024 Quayside Freight incident?", ["Quayside Freight"]),
    ("What happened on 9 April 2031 at Quayside Freight?", ["Quayside Freight"]),
    ("Who founded Quayside Freight in March?", ["Quayside Freight", "March"]),  # a month alone may be a name
])
def test_a_month_with_a_day_or_a_year_beside_it_is_a_date_not_part_of_a_name(question, names):
    assert [m.text for m in question_mentions(question)] == names


@pytest.mark.parametrize("question, hops", [
    ("The engineer who commanded the Quayside Freight incident is based in which office?", 2),
    ("In which office does the lead of the team that owns the Booking Hub work?", 3),
    ("In which office does that person work?", 1),  # a two-part question's second part
    # two clauses joined by "and" describe one singer; "who's" is one relative word
    ("When was the singer born who is known for her husky voice and who's third album is Harbour Lights?", 2),
    ("Кто руководит командой, которая владеет сервисом и которая работает в Лиссабоне?", 2),
    ("Who was in charge of the country Quayside Freight is based in?", 2),  # a clause with no relative word
    # a passive participle after a noun opens a clause; "who" asked in place at the end opens none
    ("Quayside Freight runs on a network founded by whom?", 2),
    ("Who directed the film written by Ines Moreau?", 2),
    ("Who was the film directed by?", 1),  # the question's own verb
])
def test_the_fewest_hops_count_only_the_clauses_that_lead_to_a_new_entity(question, hops):
    assert least_hops(question) == hops


@pytest.mark.parametrize("question, inner, outer", [
    # the clause's noun is the subject of a statement-shaped question: up to the verb before the asked word
    ("The engineer who commanded the Quayside Freight incident is based in which office?",
     "Who commanded the Quayside Freight incident?", "{} is based in which office?"),
    # inside an "of" phrase after the question's verb: to the end
    ("What is the native language of the person who founded Quayside Freight?",
     "Who founded Quayside Freight?", "What is the native language of {}?"),
    # inside the subject that "does" asks about: the question's own verb comes last
    ("In which office does the lead of the team that owns the Booking Hub work?",
     "Which team owns the Booking Hub?", "In which office does the lead of {} work?"),
    # after a preposition of the question's verb: to the end
    ("What daily allowance does an engineer get on a trip to the city where Quayside Freight was founded?",
     "In which city Quayside Freight was founded?", "What daily allowance does an engineer get on a trip to {}?"),
    # a place's kind with a clause and no relative word: the name its subject
    ("Who was in charge of the country Quayside Freight is based in?",
     "In which country Quayside Freight is based in?", "Who was in charge of {}?"),
    ("Who governs the state the Battle of Harbour Lights was fought?",
     "In which state the Battle of Harbour Lights was fought?", "Who governs {}?"),
    ("В каком офисе работает дежурная, которая была на смене во время инцидента INC-2031-020?",
     "Какая дежурная была на смене во время инцидента INC-2031-020?", "В каком офисе работает {}?"),
    # a participle phrase after the clause says more of the clause's own noun, and is split off next
    ("Сколько инженеров в команде, которой принадлежит сервис, пострадавший в инциденте INC-2031-020?",
     "Какой команде принадлежит сервис, пострадавший в инциденте INC-2031-020?", "Сколько инженеров в {}?"),
    ("Какой команде принадлежит сервис, пострадавший в инциденте INC-2031-020?",
     "Какой сервис пострадавший в инциденте INC-2031-020?", "Какой команде принадлежит {}?"),
    ("На какой улице находится офис, где работает Вера Соколова?",
     "Где работает Вера Соколова?", "На какой улице находится {}?"),
])
def test_a_clause_describing_an_entity_is_split_off_as_its_own_question(question, inner, outer):
    got = nested_question(question)
    assert got is not None and got.place == ("which city" in got.inner or "which country" in got.inner
                                             or "which state" in got.inner)
    assert got is not None and (got.inner, got.outer) == (inner, outer)
    assert got.then("Ines Moreau") == outer.replace("{}", "Ines Moreau")


@pytest.mark.parametrize("question", [
    "Who leads the Carriers team?",  # no clause
    "Who leads the team Ines Moreau joined?",  # a team is no kind of place: its clause is left alone
    "In what year was the man that founded Quayside Freight born?",  # where the clause ends takes a parser
    "Where did the band form that recorded Harbour Lights?",
    "Who leads the Carriers team, and in which office does that person work?",  # "that" as a determiner
    "",
    "which that who where",
    "котор, где, который",
])
def test_a_question_without_a_clause_that_can_be_split_is_asked_as_it_stands(question):
    assert nested_question(question) is None


@pytest.mark.parametrize("question", [
    "which " * 20_000 + "?",  # each relative word read once: this took half a minute when each cost a pass
    "that " * 20_000,
    "The " + "engineer who " * 5_000 + "is based in which office?",
    ", которая" * 5_000,
    ", где" * 8_000,
    "\ufdfa" * 40 + " who did it?",
    "Who ran the country " + "Aaa of " * 10_000 + "is in?",  # a clause without a relative word, bounded
    "a network founded by " * 5_000 + "whom?",
    "\x00 who \ud800 that \U0001F600 which?",
])
def test_hostile_questions_are_read_without_error(question):
    nested = nested_question(question)
    assert nested is None or "{}" in nested.outer
    assert least_hops(question) >= 1
    question_mentions(question)
    parsed = Question(question)
    assert parsed.stems >= {w.casefold()[:5] for w in parsed.query_words if w.isascii() and w.isalpha()}
    for name in parsed.names[:3]:
        parsed.clause_words(name.text)


def test_a_follow_up_search_reads_the_clause_of_a_name_and_the_question_s_words():
    question = Question("In 1990, who was the governor of the state where Silverton lies?")
    assert question.clause_words("Silverton") == ["governor", "state", "lies"]  # its clause, not the name
    assert question.clause_words("Nowhere") == list(question.query_words)  # a name it does not spell: all
    assert "governor" in question.query_words and "1990" in question.query_words
    assert {"gover", "silve", "state"} <= question.stems
