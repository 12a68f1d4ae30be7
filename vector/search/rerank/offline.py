"""The offline reranker: a logistic model over `vector.search.rerank.features`, fitted by `bench/train_reranker.py`
with `fit_weights` and `platt` below (pure numpy, no I/O).

No cross-encoder ships in any package, so the default reranker is a small learning-to-rank model:
a linear function of standardised features, trained listwise on the dev split of ../shared/data,
then scaled so that its sigmoid is a calibrated probability of relevance.
The weights, the features they use and where they came from live in `offline_weights.json`; a
file that does not match the code raises here rather than ranking with misaligned weights.

A candidate written in another script than the question (a Russian page for an English question)
shares no stem with it, so coverage and word pairs are read through a general English-Russian
dictionary (core/text/lexicon; `features.extract`), as the full-text leg finds such a page by the
question's translations (vector/search/fulltext.py): one model reads every candidate, and one
threshold asks the same probability of each. A second model over only the vector features, used for
such pages until the dictionary came, kept 70% of xl_written's gold pages at that cut against 52%
(docs/evaluation.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vector.search.rerank.contract import RerankError
from vector.search.rerank.cut import OTHER_SCRIPT_SHARE
from vector.search.rerank.features import FEATURE_NAMES, extract
from vector.search.hybrid import Candidate, in_other_script

WEIGHTS_PATH = Path(__file__).with_name("offline_weights.json")


@dataclass(frozen=True)
class LinearModel:
    """P(relevant) = sigmoid(bias + sum_i weights_i * (x_i - means_i) / scales_i) over `features`."""

    features: tuple[str, ...]
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray
    bias: float

    def __post_init__(self) -> None:
        unknown = [f for f in self.features if f not in FEATURE_NAMES]
        if unknown:
            raise RerankError(f"offline reranker weights use unknown features {unknown}: "
                              "retrain with `python -m bench.train_reranker`")
        sizes = {len(self.features), len(self.means), len(self.scales), len(self.weights)}
        if len(sizes) != 1:
            raise RerankError("offline reranker weights: features, means, scales and weights differ in length")
        arrays = np.concatenate([self.means, self.scales, self.weights, [self.bias]])
        if not np.all(np.isfinite(arrays)) or np.any(self.scales <= 0):
            raise RerankError("offline reranker weights hold non-finite numbers or non-positive scales")

    @property
    def columns(self) -> list[int]:
        return [FEATURE_NAMES.index(f) for f in self.features]

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Scores before the sigmoid for a full feature matrix (FEATURE_NAMES columns)."""
        z = (x[:, self.columns] - self.means) / self.scales
        return z @ self.weights + self.bias

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-np.clip(self.logits(x), -50, 50)))

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "means": self.means.tolist(), "scales": self.scales.tolist(),
                "weights": self.weights.tolist(), "bias": self.bias}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LinearModel":
        try:
            return cls(tuple(data["features"]), np.asarray(data["means"], dtype=float),
                       np.asarray(data["scales"], dtype=float), np.asarray(data["weights"], dtype=float),
                       float(data["bias"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise RerankError(f"offline reranker weights are malformed ({exc}); retrain with "
                              "`python -m bench.train_reranker`") from exc


def _newton(grad_hess, dim: int) -> np.ndarray:
    """Minimise a smooth convex loss given its (gradient, Hessian) function."""
    beta = np.zeros(dim)
    for _ in range(50):
        grad, hess = grad_hess(beta)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-9:
            break
    return beta


def _logistic_terms(x: np.ndarray, weight: np.ndarray, beta: np.ndarray):
    """Gradient and Hessian of sum weight * log(1 + exp(-x @ beta))."""
    p = 1 / (1 + np.exp(np.clip(x @ beta, -50, 50)))  # sigmoid(-margin)
    return -(x.T @ (weight * p)), (x.T * (weight * p * (1 - p))) @ x + 1e-12 * np.eye(len(beta))


def fit_weights(lists: list[tuple[np.ndarray, np.ndarray, float]], pairs: np.ndarray, pair_weight: np.ndarray,
                l2: float) -> np.ndarray:
    """Weights minimising, for each (features, gains, weight) list, weight * the cross-entropy between
    softmax(features @ w) and gains / sum(gains) (ListNet: a loss on the whole ranking, as nDCG and
    MRR are), plus sum pair_weight * log(1 + exp(-pairs @ w)) (rows: better minus worse), plus
    l2 / 2 * |w|^2. Convex, so Newton's method finds the one optimum: training is deterministic."""
    sizes = np.array([len(g) for _, g, _ in lists])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    z = np.vstack([x for x, _, _ in lists])
    target = np.concatenate([g / g.sum() for _, g, _ in lists])
    list_weight = np.array([w for _, _, w in lists])
    row_weight = np.repeat(list_weight, sizes)

    def grad_hess(w: np.ndarray):
        s = z @ w
        e = np.exp(s - np.repeat(np.maximum.reduceat(s, starts), sizes))
        soft = e / np.repeat(np.add.reduceat(e, starts), sizes)
        mean_z = np.add.reduceat(z * soft[:, None], starts)  # per list: expected features under the softmax
        grad = z.T @ (row_weight * (soft - target)) + l2 * w
        hess = (z.T * (row_weight * soft)) @ z - (mean_z.T * list_weight) @ mean_z + l2 * np.eye(len(w))
        g_pairs, h_pairs = _logistic_terms(pairs, pair_weight, w)
        return grad + g_pairs, hess + h_pairs

    return _newton(grad_hess, z.shape[1])


def platt(scores: np.ndarray, positive: np.ndarray, weight: np.ndarray) -> tuple[float, float]:
    """(a, b) such that sigmoid(a * score + b) estimates P(positive): weighted logistic regression."""
    x = np.column_stack([scores, np.ones_like(scores)]) * np.where(positive, 1.0, -1.0)[:, None]
    a, b = _newton(lambda ab: _logistic_terms(x, weight, ab), 2)
    return float(a), float(b)


def load_weights(path: Path = WEIGHTS_PATH) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RerankError(f"cannot read offline reranker weights {path}: {exc}") from exc


class OfflineReranker:
    """Deterministic: equal scores are ordered by chunk id. A few milliseconds for 50 candidates."""

    name = "offline"
    # its word features read a page in the other script through the dictionary (vector/search/rerank/cut.py)
    other_script_share = OTHER_SCRIPT_SHARE

    def __init__(self, model: LinearModel | None = None, *, path: Path = WEIGHTS_PATH):
        data = {} if model is not None else load_weights(path)
        self.model = model or LinearModel.from_dict(data.get("model", {}))
        self.provenance: dict[str, Any] = data.get("provenance", {})
        # A cut calibrated on dev (see the provenance); the searcher decides whether to apply it.
        threshold = data.get("suggested_threshold")
        self.suggested_threshold = float(threshold) if threshold is not None else None

    def rerank(self, query: str, candidates: Sequence[Candidate], top_k: int) -> list[tuple[int, float]]:
        if not candidates or top_k <= 0:
            return []
        x = extract(query, candidates, in_other_script(query, candidates))
        # ordered by logit: probabilities of very strong candidates can round to the same 1.0
        logits, scores = self.model.logits(x), self.model.probabilities(x)
        order = sorted(range(len(candidates)), key=lambda i: (-logits[i], candidates[i].id))
        return [(i, float(scores[i])) for i in order[:top_k]]
