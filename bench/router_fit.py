"""Fitting the learned router (pure numpy, no I/O): softmax regression, calibration, the low-confidence cut.

Every step is deterministic: Newton's method from zero on a convex loss has one optimum, folds come
from a fixed seed, and ties resolve to the first candidate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEED = 20250611
FOLDS = 5
L2_GRID = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
THRESHOLD_GRID = tuple(round(0.34 + 0.01 * i, 2) for i in range(57))  # 0.34 .. 0.90
# What a wrong route costs, relative to a wrong local answer (rows: true route, columns: taken route;
# order local, global, multihop). A local answer to a global or multi-hop question still returns the
# passages nearest the question and points at the better route; a global answer to a factual question
# comes from community summaries that rarely hold the fact, and a multi-hop one spends several searches.
COST = np.array([[0.0, 2.0, 2.0],
                 [1.0, 0.0, 1.0],
                 [1.0, 1.0, 0.0]])


@dataclass(frozen=True)
class Softmax:
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray  # (features, classes)
    bias: np.ndarray

    def logits(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.means) / self.scales) @ self.weights + self.bias


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    odds = np.exp(shifted)
    return odds / odds.sum(axis=1, keepdims=True)


def fit_softmax(x: np.ndarray, y: np.ndarray, classes: int, l2: float, iterations: int = 50) -> Softmax:
    """Multinomial logistic regression on standardised features: minimises the summed cross-entropy
    plus l2 / 2 * |weights|^2 (the bias is not shrunk) by Newton's method."""
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales < 1e-9] = 1.0  # a constant column (a cue that never fired here) carries no weight
    z = np.hstack([(x - means) / scales, np.ones((len(x), 1))])
    n, d = z.shape
    target = np.eye(classes)[y]
    shrink = np.full(d, l2)
    shrink[-1] = 1e-6  # the bias: keeps the Hessian invertible without pulling the class priors
    w = np.zeros((d, classes))

    def objective(w: np.ndarray) -> float:
        logits = z @ w
        top = logits.max(axis=1)
        log_total = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        return float((log_total - logits[np.arange(n), y]).sum() + 0.5 * (shrink[:, None] * w * w).sum())

    for _ in range(iterations):
        p = softmax(z @ w)
        grad = (z.T @ (p - target) + shrink[:, None] * w).ravel(order="F")
        hess = np.empty((d * classes, d * classes))
        for a in range(classes):
            for b in range(a, classes):
                curvature = p[:, a] * ((a == b) - p[:, b])
                block = (z.T * curvature) @ z
                if a == b:
                    block += np.diag(shrink)
                hess[a * d:(a + 1) * d, b * d:(b + 1) * d] = block
                hess[b * d:(b + 1) * d, a * d:(a + 1) * d] = block.T
        step = np.linalg.solve(hess, grad).reshape((d, classes), order="F")
        before, scale = objective(w), 1.0
        while scale > 1e-4 and objective(w - scale * step) > before:  # damped: never climb
            scale /= 2
        w -= scale * step
        if np.abs(scale * step).max() < 1e-7:
            break
    return Softmax(means, scales, w[:-1], w[-1])


def folds_of(n: int, folds: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """Fold number of each of n rows: a fixed permutation, so reruns split alike."""
    order = np.random.default_rng(seed).permutation(n)
    fold = np.empty(n, dtype=int)
    fold[order] = np.arange(n) % folds
    return fold


def out_of_fold_logits(x: np.ndarray, y: np.ndarray, classes: int, l2: float, fold: np.ndarray) -> np.ndarray:
    logits = np.empty((len(x), classes))
    for k in np.unique(fold):
        held = fold == k
        logits[held] = fit_softmax(x[~held], y[~held], classes, l2).logits(x[held])
    return logits


def question_losses(logits: np.ndarray, y: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    p = softmax(logits / temperature)
    return -np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None))


def log_loss(logits: np.ndarray, y: np.ndarray, temperature: float = 1.0) -> float:
    return float(question_losses(logits, y, temperature).mean())


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The T minimising held-out log-loss of softmax(logits / T): temperature scaling, which keeps the
    argmax and makes the probabilities calibrated. Golden-section search over log T (the loss is
    unimodal in T)."""
    lo, hi = np.log(0.05), np.log(20.0)
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if log_loss(logits, y, np.exp(a)) <= log_loss(logits, y, np.exp(b)):
            hi = b
        else:
            lo = a
    return float(np.exp((lo + hi) / 2))


def routes_taken(p: np.ndarray, threshold: float) -> np.ndarray:
    """The argmax, or class 0 (local) where the best probability is under `threshold`."""
    best = p.argmax(axis=1)
    return np.where(p.max(axis=1) >= threshold, best, 0)


def mean_cost(p: np.ndarray, y: np.ndarray, threshold: float) -> float:
    return float(COST[y, routes_taken(p, threshold)].mean())


def choose_threshold(p: np.ndarray, y: np.ndarray) -> float:
    """The lowest threshold of THRESHOLD_GRID with the least mean COST on held-out probabilities."""
    costs = [mean_cost(p, y, t) for t in THRESHOLD_GRID]
    return THRESHOLD_GRID[int(np.argmin(costs))]


def expected_calibration_error(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Mean |accuracy - confidence| over equal-width confidence bins, weighted by their size."""
    confidence, hit = p.max(axis=1), p.argmax(axis=1) == y
    edges = np.linspace(0, 1, bins + 1)
    index = np.clip(np.digitize(confidence, edges[1:-1]), 0, bins - 1)
    return float(sum(abs(hit[index == b].mean() - confidence[index == b].mean()) * (index == b).mean()
                     for b in range(bins) if (index == b).any()))


@dataclass(frozen=True)
class Choice:
    """Hyperparameters chosen by cross-validation on one training set, with what the folds measured."""
    l2: float
    temperature: float
    threshold: float
    report: dict


def choose_hyperparameters(x: np.ndarray, y: np.ndarray, classes: int) -> Choice:
    """L2 by the one-standard-error rule over FOLDS folds: the strongest L2 whose held-out log-loss is
    within one standard error of the least. The questions the router meets are written by other people
    for other corpora, so among equally good fits it takes the smoothest. Then the temperature and the
    low-confidence threshold, fitted on that L2's held-out predictions."""
    fold = folds_of(len(x))
    held = {l2: out_of_fold_logits(x, y, classes, l2, fold) for l2 in L2_GRID}
    losses = {l2: question_losses(logits, y) for l2, logits in held.items()}
    best = min(L2_GRID, key=lambda value: losses[value].mean())
    bound = losses[best].mean() + losses[best].std() / np.sqrt(len(y))
    l2 = max(value for value in L2_GRID if losses[value].mean() <= bound)
    temperature = fit_temperature(held[l2], y)
    p = softmax(held[l2] / temperature)
    threshold = choose_threshold(p, y)
    report = {"folds": FOLDS, "seed": SEED, "log_loss_by_l2": {str(k): round(float(v.mean()), 4) for k, v in losses.items()},
              "accuracy": round(float((p.argmax(axis=1) == y).mean()), 4),
              "accuracy_with_fallback": round(float((routes_taken(p, threshold) == y).mean()), 4),
              "fallback_rate": round(float((p.max(axis=1) < threshold).mean()), 4),
              "log_loss_calibrated": round(log_loss(held[l2], y, temperature), 4),
              "ece_before": round(expected_calibration_error(softmax(held[l2]), y), 4),
              "ece_calibrated": round(expected_calibration_error(p, y), 4),
              "mean_cost": round(mean_cost(p, y, threshold), 4)}
    return Choice(l2, temperature, threshold, report)
