"""The learned reader (answers/reader.py): the shipped model loads and matches the code, its features
are deterministic, its calibration is monotone, it withholds an off-topic question over the fixtures
and keeps a right answer, and hostile questions do not break it."""
from __future__ import annotations

import json

import numpy as np
import pytest

from answers.local import local_answer, reader_pool
from answers.reader import FEATURES, MODEL_PATH, ReaderModel, ReaderModelError, load_reader
from answers.types import Passage
from tests.conftest import FIXTURES
from answers.question import Question

STAFF = ["public", "staff"]


def p(n: int, title: str, text: str, relevance: float | None = None) -> Passage:
    return Passage(n, f"doc{n}.md", title, title, text, relevance=relevance)


def closeness(question, texts):  # a deterministic stand-in for the e5 model: shared letters
    q = set(question.lower())
    return [len(q & set(t.lower())) / max(len(q | set(t.lower())), 1) for t in texts]


def corpus_passages(*paths: str) -> list[Passage]:
    """Fixtures documents cut into paragraph passages, front matter dropped."""
    out = []
    for path in paths:
        text = (FIXTURES / "corpus" / path).read_text(encoding="utf-8").split("---", 2)[-1]
        for para in (b for b in text.split("\n\n") if b.strip() and not b.lstrip().startswith("#")):
            out.append(Passage(len(out) + 1, path, path, "", para.strip()))
    return out


def test_the_shipped_model_loads_and_matches_the_features():
    model = load_reader()
    assert model is not None and model.features == FEATURES
    assert model.platt_a > 0 and 0 < model.threshold < 1
    assert model.provenance["data"] == "bench/reader_data/README.md"


def test_a_model_that_does_not_match_the_code_is_refused(tmp_path):
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    with pytest.raises(ReaderModelError):
        ReaderModel.from_dict({**data, "features": data["features"][:-1]})
    with pytest.raises(ReaderModelError):
        ReaderModel.from_dict({**data, "platt_a": -1.0})  # a calibration that turns the ranking round
    broken = tmp_path / "reader_model.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(ReaderModelError):
        load_reader(broken)
    assert load_reader(tmp_path / "absent.json") is None  # no file: the hand-weighted scorer answers


def test_features_are_deterministic():
    passages = corpus_passages("offices/berlin.md", "offices/austin.md")
    question = "How many people work in the Berlin office?"
    first = reader_pool(Question(question), passages, similarity=closeness).rows()
    again = reader_pool(Question(question), list(passages), similarity=closeness).rows()
    assert first.shape[1] == len(FEATURES) and np.array_equal(first, again)


def test_the_calibration_is_monotone():
    model = load_reader()
    logits = np.linspace(-15, 15, 301)
    confidences = [model.confidence(z) for z in logits]
    assert all(b >= a for a, b in zip(confidences, confidences[1:]))
    assert 0.0 <= confidences[0] < confidences[-1] <= 1.0


def test_a_right_answer_is_kept_and_an_off_topic_question_withheld_offline():
    model = load_reader()
    passages = corpus_passages("offices/berlin.md", "offices/austin.md", "handbook/company-overview.md")
    kept = local_answer(Question("When did Larkspur open its Austin office?"), passages, similarity=closeness, reader=model)
    assert "2019" in kept.text.split("[")[0] and kept.answered
    off = local_answer(Question("What is the boiling point of liquid nitrogen?"), passages, similarity=closeness, reader=model)
    assert not off.answered


@pytest.mark.parametrize("question", [
    "", "   ", "?" * 5000, "when " * 4000, "\u202e\u0000\ufdfa\U0001f600 ERR_\u0663\u0663",
    "Сколько " + "\u0301" * 300, "𝔚𝔥𝔬 𝔩𝔢𝔞𝔡𝔰?", "\ud800 lone surrogate?",
])
def test_hostile_questions_do_not_break_the_reader(question):
    model = load_reader()
    passages = corpus_passages("offices/berlin.md", "teams/platform.md")
    got = local_answer(Question(question), passages, similarity=closeness, reader=model)
    assert 0.0 <= got.confidence <= 1.0
    assert local_answer(Question(question), [], similarity=closeness, reader=model).picked == []


@pytest.fixture(scope="module")
def offline(db, settings, local_embedder):
    from router.service import QuestionRouter
    # the name check would withhold "Lisbon" before the reader reads it (tests/test_unknown_names.py)
    on = settings.model_copy(update={"answer_learned_reader": True, "answer_unknown_names": False})
    with QuestionRouter(db, on, embedder=local_embedder, use_llm=False) as router:
        yield router


def test_the_reader_is_off_unless_asked_for():
    from core.settings import Settings
    assert Settings().answer_learned_reader is False  # held out it cost more right answers than it gained


def test_the_router_withholds_an_off_topic_question_and_keeps_a_right_answer(offline, demo_tenant):
    assert offline.writer.reader is not None
    # an office the corpus has no page for: the search still finds office passages, the reader withholds
    off = offline.ask(demo_tenant, STAFF, "Who is the site lead of the Lisbon office?", route="local")
    assert off.trace["passages"] and off.trace.get("threshold") == offline.writer.reader.threshold
    assert off.no_answer and off.trace["confidence"] < offline.writer.reader.threshold
    right = offline.ask(demo_tenant, STAFF, "When did the Yekaterinburg office open?", route="local")
    assert not right.no_answer and "2021" in right.answer
