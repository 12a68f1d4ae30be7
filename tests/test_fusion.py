"""Fusion of the search legs (vector.search.fusion): pure, no database."""
from __future__ import annotations

import math
import random

import pytest

from vector.search.fusion import DEFAULT_FUSION, DENSE_WEIGHT, FUSIONS, rrf, zscore_fusion, zscores
from vector.search.rerank.features import FEATURE_NAMES, extract
from vector.search.hybrid import Candidate, HybridSearcher

R15 = math.sqrt(1.5)  # z of the ends of three evenly spaced scores (population standard deviation)


def ids(fused):
    return [i for i, _ in fused]


def test_defaults():
    assert DEFAULT_FUSION == "zscore" and set(FUSIONS) == {"zscore", "rrf"} and DENSE_WEIGHT == 0.6


def test_zscores_hand_computed():
    z = zscores([(1, 0.9), (2, 0.8), (3, 0.7)])  # mean 0.8, sd sqrt(0.02 / 3)
    assert z == pytest.approx({1: R15, 2: 0.0, 3: -R15})
    assert zscores([(3, 10.0), (4, 4.0)]) == {3: 1.0, 4: -1.0}  # mean 7, sd 3
    assert zscores([]) == {}
    assert zscores([(8, 5.0)]) == {8: 0.0} and zscores([(1, 2.0), (2, 2.0)]) == {1: 0.0, 2: 0.0}  # no spread


def test_zscore_fusion_two_legs_hand_computed():
    vector = [(1, 0.9), (2, 0.8), (3, 0.7)]
    fts = [(3, 10.0), (4, 4.0)]
    fused = zscore_fusion([vector, fts], [0.6, 0.4])
    # a chunk a leg did not return counts at that leg's lowest z: -1 for fts, -sqrt(1.5) for vector
    expected = {1: 0.6 * R15 - 0.4, 2: -0.4, 3: -0.6 * R15 + 0.4, 4: -0.6 * R15 - 0.4}
    assert ids(fused) == [1, 3, 2, 4]
    assert dict(fused) == pytest.approx(expected)


def test_zscore_fusion_weights_move_the_order():
    vector = [(1, 0.9), (2, 0.8), (3, 0.7)]
    fts = [(3, 10.0), (4, 4.0)]
    assert ids(zscore_fusion([vector, fts], [1.0, 0.0]))[:3] == [1, 2, 3]  # the vector leg alone
    assert ids(zscore_fusion([vector, fts], [0.0, 1.0]))[0] == 3  # the full-text leg alone
    assert ids(zscore_fusion([vector, fts], [0.2, 0.8])) == [3, 1, 2, 4]


def test_zscore_fusion_ignores_each_legs_scale():
    vector = [(1, 0.91), (2, 0.84), (5, 0.83), (3, 0.7)]
    fts = [(3, 12.0), (4, 4.5), (1, 3.0)]
    rescaled = [(i, 100 * s - 7) for i, s in fts]  # a BM25 leg with other parameters: same shape
    a, b = zscore_fusion([vector, fts], [0.6, 0.4]), zscore_fusion([vector, rescaled], [0.6, 0.4])
    assert ids(a) == ids(b) and dict(a) == pytest.approx(dict(b))


def test_zscore_fusion_ties_are_broken_by_id():
    fused = zscore_fusion([[(7, 2.0), (5, 1.0)], [(5, 2.0), (7, 1.0)]], [0.5, 0.5])
    assert fused == [(5, 0.0), (7, 0.0)]
    # 4 and 9: lowest in the vector leg, absent from full text; 6: lowest in full text, absent from
    # the vector leg; so all three sit at both legs' floors
    fused = zscore_fusion([[(9, 1.0), (4, 1.0), (2, 3.0)], [(2, 5.0), (6, 1.0)]], [0.6, 0.4])
    assert ids(fused) == [2, 4, 6, 9] and fused[1][1] == fused[2][1] == fused[3][1]


def test_zscore_fusion_is_deterministic_and_order_free_within_a_leg():
    rng = random.Random(7)
    vector = [(i, rng.uniform(0.7, 0.9)) for i in range(40)]
    fts = [(i, rng.uniform(0.0, 30.0)) for i in range(20, 70)]
    first = zscore_fusion([vector, fts], [0.6, 0.4])
    for _ in range(5):
        shuffled_v, shuffled_f = vector[:], fts[:]
        rng.shuffle(shuffled_v)
        rng.shuffle(shuffled_f)
        assert zscore_fusion([shuffled_v, shuffled_f], [0.6, 0.4]) == first
    assert len(first) == 70 and len(set(ids(first))) == 70


def test_zscore_fusion_with_a_leg_missing():
    vector = [(2, 0.9), (1, 0.5)]
    fused = zscore_fusion([vector, []], [0.6, 0.4])  # a failed leg adds nothing
    assert ids(fused) == [2, 1] and dict(fused) == pytest.approx({2: 0.6, 1: -0.6})
    assert ids(zscore_fusion([[], [(3, 1.0), (8, 4.0)]], [0.6, 0.4])) == [8, 3]
    assert zscore_fusion([[], []], [0.6, 0.4]) == [] and zscore_fusion([], []) == []


def test_zscore_fusion_counts_a_repeated_id_at_its_first_score():
    fused = zscore_fusion([[(4, 3.0), (4, 1.0), (1, 2.0)]], [1.0])
    assert fused == [(4, 1.0), (1, -1.0)]


@pytest.mark.parametrize("legs, weights", [
    ([[(1, 1.0)]], [0.5, 0.5]),  # one weight per leg
    ([[(1, 1.0)], [(2, 1.0)]], [0.5, -0.1]),
    ([[(1, 1.0)], [(2, 1.0)]], [0.5, float("nan")]),
    ([[(1, float("nan"))]], [1.0]),
    ([[(1, float("inf")), (2, 1.0)]], [1.0]),
])
def test_zscore_fusion_rejects_bad_input(legs, weights):
    with pytest.raises(ValueError):
        zscore_fusion(legs, weights)


def test_rrf_hand_computed_and_ties_by_id():
    fused = rrf([[1, 2, 3], [3, 1, 4]], k=60)
    assert ids(fused) == [1, 3, 2, 4]
    assert dict(fused) == pytest.approx({1: 1 / 61 + 1 / 62, 3: 1 / 63 + 1 / 61, 2: 1 / 62, 4: 1 / 63})
    assert ids(rrf([[7, 2], [2, 7]])) == [2, 7]
    with pytest.raises(ValueError):
        rrf([[1]], k=-1)


def test_reranker_rrf_feature_comes_from_the_leg_ranks_not_the_fused_score():
    """The offline reranker was fitted on RRF-fused lists; its `rrf` feature must mean the same
    under z-score fusion, so it is computed from the leg ranks."""
    def cand(rrf_score):
        return Candidate(1, "d1", "T", "", "text", "english", 1, 0.9, 3, 12.0, 1, rrf_score, rrf_score)

    col = FEATURE_NAMES.index("rrf")
    a, b = extract("text", [cand(1.7)])[0, col], extract("text", [cand(-0.3)])[0, col]
    assert a == b == pytest.approx((1 / 61 + 1 / 63) * 61 / 2)
    only_vector = Candidate(2, "d2", "T", "", "text", "english", 2, 0.8, None, None, 1, 0.0, 0.0)
    assert extract("text", [only_vector])[0, col] == pytest.approx(61 / 62 / 2)


def test_searcher_fuses_by_leg_name_and_falls_back_to_rrf_on_a_non_finite_score():
    s = HybridSearcher(None, None)  # _fuse touches neither the database nor the embedder
    try:
        vector, fts = [(1, 0.9), (2, 0.5), (5, 0.4)], [(2, 3.0), (3, 1.0)]
        expected = zscore_fusion([vector, fts], [DENSE_WEIGHT, 1 - DENSE_WEIGHT])
        assert s._fuse({"vector": vector, "fts": fts}, {}) == expected
        assert s._fuse({"fts": fts, "vector": vector}, {}) == expected  # weights follow the leg, not the position
        assert ids(s._fuse({"vector": [(5, 0.2), (4, 0.9)]}, {})) == [5, 4]  # one leg: as it ranked
        trace: dict = {}
        broken = {"vector": [(1, float("nan")), (2, 0.5)], "fts": fts}
        assert s._fuse(broken, trace) == rrf([[1, 2], [2, 3]]) and trace["fusion"].startswith("rrf")
    finally:
        s.close()
    s = HybridSearcher(None, None, fusion="rrf", rrf_k=5)
    try:
        assert s._fuse({"vector": [(1, 0.9), (2, 0.5)], "fts": [(2, 3.0), (3, 1.0)]}, {}) == rrf([[1, 2], [2, 3]], k=5)
    finally:
        s.close()
