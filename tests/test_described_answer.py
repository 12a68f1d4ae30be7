"""A question whose statements describe what its last sentence asks about (answers/chain/described.py):
the bridge and the answer chosen together, over invented passages."""
from __future__ import annotations

from answers.chain.described import described_answer
from answers.chain.question import described_ask
from answers.extractive import offline_answer
from answers.question import Question
from answers.types import Passage


def p(n: int, title: str, text: str) -> Passage:
    return Passage(n, f"doc{n}.md", title, "", text)


ORDERS = [
    p(1, "Order service", "The order service takes customers' orders for the shop. It sends each payment first "
                          "to the primary processor, Quillpay. If Quillpay does not answer within two seconds, "
                          "the payment is retried with Brightpay."),
    p(2, "Vendor contracts", "| Vendor | What we buy | Renewal date |\n|---|---|---|\n"
                             "| Brightpay | backup card processing | 2027-02-28 |\n"
                             "| Quillpay | card processing | 2028-05-31 |\n"
                             "| Lumen Maps | geocoding | 2026-09-30 |"),
    p(3, "Brightpay", "Brightpay has been our backup processor since March 2024. Its contract is reviewed yearly."),
]


def test_the_statements_and_the_last_sentence_are_told_apart():
    assert described_ask("The order service sends each payment to one processor first. "
                         "When does our contract with this processor end?") == (
        "The order service sends each payment to one processor first.",
        "When does our contract with this processor end?")
    assert described_ask("Сервис заказов сначала отправляет платёж основному процессору. Когда истекает договор с ним?")
    assert described_ask("When does our contract with Quillpay end?") is None  # one sentence
    assert described_ask("Who runs the order service? When does its contract end?") is None  # two questions
    assert described_ask("The order service sends each payment to one processor first.") is None  # no question
    assert described_ask("Which company did Jon L. Luther lead?") is None  # an initial ends no sentence
    assert described_ask("") is None and described_ask("?") is None


def test_the_bridge_is_the_one_the_answer_can_be_reached_through():
    question = Question("The order service first sends each payment to its primary processor. "
                        "When does our contract with this processor come up for renewal?")
    got = offline_answer(question, ORDERS, multihop=True)
    # Brightpay, named by the same page, has a renewal date too: the primary one is the page's first
    assert got.text.startswith("2028-05-31. Chain: Quillpay -> 2028-05-31."), got.text
    assert [c.passage for c in got.picked][:2] == [1, 2] and got.answered


def test_a_russian_question_over_russian_pages():
    pages = [p(1, "Сервис заказов", "Сервис заказов принимает заказы покупателей. Каждый платёж он сначала "
                                    "отправляет основному процессору — компании Квиллпэй. Если Квиллпэй не "
                                    "ответил за две секунды, платёж повторяется через Брайтпэй."),
             p(2, "Договоры с поставщиками", "Договор с Квиллпэй действует до 31 мая 2028 года. "
                                             "Договор с Брайтпэй действует до 28 февраля 2027 года.")]
    question = Question("Сервис заказов сначала отправляет каждый платёж основному процессору. "
                        "Когда истекает наш договор с этим процессором?")
    got = described_answer(question, pages, "Цепочка")
    assert got is not None and got.text.startswith("31 мая 2028. Цепочка: Квиллпэй -> 31 мая 2028."), got.text


def test_a_name_the_question_spells_is_no_bridge():
    question = Question("Quillpay processes our card payments. When does our contract with it come up for renewal?")
    got = described_answer(question, ORDERS, "Chain")
    assert got is not None and "Chain: Quillpay" not in got.text, got.text


def test_nothing_to_go_through_leaves_the_question_to_the_chain():
    question = Question("The order service first sends each payment to its primary processor. "
                        "When does our contract with this processor come up for renewal?")
    assert described_answer(question, [], "Chain") is None
    assert described_answer(Question("When does our contract with Quillpay come up for renewal?"), ORDERS,
                            "Chain") is None
    # pages naming nothing at all: no bridge, and the offline answer falls back to the chain's own
    bare = [p(1, "", "payments go first to the primary processor and then to the backup one.")]
    assert described_answer(question, bare, "Chain") is None
    assert offline_answer(question, bare, multihop=True) is not None


def test_hostile_statements_do_not_break_it():
    for text in ("\ufdfa" * 30 + ". What is it?", "Ok. " * 2000 + "Why?", "\x00\u202e. Кто это?",
                 ". . . ?", "A.\nB?"):
        question = Question(text)
        got = described_answer(question, ORDERS, "Chain")
        assert got is None or got.text


def test_a_path_whose_answer_shares_nothing_with_the_last_sentence_is_no_answer():
    # every page names Quillpay, none says anything of a logo's colour: the chain is left to answer
    question = Question("The order service first sends each payment to its primary processor. "
                        "What colour is its logo?")
    assert described_answer(question, ORDERS, "Chain") is None
    # the last sentence asking nothing of its own: the statements say what is asked
    told = Question("The order service retries a payment with another processor when the first does not answer. "
                    "Which is it?")
    got = described_answer(told, ORDERS, "Chain")
    assert got is not None and "Brightpay" in got.text, got.text
    sentence = got.text.split(" [", 1)[0]
    assert got.text.count(sentence) == 1, got.text  # the answering sentence is quoted once
