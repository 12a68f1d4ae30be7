"""A number the question states that no passage its local answer quotes writes withholds the answer
(answers/premise.py, answers/writer.py): "the 9th floor" of an office whose page has none."""
from __future__ import annotations

import pytest

from answers.premise import unstated_numbers
from answers.question import Question
from answers.types import Passage
from answers.units import Picked

EVERYONE = ["public", "staff"]


def page(n: int, text: str, title: str = "Page", heading: str = "") -> Passage:
    return Passage(n, f"doc{n}", title, heading or title, text)


def quote(*passages: int) -> list[Picked]:
    return [Picked(n, 0, "", 1.0) for n in passages]


ROUTE_7 = page(1, "The first tram leaves the depot at 05:12.", "Route 7 timetable")
PRICES = page(2, "The full price list of 640 items is on the website.", "Price list 2026")
WOLF = page(7, "Never Cry Wolf is a 1983 drama film.", "Never Cry Wolf")
HERO = page(8, "The film was released by Walt Disney Pictures.", "Big Hero 6")
FUND = page(3, "Фонд премирования на 2027 год утверждён в размере 186 млн ₽.", "Премирование")
BUDGET = page(4, "The budget for 1 April 2026 - 31 March 2027 was approved.", "Budget")
STAFF = page(5, "В сети работают 12 500 сотрудников, из них 1,286 врачей.", "Кадры")
CENTURY = page(6, "Собор построен в XIX веке, колокольня — в XVII.", "История")


@pytest.mark.unit
@pytest.mark.parametrize("question, passages, picked, unstated", [
    ("When does the first tram of route 11 leave?", [ROUTE_7], quote(1), ("11",)),
    # the title and heading count: "Route 7 timetable" writes the 7
    ("When does the first tram of route 7 leave?", [ROUTE_7], quote(1), ()),
    ("When does the first tram of route 07 leave?", [ROUTE_7], quote(1), ()),  # "07" is 7
    # only the quoted passages count, not the others the search found
    ("How many items are in appendix 3 of the 2026 price list?", [PRICES, ROUTE_7], quote(1), ("3",)),
    ("How many items are in the 2026 price list?", [ROUTE_7, PRICES], quote(2), ()),
    ("Сколько позиций в приложении №3?", [PRICES], quote(1), ("3",)),
    # nothing quoted, no number asked, or digits of other scripts: nothing to check
    ("When does route 11 start?", [ROUTE_7], [], ()),
    ("When does the first tram leave?", [ROUTE_7], quote(1), ()),
    ("Route ٣ or ３?", [ROUTE_7], quote(1), ()),
    # hostile: a quote pointing past the passages, a run of digits too long for int()
    ("Route 11?", [ROUTE_7], quote(5), ()),
    ("9" * 5000 + "?", [ROUTE_7], quote(1), ("9" * 5000,)),
    # only the chosen unit's passage (quoted first): an extra from another page does not state its number
    ("Какой фонд премирования утверждён на 2026 год?", [FUND, BUDGET], quote(1, 2), ("2026",)),
    ("Какой фонд премирования утверждён на 2027 год?", [FUND, BUDGET], quote(1, 2), ()),
    # a number inside a name identifies one of the entities the question names: any quoted page may write it
    ("Both Never Cry Wolf and Big Hero 6 were released by what label?", [WOLF, HERO], quote(1, 2), ()),
    ("Both Never Cry Wolf and Big Hero 7 were released by what label?", [WOLF, HERO], quote(1, 2), ("7",)),
    # a number grouped in threes is one value, whatever the separator; its groups another reading of it
    ("Сколько врачей из 12500 сотрудников?", [STAFF], quote(1), ()),
    ("Сколько врачей из 12 500 сотрудников?", [STAFF], quote(1), ()),
    ("How many of the 1286 doctors?", [STAFF], quote(1), ()),
    ("Сколько из 12 600 сотрудников?", [STAFF], quote(1), ("12 600",)),
    ("Сколько из 12 000 сотрудников?", [STAFF], quote(1), ("12 000",)),
    # Roman numerals on the page: "XIX век" states the 19th century
    ("Какой собор построен в 19 веке?", [CENTURY], quote(1), ()),
    ("Какой собор построен в 18 веке?", [CENTURY], quote(1), ("18",)),
    ("Сколько " + "100 " * 3000 + "?", [CENTURY], quote(1), (("100 " * 3000).strip(),)),  # hostile: one long run
])
def test_the_numbers_no_quoted_passage_writes(question, passages, picked, unstated):
    assert unstated_numbers(Question(question), passages, picked) == unstated


@pytest.fixture(scope="module")
def offline(db, settings, local_embedder):
    from router.service import QuestionRouter

    with QuestionRouter(db, settings, embedder=local_embedder, use_llm=False) as router:
        yield router


def test_a_number_the_answering_page_never_writes_withholds_the_local_answer(offline, demo_tenant):
    answer = offline.ask(demo_tenant, EVERYONE, "Сколько человек работает в офисе в Москве на 9 этаже?", route="local")
    assert answer.no_answer and answer.trace["unstated_numbers"] == ["9"]
    assert "нигде не упоминают: 9." in answer.answer and answer.citations  # where the search looked
    assert answer.trace["withheld"]  # what would have been said, for the evaluation


def test_a_number_the_answering_page_writes_keeps_the_answer(offline, demo_tenant):
    answer = offline.ask(demo_tenant, EVERYONE, "What happened in the November 2024 Nordpost Express incident?",
                         route="local")
    assert not answer.no_answer and "unstated_numbers" not in answer.trace
