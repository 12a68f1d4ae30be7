"""The relation judge (answers/relation_judge.py): the shipped model loads and runs on onnxruntime, reads a
sentence that states the answer apart from one of the same words that does not, survives hostile text, and
the answer writer withholds what it rejects (quoting the sentence) and keeps an answer when it fails."""
from __future__ import annotations

import numpy as np
import pytest

from answers.question import Question
from answers.relation_judge import (JUDGE_PATH, MAX_TOKENS, MAX_WINDOWS, JudgeModel, RelationJudge, load_judge,
                                     pair_ids, pair_windows)
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


# Written for this test (not from any evaluation set or the judge's training files): a unit, a question it
# states, and a question over the same words it does not state (another relation, attribute or period).
STATED_AND_NOT = [
 ("Larkspur offices", "Larkspur opened its Austin office in 2019.", "When did Larkspur open its Austin office?", "When did Larkspur close its Austin office?"),
 ("Harbour bridge", "The Harbour bridge was completed in 1932 by Dorman Long.", "Which firm built the Harbour bridge?", "When was the Harbour bridge demolished?"),
 ("Staff", "Anna Petrova joined Velta Logistics as head of procurement in March 2015.", "What position did Anna Petrova take at Velta Logistics?", "When did Anna Petrova leave Velta Logistics?"),
 ("Price list", "Code: K-101; Service: first cardiology consultation; Price: 3,200 RUB", "How much is a first consultation with a cardiologist?", "How long does a first cardiology consultation take?"),
 ("Library hours", "The Adlershof branch is open 08:00-20:00 on weekdays.", "Until what time is the Adlershof branch open on weekdays?", "What time does the Adlershof branch close on Sundays?"),
 ("Fleet", "The depot runs 42 trams, 18 of them low-floor.", "How many low-floor trams does the depot run?", "How many buses does the depot run?"),
 ("Founders", "Larkspur was founded by Maria Chen and Tom Reyes in 2009.", "Who founded Larkspur?", "Who is the current CEO of Larkspur?"),
 ("Grant", "The foundation awarded the Merrow lab a grant of 48,000 euros for 18 months.", "How large was the grant to the Merrow lab?", "How many researchers does the Merrow lab employ?"),
 ("Филиалы", "Филиал в Казани открылся в 2018 году на улице Баумана.", "Когда открылся филиал в Казани?", "Кто руководит филиалом в Казани?"),
 ("Депо", "Трамвайное депо «Северное» введено в эксплуатацию в 1968 году.", "С какого года работает депо «Северное»?", "Сколько вагонов обслуживает депо «Северное»?"),
 ("Прейскурант", "Код: Л-305; Анализ: общий анализ крови; Цена: 690 ₽", "Сколько стоит общий анализ крови?", "Сколько дней делают общий анализ крови?"),
 ("Договор", "Договор с ООО «Теплосервис» на обслуживание котельной действует до 31 декабря 2027 года.", "До какого числа действует договор с «Теплосервис»?", "На какую сумму заключён договор с «Теплосервис»?"),
 ("Экспедиция", "Экспедиция вышла из Мурманска 12 июня и вернулась 3 сентября.", "Когда экспедиция вернулась?", "Сколько человек было в экспедиции?"),
 ("Музей", "Директор музея Ирина Соколова руководит им с 2011 года.", "Кто руководит музеем?", "Кто был директором музея до 2011 года?"),
 ("Кафедра", "Кафедрой обработки сигналов заведует профессор Даниэль Моро.", "Кто заведует кафедрой обработки сигналов?", "Сколько студентов учится на кафедре обработки сигналов?"),
 ("Завод", "Завод выпускает 1 200 тонн картона в сутки на двух линиях.", "Сколько картона в сутки выпускает завод?", "Сколько сотрудников работает на заводе?"),
]


def test_sentences_stating_the_answer_pass_and_rank_above_questions_they_do_not_answer(judge):
    """The judge's job in the route: what a unit states passes the cut, and a question over the same words
    that the unit does not answer scores lower. A small model errs on some (docs/reader.md names which), so
    the bound is most, not all; the shipped files scored 15-16 of 16 passing and 14 of 16 ordered."""
    stated = [judge.logit(q, title, unit) for title, unit, q, _ in STATED_AND_NOT]
    unstated = [judge.logit(q, title, unit) for title, unit, _, q in STATED_AND_NOT]
    assert sum(z >= judge.threshold for z in stated) >= 14
    assert sum(a > b for a, b in zip(stated, unstated)) >= 13


def test_the_graph_is_built_once_and_read_from_the_state_dir_after(tmp_path, monkeypatch):
    import core.embedding_engines.e5_graph as e5_graph

    question, unit = "Who founded Larkspur?", "Larkspur was founded by Maria Chen in 2009."
    first = RelationJudge(JudgeModel.read(), tmp_path).logit(question, "", unit)
    (cached,) = tmp_path.glob("relation-judge-*.onnx")

    def no_build(*args, **kwargs):
        raise AssertionError("the cached graph should have been read")

    monkeypatch.setattr(e5_graph, "build_model", no_build)
    assert RelationJudge(JudgeModel.read(), tmp_path).logit(question, "", unit) == first
    monkeypatch.undo()
    cached.write_bytes(b"not a graph")  # damaged (a disk error, another onnxruntime): built again
    assert RelationJudge(JudgeModel.read(), tmp_path).logit(question, "", unit) == pytest.approx(first)
    assert cached.stat().st_size > 1_000_000


def test_a_long_unit_is_read_in_windows_that_reach_its_end(tmp_path):
    from core.embedding_engines.e5_tokenizer import bundled_tokenizer

    tokenizer = bundled_tokenizer(tmp_path)
    short = pair_windows(tokenizer, "When?", "Offices", "Larkspur opened its Austin office in 2019.")
    assert short == [pair_ids(tokenizer, "When?", "Offices", "Larkspur opened its Austin office in 2019.")]
    long_unit = " ".join(f"clause {i} of a long sentence," for i in range(40)) + " and it closed in 2031."
    windows = pair_windows(tokenizer, "When did it close?", "Offices", long_unit)
    assert 1 < len(windows) <= MAX_WINDOWS and all(len(w) <= MAX_TOKENS for w in windows)
    tail = tokenizer.ids("2031.", False)[-2:]
    assert any(w[-3:-1] == tail for w in windows[-1:])  # the last window ends where the unit does
    huge = pair_windows(tokenizer, "When?", "", "word " * 20_000)
    assert len(huge) == MAX_WINDOWS


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

    def stated_by(self, question, units):
        self.asked.append((question, units))
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict, 0.9 if self.verdict else 0.1


def _write(judge, question: str = "When did Larkspur open its Austin office?", multihop: bool = False,
           passages: list[Passage] | None = None):
    writer = AnswerWriter(searcher=None, similarity=None, unknown_names=False, judge=judge)
    decision = RouteDecision("multihop" if multihop else "local", 1.0, "forced", "forced")
    return writer.write("t", ["public"], Question(question), passages or _passages(), decision, None, partial=False,
                        multihop=multihop)


def test_the_writer_withholds_what_the_judge_rejects_and_quotes_the_sentence():
    judge = _Judge(False)
    answer = _write(judge)
    assert judge.asked == [("When did Larkspur open its Austin office?",
                            [("Larkspur offices", "Larkspur opened its Austin office in 2019.")])]
    assert answer.no_answer and answer.offline
    assert '"Larkspur opened its Austin office in 2019."' in answer.answer
    assert answer.trace["judge"] == {"probability": 0.1, "states": False} and "2019" in answer.trace["withheld"]
    kept = _write(_Judge(True))
    assert not kept.no_answer and "2019" in kept.answer and kept.trace["judge"]["states"]


def test_a_table_row_is_judged_with_its_header_as_the_answer_shows_it():
    # The judge was taught rows written "Field: value; ..."; a bare "| Austin | 2019 |" hides which column is
    # the year asked for.
    table = "| Office | Opened | Staff |\n|---|---|---|\n| Austin | 2019 | 40 |\n| Berlin | 2021 | 12 |"
    judge = _Judge(True)
    _write(judge, "When did the Austin office open?", passages=[Passage(1, "offices.md", "Larkspur offices", "", table)])
    (question, units), = judge.asked
    assert ("Larkspur offices", "Office: Austin; Opened: 2019; Staff: 40") in units


def test_an_answer_stands_when_any_unit_it_quotes_states_the_answer(judge):
    title, stated = "Founders", "Larkspur was founded by Maria Chen and Tom Reyes in 2009."
    aside = "The Berlin office hosts the support team."
    question = "Who founded Larkspur?"
    both, best = judge.stated_by(question, [(title, aside), (title, stated)])
    assert both and best == judge.states(question, title, stated)[1]
    assert judge.states(question, title, aside)[1] < best


def test_a_judge_that_fails_leaves_the_answer_standing_and_says_so():
    answer = _write(_Judge(RuntimeError("onnxruntime: bad allocation")))
    assert not answer.no_answer and "2019" in answer.answer
    assert answer.errors == ["relation judge: RuntimeError"] and "judge" not in answer.trace


def test_a_multi_hop_answer_is_not_judged():
    judge = _Judge(False)
    _write(judge, "Which office did Larkspur open in 2019, and who leads it?", multihop=True)
    assert judge.asked == []
