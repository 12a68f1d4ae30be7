"""Which side of a comparison the question asks for (answers/comparison_order.py). Pure."""
from __future__ import annotations

import pytest

from answers.comparison_order import date_value, number_value, order_verdict
from answers.question import Question


@pytest.mark.parametrize("question, order", [
    ("Who is older, Ora Venn or Tam Holt?", ("date", False)),
    ("Which band was formed first, The Lowlands or Brass Kettle?", ("date", False)),
    ("Which office is larger: Berlin or Moscow?", ("number", True)),
    ("Какая команда больше: Платформа или Биллинг?", ("number", True)),
    ("Which author was more popular, A or B?", None),  # "more" compares anything: no order
    ("Is A older or younger than B?", None),  # both ways
])
def test_the_question_says_which_way_it_orders(question, order):
    assert Question(question).order == order


def test_the_side_with_the_earlier_date_leads_with_both_values():
    sides = [("Tam Holt", "Tam Holt (born December 26, 1963) is a Danish drummer."),
             ("Ora Venn", "Ora Venn (born August 3, 1963) is an American singer.")]
    assert order_verdict(("date", False), sides) == "Ora Venn (August 3, 1963; Tam Holt: December 26, 1963)."


def test_values_that_do_not_decide_give_no_verdict():
    assert order_verdict(("date", False), [("A", "born 1963"), ("B", "born 3 августа 1963 г.")]) is None
    assert order_verdict(("number", True), [("A", "12 people"), ("B", "12 people")]) is None
    assert order_verdict(("number", True), [("A", "12 people"), ("B", "no number here")]) is None


def test_numbers_keep_their_scale_and_skip_years():
    assert number_value("founded in 2013, about 170 people") == (170.0, "170 people")
    assert number_value("€4.1 million a year")[0] == pytest.approx(4.1e6)
    assert number_value("900,000 a year") == (900000.0, "900,000")
    assert order_verdict(("number", True), [("Stratus", "€4.1 million"), ("Geo", "€900,000 a year")]).startswith("Stratus")
    assert date_value("2026-02-28") == ((2026, 2, 28), "2026-02-28")
    assert date_value("18 апреля 1883 г.")[0] == (1883, 4, 18)
