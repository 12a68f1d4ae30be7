"""HippoRAG's recall@5 beside the all-gold evidence recall (evaluation/metrics.py)."""
from __future__ import annotations

import pytest

from evaluation.metrics import hipporag_recall_at_k, score_query, summarise


def test_recall_at_5_is_the_share_of_gold_passages_in_the_top_5():
    gold = {"p1", "p2", "p3", "p4"}
    assert hipporag_recall_at_k(["p1", "x", "p2", "y", "z", "p3"], gold) == 0.5  # p3 is 6th
    assert hipporag_recall_at_k(["p1", "p2", "p3", "p4"], gold) == 1.0
    assert hipporag_recall_at_k([], gold) == 0.0
    assert hipporag_recall_at_k(["p1", "x"], gold, k=1) == 0.25
    with pytest.raises(ValueError):
        hipporag_recall_at_k(["p1"], set())


def test_recall_at_5_is_averaged_over_questions_at_5_whatever_k_beside_evidence_recall():
    # two 2-gold questions: one finds both within 5 (but one only at rank 5), one finds one of two
    a = score_query("a", ["g1", "x", "y", "z", "g2", "w"], {"g1": 1, "g2": 1}, 10, multi_gold=True)
    b = score_query("b", ["h1", "x", "y", "z", "w", "h2"], {"h1": 1, "h2": 1}, 10, multi_gold=True)
    assert (a.recall_at_5, b.recall_at_5) == (1.0, 0.5)
    assert (a.evidence_recall, b.evidence_recall) == (1.0, 1.0)  # at k=10 both have all their gold
    s = summarise([a, b])
    assert s["recall_at_5"] == 0.75 and s["evidence_recall"] == 1.0
