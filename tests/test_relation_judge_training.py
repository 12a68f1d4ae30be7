"""The relation judge's training pairs, cut and leave-one-dataset-out report (bench/train_relation_judge.py): the cut
withholds JUDGE_BUDGET of the right answers the route shows, each dataset weighing the same, and the
report judges each dataset with the cut the others give."""
from __future__ import annotations

import pytest

from bench.train_relation_judge import JUDGE_BUDGET, cut, report

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
