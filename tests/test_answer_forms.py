"""Answer types told by their form: a count is no date's day and no "№3"; an e-mail address or a phone
number is asked and given in forms of their own, and no unit holding one beside what the question names
means no answer (answers/expected_type.py, answers/local.py, answers/extractive.py)."""
from __future__ import annotations

import time

import pytest

from answers.expected_type import EMAIL, PHONE, quantities, question_kind
from answers.extractive import offline_answer
from answers.local import local_answer
from answers.question import Question
from answers.types import Passage
from answers.unit_scoring import Focus, Scorer
from answers.units import units


def p(n: int, title: str, text: str) -> Passage:
    return Passage(n, f"doc{n}.md", title, title, text)


@pytest.mark.parametrize("text, counts", [
    ("В ночь на 9 ноября 2025 г. филиал остался без света, 42 сотрудника эвакуированы.", ["42"]),
    ("Ends: 30 Jun 2026; 14 staff on site.", ["14"]),
    ("On March 14th, 2020 about 200 people came.", ["200"]),
    ("Движение маршрутов №3 и №11 прервали, пустили 6 автобусов.", ["6"]),
    ("INC-2024-0317 and room A-118: 3 hours lost.", ["3"]),
    ("between 2-3 days", ["2", "3"]),  # a range counts
])
def test_a_count_is_no_dates_day_and_no_number_that_names(text, counts):
    assert [m.group() for m in quantities(text)] == counts


@pytest.mark.parametrize("text, holds", [
    ("The branch lost power on 9 November.", False),
    ("Trams of routes №3 and №11 stopped.", False),
    ("The review INC-2024-0317 is closed.", False),
    ("The branch has 240 beds.", True),
])
def test_a_how_many_question_takes_a_unit_as_holding_a_number_only_for_a_count(text, holds):
    page = p(1, "Branch", text)
    scorer = Scorer(Focus.of(Question("How many beds does the branch have?")), [page], units([page]))
    assert scorer.typed(units([page])[0]) is holds


def test_how_many_is_not_answered_by_the_day_of_a_date_or_a_numbered_name():
    incident = p(1, "Branch", "The branch lost power on 9 November. The branch on route №3 takes up to 240.")
    got = local_answer(Question("How many patients can the branch take?"), [incident])
    assert got.text.startswith("The branch on route №3 takes up to 240."), got.text


@pytest.mark.parametrize("question, kind", [
    ("What is the phone number of the Vologda branch reception desk?", "phone"),
    ("What extension do I dial for the security desk in Bonn?", "phone"),
    ("What number should a patient dial to book a scan?", "phone"),  # a number to dial, not a count
    ("What is Deborah Langford's telephone number?", "phone"),
    ("Какой мобильный телефон у заведующего кардиологией?", "phone"),
    ("Какой добавочный номер у поста охраны?", "phone"),
    ("What is Karen Holm's e-mail address?", "email"),
    ("Какой адрес электронной почты у мурманского филиала?", "email"),
    ("Какая электронная почта у заведующей лабораторией?", "email"),
    ("Which mobile phone was used to shoot the documentary?", None),  # a phone as a thing
    ("Кто отвечает за корпоративную электронную почту?", "person"),  # the e-mail system
    ("Which team owns the service sending SMS and e-mail to recipients?", None),
    ("Which company is building the metro extension?", None),
    ("How many extensions of line 1 are planned?", "number"),
])
def test_an_email_or_a_phone_is_asked_by_its_own_words(question, kind):
    assert question_kind(question) == kind


@pytest.mark.parametrize("question, kind", [
    # a question word after a comma opens a clause about what is asked, not what is asked
    ("На ком женился Тэмуджин, когда ему было около 16 лет?", "person"),
    ("Who did the founder marry, when he was about sixteen?", "person"),
    ("Which office hired the engineer, when the team grew?", "place"),
    ("Сколько сотрудников было в офисе, где работала Анна?", "number"),
    ("О ком эта книга?", "person"),  # "ком", the prepositional case of "кто"
    # the first question word, whatever the list's order ("when" before "who")
    ("Кто и когда основал компанию?", "person"),
    ("When and by whom was the company founded?", "date"),
    # a form still decides first, and a money noun only where no question word does
    ("What number should a patient dial when the clinic is closed?", "phone"),
    ("If a caller does not pass a solver time budget, how long does the route planner get by default?", "number"),
    ("Какой бюджет у отдела?", "money"),
])
def test_the_first_question_word_decides_what_is_asked(question, kind):
    assert question_kind(question) == kind


@pytest.mark.parametrize("text, phone", [
    ("Контактное лицо — менеджер Шилов, тел. +7 (4852) 60-17-43.", "тел. +7 (4852) 60-17-43"),
    ("**Security desk Bonn:** entrance hall, extension 4100", "extension 4100"),
    ("Телефон поста: доб. 4121", "доб. 4121"),
    ("**Единый номер колл-центра:** 8 800 555-41-09", "8 800 555-41-09"),
    ("the on-call number +47 69 21 58 00.", "+47 69 21 58 00"),
])
def test_a_phone_number_is_read_in_the_forms_pages_write_it(text, phone):
    assert PHONE.search(text).group() == phone


@pytest.mark.parametrize("text", ["2026-03-31", "148 600 000 ₽", "PCL-2026-047", "INC-2024-0317", "1 020 км"])
def test_dates_sums_and_codes_are_no_phone_numbers(text):
    assert PHONE.search(text) is None


def test_contact_forms_do_not_backtrack_on_hostile_runs():
    hostile = "+" + "1 " * 50_000 + "@" + "a." * 50_000 + "(" + "-" * 50_000
    started = time.monotonic()
    PHONE.findall(hostile), EMAIL.findall(hostile)
    assert time.monotonic() - started < 5


STAFF_PAGE = p(1, "Onboarding guide", "**Owner:** Katrin Weiss, Director of Human Resources. "
                                      "The onboarding coordinator is Fatima El-Amrani, room A-305.")
CONTACTS = p(2, "Contacts", "**Central switchboard:** +47 69 21 50 00. "
                            "**Security desk Bonn:** entrance hall, extension 4100.")


def test_a_phone_beside_what_the_question_names_answers():
    got = local_answer(Question("What extension do I dial for the security desk in Bonn?"), [STAFF_PAGE, CONTACTS])
    assert got.answered and "4100" in got.text


@pytest.mark.parametrize("question", [
    "What is the phone number of HR director Katrin Weiss?",  # her page gives none; another page gives others'
    "What is Fatima El-Amrani's e-mail address?",
    "Какой номер телефона у Катрин Вайс?",
])
def test_no_phone_or_email_beside_whom_the_question_names_is_no_answer(question):
    got = local_answer(Question(question), [STAFF_PAGE, CONTACTS])
    assert not got.answered, got.text


@pytest.mark.parametrize("facilities, answered", [
    ("Tomasz Wrona is the facilities manager of the Bonn archive.", False),
    ("Tomasz Wrona, facilities manager of the Bonn archive, extension 4417.", True),
])
def test_a_multihop_answer_stands_only_where_it_ends_at_the_asked_form(facilities, answered):
    pages = [p(1, "Flood review", "Replace the drainage pipes in Bonn by 31 December 2026 (owner: Tomasz Wrona)."),
             p(2, "Facilities", facilities)]
    question = Question("What is the phone extension of the manager who has to replace the drainage pipes in Bonn?")
    got = offline_answer(question, pages, multihop=True)
    assert got.answered is answered and ("4417" in got.text) is answered, got.text


@pytest.mark.parametrize("question", ["How much does a parking permit cost at the Berlin campus?",
                                      "Сколько стоит парковка у берлинского кампуса?"])
def test_a_price_is_asked_as_an_amount(question):
    assert question_kind(question) == "money"


PARKING = p(1, "Staff benefits", "Parking permits for the Halden car park P2 cost NOK 450 per semester. "
                                 "The Berlin campus has a car park P4 for visitors.")


def test_a_price_is_answered_by_an_amount_beside_what_the_question_names():
    got = local_answer(Question("How much does a parking permit in Halden cost?"), [PARKING])
    assert got.answered and "NOK 450" in got.text
    got = local_answer(Question("How much does a parking permit at the Berlin campus cost?"), [PARKING])
    assert not got.answered, got.text  # the only price is Halden's


def test_an_amount_in_a_tables_header_counts_and_which_allowance_is_no_price():
    bands = p(1, "Salary bands", "| Level | Title | Berlin (EUR) |\n|---|---|---|\n| L4 | Senior Engineer | 78,000 – 96,000 |")
    got = local_answer(Question("How much is a Senior Engineer (L4) in Berlin paid?"), [bands])
    assert got.answered and "78,000" in got.text, got.text
    allowance = p(1, "On-call in Berlin", "Senior engineers on call in Berlin get a weekly allowance.")
    assert local_answer(Question("Which allowance do senior engineers in Berlin get?"), [allowance]).answered
