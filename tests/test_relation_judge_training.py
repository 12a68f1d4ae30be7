"""The relation judge's training pairs, cut and leave-one-dataset-out report (bench/train_relation_judge.py): the cut
withholds JUDGE_BUDGET of the right answers the route shows, each dataset weighing the same, and the
report judges each dataset with the cut the others give."""
from __future__ import annotations

import pytest

from bench.relation_judge_validation import JUDGE_BUDGET, cut, report

pytestmark = pytest.mark.unit


def _right(dataset: str, logit: float) -> dict:
    return {"dataset": dataset, "variant": "asked", "negative": False, "right": True, "shown": True, "logit": logit}


def test_the_cut_withholds_the_budget_of_each_datasets_weight_not_of_the_pooled_count():
    assert JUDGE_BUDGET == 0.02
    # one dataset of 100: the 2 lowest fall below the cut
    assert cut([_right("a", float(i)) for i in range(100)]) == 2.0
    # a small dataset's 25 low logits are half the weight: 4% of its own (1 of them) is 2% of all
    small = [_right("small", float(i)) for i in range(25)]
    big = [_right("big", 100.0 + i) for i in range(75)]
    assert cut(small + big) == 1.0


def test_the_report_judges_each_dataset_with_the_others_cut_and_never_unwithholds():
    outcomes = [_right("a", float(i)) for i in range(50)] + [_right("b", float(i)) for i in range(50)]
    outcomes += [{"dataset": "a", "variant": "asked", "negative": True, "right": False, "shown": True, "logit": -5.0},
                 {"dataset": "a", "variant": "asked", "negative": True, "right": False, "shown": False, "logit": 40.0},
                 {"dataset": "b", "variant": "removed", "negative": True, "right": False, "shown": True, "logit": -5.0}]
    result = report(outcomes)
    a = result["datasets"]["a"]
    assert a["cut_from_others"] == 1.0  # b's 50 right answers: the lowest one falls below
    assert a["route"] == {"negatives_withheld": 1, "negatives": 2, "right_withheld": 0, "right": 50}
    assert a["route_and_judge"] == {"negatives_withheld": 2, "negatives": 2, "right_withheld": 1, "right": 50}
    assert result["datasets"]["b"]["route"]["negatives"] == 0  # only asked questions are counted
    assert result["totals"]["route_and_judge"]["right_withheld"] == 2


def test_training_pairs_take_the_named_files_and_mark_each_unanswerable_questions_distractor():
    from collections import Counter

    from bench.train_relation_judge import training_pairs

    pairs = training_pairs({"h9"})
    assert pairs and {p["helper"] for p in pairs} == {"h9"}
    positives = Counter(p["qid"] for p in pairs if p["label"])
    distractors = Counter(p["qid"] for p in pairs if p["distractor"])
    answerable = {p["qid"] for p in pairs if p["answerable"]}
    assert set(positives) == answerable and set(positives.values()) == {1}
    # every unanswerable question has exactly one distractor, never a positive
    assert set(distractors) == {p["qid"] for p in pairs} - answerable and set(distractors.values()) == {1}
    assert not any(p["label"] for p in pairs if p["distractor"])


class _TextTokenizer:
    """Keeps the text each pair is made of, so a test can read which sentence a pair holds."""
    bos, eos = 0, 2

    def __init__(self):
        self.texts: list[str] = []

    def ids(self, text: str, query: bool) -> list[int]:
        if not query:
            self.texts.append(text)
        return [len(self.texts)]


def test_cross_passage_pairs_are_the_other_passages_sentences_that_share_the_most_words_all_negative():
    from bench.train_relation_judge import _cross_passage_pairs

    passages = [
        {"title": "Alder Bank", "sentences": ["Alder Bank opened its Lisbon branch in 2019.", "Alder Bank has 40 staff."],
         "questions": [{"qid": "a1", "answerable": True, "question": "When did Alder Bank open its Lisbon branch?"}]},
        {"title": "Birch Bank", "sentences": ["Birch Bank employs 12 tellers.", "Birch Bank opened its Lisbon branch in 2015."],
         "questions": [{"qid": "b1", "answerable": False, "question": "Who founded Birch Bank?"}]},
        {"title": "Cedar Bank", "sentences": ["The bank lends to farms.", "Cedar Bank was founded by Ana Reyes."],
         "questions": []},
    ]
    tokenizer = _TextTokenizer()
    pairs = _cross_passage_pairs(passages, "h0", 1, tokenizer)
    assert [p["qid"] for p in pairs] == ["a1", "b1"]
    assert all(p["label"] == 0.0 and not p["distractor"] and p["features"] == "h0.cross1" for p in pairs)
    # the question about Alder's Lisbon branch meets Birch's Lisbon sentence, never one of its own passage;
    # "who founded Birch Bank" meets Cedar Bank's founding sentence (two shared words, against one of the rest)
    assert tokenizer.texts == ["Birch Bank: Birch Bank opened its Lisbon branch in 2015.",
                               "Cedar Bank: Cedar Bank was founded by Ana Reyes."]


def test_with_every_layer_adapted_the_states_are_what_the_encoder_feeds_its_first_layer():
    # `--layers 12` trains from the input embeddings: they must be normed as the graph norms them ("h0")
    from dataclasses import replace

    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from bench.train_relation_judge import _embedding_norm, lower_states
    from core.embedding_engines.e5_graph import build_model
    from core.embedding_engines.e5_weights import InputEmbeddings, bundled_image

    weights = bundled_image()
    graph = build_model(replace(weights, layers=1), "fp32")
    graph.graph.output.append(helper.make_tensor_value_info("h0", TensorProto.FLOAT, None))
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    embedded = InputEmbeddings(weights)([[0, 1000, 2000, 3000, 2]])
    fed = session.run(["h0"], {"embeddings": embedded})[0][0]
    assert np.abs(_embedding_norm(embedded[0], weights) - fed).max() < 1e-4
    assert np.abs(embedded[0] - fed).max() > 0.1  # the raw embeddings are not what the first layer reads
    (states,) = lower_states([{"features": "unused", "ids": [0, 1000, 2000, 3000, 2]}], 0)
    assert np.abs(states.astype(np.float32) - fed).max() < 1e-2  # float16, as the fit keeps them


@pytest.mark.parametrize("flag", [["--layers", "13"], ["--layers", "0"], ["--epochs", "0"]])
def test_a_fit_asked_for_impossible_layers_or_epochs_stops_before_it_trains(flag, monkeypatch, capsys):
    from bench import train_relation_judge

    monkeypatch.setattr("sys.argv", ["train_relation_judge", "--fit", *flag])
    with pytest.raises(SystemExit) as stopped:
        train_relation_judge.main()
    assert stopped.value.code == 2
    assert flag[0] in capsys.readouterr().err
