"""The reader's fit (bench/train_reader.py): every dataset weighs the same, in the logistic fit and in
the threshold's 5% of right answers, so a corpus with hundreds of questions cannot set either alone."""
from __future__ import annotations

import numpy as np
import pytest

from bench.train_reader import dataset_weights, fit_logistic, pick_threshold

pytestmark = pytest.mark.unit


def test_every_dataset_weighs_the_same_and_the_weights_average_one():
    w = dataset_weights(["big"] * 30 + ["small"] * 10)
    assert w[:30].sum() == pytest.approx(w[30:].sum())
    assert w.mean() == pytest.approx(1.0)
    assert dataset_weights([]).size == 0


def test_the_threshold_withholds_five_percent_of_each_datasets_weight_not_of_the_pooled_count():
    assert pick_threshold([float(i) for i in range(100)], ["a"] * 100) == 5.0  # one dataset: the plain rule
    # the small dataset's 20 low scores are half the weight: 2 of them (5% of all) fall below the threshold
    scores = [float(i) for i in range(20)] + [100.0 + i for i in range(80)]
    threshold = pick_threshold(scores, ["small"] * 20 + ["big"] * 80)
    assert threshold == 2.0
    assert pick_threshold([], []) == 0.0


def test_a_weighted_row_counts_as_that_many_copies():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(60, 2))
    y = (x[:, 0] + rng.normal(scale=0.8, size=60) > 0).astype(float)
    counts = rng.integers(1, 4, size=60)
    weighted = fit_logistic(x, y, weights=counts.astype(float))
    copied = fit_logistic(np.repeat(x, counts, axis=0), np.repeat(y, counts))
    assert np.allclose(weighted[0], copied[0], atol=1e-6) and weighted[1] == pytest.approx(copied[1], abs=1e-6)
