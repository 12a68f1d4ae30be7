"""Comparison verdicts (answers/comparison_verdict.py): which side comes first in time, and "no" to
"both X" only on a side that states another origin. Invented passages, pure units."""
from __future__ import annotations

import pytest

from answers.comparison import comparison_answer
from answers.comparison_verdict import asked_order, contrast, first_date, ordered_verdict
from answers.extractive import offline_answer
from answers.question import Question
from answers.types import Passage
from answers.units import Picked


def p(n: int, title: str, text: str) -> Passage:
    return Passage(n, f"doc{n}.md", title, title, text)


def picked(n: int, text: str) -> list[Picked]:
    return [Picked(n, 0, text, 1.0)]


@pytest.mark.parametrize("question, order", [
    ("Who is older, Mira Kast or Tomas Ode?", -1),
    ("Which band was formed first, Velvet Moth or Iron Gale?", -1),
    ("Кто моложе: Анна Речкина или Олег Вяземский?", 1),
    ("Кто из них старше — Речкина или Вяземский?", -1),
    ("Which team is bigger: Routing or Billing?", None),
    ("Are Velvet Moth and Iron Gale both German bands?", None),
    ("", None),
])
def test_the_asked_order_is_the_questions_first_comparative(question, order):
    assert asked_order(question) == order


@pytest.mark.parametrize("text, key", [
    ("Mira Kast (born August 3, 1963) is a singer.", (1963, 8, 3)),
    ("Tomas Ode (26 December 1963 – 2020) was a drummer.", (1963, 12, 26)),
    ("Офис открыт 3 июня 2015 г. в Казани.", (2015, 6, 3)),
    ("Signed on 2026-03-31, renewed in 2027.", (2026, 3, 31)),
    ("The band formed in Leeds in 1997 and split in 2004.", (1997, 0, 0)),
    ("Released on June 3rd, 1963 in London.", (1963, 6, 3)),
])
def test_a_sides_first_date_is_read_with_the_parts_it_writes(text, key):
    assert first_date(text)[0] == key


def test_no_date_and_hostile_text_give_nothing():
    for text in ("", "no digits here", "\u0000" * 50, "9" * 5000, "12 people", "\ud800" * 3):
        assert first_date(text) is None
    assert first_date("１９６３ and 1970")[0] == (1970, 0, 0)  # fullwidth digits are no year


def test_the_earlier_date_wins_and_its_evidence_follows_the_verdict():
    sides = [("Tomas Ode", picked(2, "Tomas Ode (26 December 1963 – 2020) was a drummer.")),
             ("Mira Kast", picked(1, "Mira Kast (born August 3, 1963) is a singer."))]
    text, winner = ordered_verdict(-1, sides, "english")
    assert winner == 1 and text == "Mira Kast: August 3, 1963 — earlier than 26 December 1963."
    later, _ = ordered_verdict(1, sides, "russian")
    assert later.startswith("Tomas Ode: 26 December 1963 — позже, чем")


def test_a_year_against_a_full_date_compares_years_and_a_tie_gives_no_verdict():
    sides = [("A", picked(1, "A was formed in 1963.")), ("B", picked(2, "B (born August 3, 1963) sings."))]
    assert ordered_verdict(-1, sides, "english") is None
    sides[0] = ("A", picked(1, "A was formed in 1961."))
    assert ordered_verdict(-1, sides, "english")[1] == 0
    assert ordered_verdict(-1, sides[:1], "english") is None
    assert ordered_verdict(-1, [sides[0], ("B", [])], "english") is None


def test_a_side_stating_another_origin_is_evidence_for_no_and_a_silent_side_is_not():
    assert contrast("German bands", "Iron Gale is a Danish heavy metal band from Aarhus.", "Iron Gale") == \
        "Danish heavy metal band"
    assert contrast("German bands", "Iron Gale is a heavy metal band from Aarhus.", "Iron Gale") is None
    assert contrast("German bands", "Iron Gale is a German-Danish band.", "Iron Gale") is None  # says German
    # a name between the origin-shaped word and the thing is no origin: "Brian May's band"
    assert contrast("German bands", "It was Adrian Holt's band until 1990.", "Iron Gale") is None
    assert contrast("film directors", "He was a Hungarian film director.", "Geza") is None  # nothing to contrast
    assert contrast("American directors", "Hungarian director.", "X") is None  # the sentence's first word


def test_comparison_answers_carry_the_verdicts():
    bands = [p(1, "Velvet Moth", "Velvet Moth is a German synthpop band formed in Bonn in 1982."),
             p(2, "Iron Gale", "Iron Gale is a Danish heavy metal band formed in Aarhus in 1981.")]
    both = Question("Are Velvet Moth and Iron Gale both German bands?")
    got = offline_answer(both, bands, multihop=True)
    assert got.text.startswith("No: Iron Gale — Danish heavy metal band [2]."), got.text
    first = Question("Which band was formed first, Velvet Moth or Iron Gale?")
    got = offline_answer(first, bands, multihop=True)
    assert got.text.startswith("Iron Gale: 1981 — earlier than 1982. Iron Gale: Iron Gale is a Danish"), got.text
    # a silent side leaves the sides side by side, no verdict
    silent = [bands[0], p(2, "Iron Gale", "Iron Gale is a heavy metal band from Aarhus.")]
    got = offline_answer(first, silent, multihop=True)
    assert got.text.startswith("Velvet Moth: "), got.text
    got = comparison_answer(both, silent, [("Velvet Moth", "Velvet Moth German bands"),
                                           ("Iron Gale", "Iron Gale German bands")], "German bands")
    assert not got.text.startswith(("No", "Yes")), got.text
