"""The relation judge (answers/relation_judge.py): the shipped model loads and runs on onnxruntime, reads a
sentence that states the answer apart from one of the same words that does not, survives hostile text, and
the answer writer withholds what it rejects (quoting the sentence) and keeps an answer when it fails."""
from __future__ import annotations

import numpy as np
import pytest

from answers.question import Question
from answers.relation_judge import JUDGE_PATH, JudgeModel, RelationJudge, load_judge
from answers.types import Passage, RouteDecision
from answers.writer import AnswerWriter


@pytest.fixture(scope="module")
def judge(tmp_path_factory) -> RelationJudge:
    loaded = load_judge(tmp_path_factory.mktemp("judge"))
    assert loaded is not None, f"{JUDGE_PATH} should ship with the package and load"
    return loaded


def test_the_shipped_model_is_complete_and_its_threshold_was_set():
    model = JudgeModel.read()
    assert np.isfinite(model.threshold) and 0 < model.first < 12 and model.provenance
    for layer in range(model.first, 12):
        for m in ("q", "k", "v", "ao", "fi", "fo"):
            a, b = model.arrays[f"l{layer}.{m}.lora_a"], model.arrays[f"l{layer}.{m}.lora_b"]
            assert a.shape[0] == b.shape[1] and np.isfinite(a).all() and np.isfinite(b).all()
    assert model.arrays["head.w"].size == 2 * 384


def test_a_sentence_stating_the_answer_is_judged_above_one_of_the_same_words_that_does_not(judge):
    """Facts of the fixture corpus's kind, written here: the same office, two relations."""
    title = "Larkspur offices"
    stated = "Larkspur opened its Austin office in 2019 with twelve engineers."
    assert judge.states("When did Larkspur open its Austin office?", title, stated)[0]
    assert judge.states("Когда Larkspur открыл офис в Остине?", title, stated)[0]
    opened = judge.logit("When did Larkspur open its Austin office?", title, stated)
    closed = judge.logit("When did Larkspur close its Austin office?", title, stated)
    assert opened > closed


@pytest.mark.parametrize("text", ["", " ", "\ufdfa" * 30, "\ud800broken", "x" * 100_000, "🙂" * 500,
                                  "\u0000\u200b\u202e", "a\u0301" * 300])
def test_hostile_text_is_judged_without_a_crash(judge, text):
    for question, sentence in ((text, "Larkspur opened its Austin office in 2019."), ("When?", text)):
        z = judge.logit(question, text[:50], sentence)
        assert np.isfinite(z)


def _passages() -> list[Passage]:
    return [Passage(1, "offices.md", "Larkspur offices", "", "Larkspur opened its Austin office in 2019."),
            Passage(2, "notes.md", "Notes", "", "The Berlin office hosts the support team.")]


class _Judge:
    def __init__(self, verdict: bool | Exception):
        self.verdict, self.asked = verdict, []

    def states(self, question, title, sentence):
        self.asked.append((question, title, sentence))
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict, 0.9 if self.verdict else 0.1


def _write(judge, question: str = "When did Larkspur open its Austin office?", multihop: bool = False):
    writer = AnswerWriter(searcher=None, similarity=None, unknown_names=False, judge=judge)
    decision = RouteDecision("multihop" if multihop else "local", 1.0, "forced", "forced")
    return writer.write("t", ["public"], Question(question), _passages(), decision, None, partial=False,
                        multihop=multihop)


def test_the_writer_withholds_what_the_judge_rejects_and_quotes_the_sentence():
    judge = _Judge(False)
    answer = _write(judge)
    assert judge.asked == [("When did Larkspur open its Austin office?", "Larkspur offices",
                            "Larkspur opened its Austin office in 2019.")]
    assert answer.no_answer and answer.offline
    assert '"Larkspur opened its Austin office in 2019."' in answer.answer
    assert answer.trace["judge"] == {"probability": 0.1, "states": False} and "2019" in answer.trace["withheld"]
    kept = _write(_Judge(True))
    assert not kept.no_answer and "2019" in kept.answer and kept.trace["judge"]["states"]


def test_a_judge_that_fails_leaves_the_answer_standing_and_says_so():
    answer = _write(_Judge(RuntimeError("onnxruntime: bad allocation")))
    assert not answer.no_answer and "2019" in answer.answer
    assert answer.errors == ["relation judge: RuntimeError"] and "judge" not in answer.trace


def test_a_multi_hop_answer_is_not_judged():
    judge = _Judge(False)
    _write(judge, "Which office did Larkspur open in 2019, and who leads it?", multihop=True)
    assert judge.asked == []
