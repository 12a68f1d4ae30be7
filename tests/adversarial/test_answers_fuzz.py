"""Hostile questions over hostile passages through the offline answer writers (answers/extractive.py
`offline_answer`: the local answer, and on the multi-hop route the comparison, the described statements and
the chain). The passages are what a user's documents put there: random code points of every kind (the query
fuzz's alphabet), tables of thirty columns, lists of bold labels, sentences opening on a pronoun, 40,000
characters of digits and spaces, a 100,000-character word, empty pages; the questions every form the parse
reads (a comparison, a relative clause, two parts, statements before the question, a contact, a price) filled
with names, codes and random text. Each answer must come back, of the documented shape, its citations inside
the passages, within a deadline far above any honest answer's (a scan quadratic in the page took 14-17 s).
"""
from __future__ import annotations

import json
import random
import time
import zlib
from dataclasses import replace

from answers.extractive import offline_answer
from answers.other_language_gate import GATE_PATH, load_gate
from answers.reader import load_reader
from answers.question import Question
from answers.types import Passage
from tests.adversarial.test_query_fuzz import random_text

SEED = 7_2026
CASES = 40
DEADLINE_S = 5.0  # per answer: an honest one takes under 0.6 s on these pages; a quadratic scan took 14-17 s
TEMPLATES = (
    "Who leads {a}?", "When was {a} founded?", "How many {a} does {b} have?", "Which is older, {a} or {b}?",
    "What is the {a} of the {b} that {c}?", "Кто руководит {a}, и в каком офисе работает {b}?",
    "Сколько стоит {a} в {b}?", "Чем отличается {a} от {b}?", "{a}. {b}. Какой {c}?", "What does {a} mean?",
    "Where is {a}, the city where {b} was born?", "{a}", "Is {a} longer than {b}?",
    "What is the e-mail address of {a}?", "Какой телефон у {a}?", "How much does {a} cost?",
)
NAMES = ("Berlin office", "Ilya Morozov", "ERR_2043", "Команда Платформы", "Payments Gateway", "2025", "€40",
         "INC-2024-117", "«Ласточка»", "the team", "Hannah", "B-04", "7", "\u202e", "ﬁ", "\ufdfa" * 30)
STATEMENTS = (" opened in 2015.", " is led by Anna.", " costs €40 per night.", " — 28 дней.", ", тел. +7 (4852) 60-17-43.")
EXTREMES = ("1 " * 20_000, "a" * 100_000, "€" + "9 " * 10_000, "| " + "x | " * 2_000 + "\n|" + "---|" * 2_000)


def _question(rng: random.Random) -> str:
    def part() -> str:
        return rng.choice(NAMES) if rng.random() < 0.6 else random_text(rng, 30)
    return rng.choice(TEMPLATES).format(a=part(), b=part(), c=part()) if rng.random() < 0.8 else random_text(rng, 200)


def _block(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return " ".join(rng.choice(NAMES) + rng.choice(STATEMENTS) for _ in range(rng.randint(1, 6)))
    if kind == 1:
        columns = rng.randint(1, 30)
        return ("| " + " | ".join(random_text(rng, 8) for _ in range(columns)) + " |\n|" + "---|" * columns
                + "\n| " + " | ".join(rng.choice(NAMES) for _ in range(columns)) + " |")
    if kind == 2:
        return "\n".join(f"- **{random_text(rng, 10)}:** {rng.choice(NAMES)} {random_text(rng, 20)}"
                         for _ in range(rng.randint(1, 8)))
    if kind == 3:
        return rng.choice(("Он ", "This ", "Это ")) + random_text(rng, 80) + rng.choice((" это.", " this.", "."))
    if kind == 4:
        return rng.choice(EXTREMES) if rng.random() < 0.1 else ""
    return random_text(rng, 400)


def _passages(rng: random.Random) -> list[Passage]:
    return [Passage(id=i, doc_id=rng.choice((None, f"d{i}.md", "d0.md")), title=rng.choice(("", "Berlin office",
                                                                                             random_text(rng, 30))),
                    heading=rng.choice(("", random_text(rng, 20))),
                    text="\n\n".join(_block(rng) for _ in range(rng.randint(1, 4))))
            for i in range(rng.randint(0, 6))]


def test_offline_answers_hold_on_hostile_questions_and_passages():
    rng = random.Random(SEED)
    slow = []
    for case in range(CASES):
        question, passages = _question(rng), _passages(rng)
        for multihop in (False, True):
            started = time.perf_counter()
            answer = offline_answer(Question(question), passages, multihop=multihop)
            elapsed = time.perf_counter() - started
            assert isinstance(answer.text, str) and 0.0 <= answer.confidence <= 1.0, (case, question, answer)
            assert all(1 <= p.passage <= len(passages) for p in answer.picked), (case, question, answer.picked)
            if elapsed > DEADLINE_S:
                slow.append((case, multihop, round(elapsed, 1), question[:80]))
    assert not slow, f"answers slower than {DEADLINE_S} s: {slow}"


def test_offline_answers_hold_on_the_extreme_pages():
    """Every extreme page alone, under every form of question: the longest inputs, one case each."""
    for page in EXTREMES:
        for template in TEMPLATES:
            question = template.format(a="Berlin office", b="ERR_2043", c="1")
            for multihop in (False, True):
                started = time.perf_counter()
                answer = offline_answer(Question(question), [Passage(1, "d.md", "Berlin office", "", page)],
                                        multihop=multihop)
                assert time.perf_counter() - started < DEADLINE_S, (question, page[:40])
                assert 0.0 <= answer.confidence <= 1.0 and all(p.passage == 1 for p in answer.picked)


def _pseudo_similarity(question: str, texts) -> list[float]:
    """A deterministic stand-in for the e5 cosines (0.6-1.0), so the other-language paths run without a model."""
    return [0.6 + 0.4 * (zlib.crc32((question + t).encode("utf-8", "surrogatepass")) % 1000) / 1000 for t in texts]


def test_the_other_language_gate_and_the_learned_reader_hold_on_hostile_questions_and_passages():
    """The paths a deployment switches on: answers chosen by meaning across languages with the shipped gate, and
    the shipped learned reader (as fitted, and with its ranker choosing)."""
    gate = load_gate(json.loads(GATE_PATH.read_text(encoding="utf-8"))["embedder"])
    reader = load_reader()
    assert gate is not None and reader is not None
    rng = random.Random(SEED + 1)
    for case in range(CASES // 2):
        question, passages = _question(rng), _passages(rng)
        for kwargs in ({"similarity": _pseudo_similarity, "gate": gate},
                       {"similarity": _pseudo_similarity, "gate": gate, "multihop": True},
                       {"reader": reader}, {"reader": replace(reader, chooser="ranker")}):
            answer = offline_answer(Question(question), passages, **kwargs)
            assert isinstance(answer.text, str) and 0.0 <= answer.confidence <= 1.0, (case, question, kwargs)
            assert all(1 <= p.passage <= len(passages) for p in answer.picked), (case, question, answer.picked)
