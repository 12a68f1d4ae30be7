"""The learned offline router: calibrated probabilities of local / global / multihop for a question.

A multinomial logistic regression over the question's embedding (the vector the search computes for
the same question, so routing costs no second model call) and the cue features of
router/route_features.py. Weights, feature names, temperature and the low-confidence threshold live
in route_model.json, written by `python -m bench.train_router`; a file that does not match the code
raises here rather than routing with misaligned weights.

Below the threshold the router takes the local route, the cheapest to be wrong: one hybrid search
still returns the passages closest to the question, while a wrong global route answers a factual
question from community summaries and a wrong multi-hop route spends several searches. The trace
says so and names the route that may answer better.
"""
from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from router.classify import HeuristicClassifier
from router.route_features import CUE_FEATURES, feature_row
from answers.types import ROUTES, RouteDecision

log = logging.getLogger(__name__)
MODEL_PATH = Path(__file__).with_name("route_model.json")


class RouteModelError(ValueError):
    """The weights file is missing, unreadable or does not match the code."""


@dataclass(frozen=True)
class RouteModel:
    """P(route) = softmax(((x - means) / scales) @ weights + bias) / temperature) over ROUTES."""

    embedder: str  # model id of the vectors it was trained on
    dimension: int
    cue_features: tuple[str, ...]
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray  # (features, routes)
    bias: np.ndarray  # (routes,)
    temperature: float  # fitted on held-out predictions so that the probabilities are calibrated
    low_confidence: float  # default threshold (see the module docstring)
    provenance: dict

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """(n, routes) for (n, features) rows; each row sums to 1."""
        logits = (((rows - self.means) / self.scales) @ self.weights + self.bias) / self.temperature
        logits -= logits.max(axis=-1, keepdims=True)
        odds = np.exp(logits)
        return odds / odds.sum(axis=-1, keepdims=True)

    def to_dict(self) -> dict:
        def numbers(a: np.ndarray) -> list:
            return np.round(a, 7).tolist()  # stable text: the same fit writes the same file

        return {"routes": list(ROUTES), "embedder": self.embedder, "dimension": self.dimension,
                "cue_features": list(self.cue_features), "means": numbers(self.means), "scales": numbers(self.scales),
                "weights": numbers(self.weights), "bias": numbers(self.bias),
                "temperature": round(self.temperature, 6), "low_confidence": round(self.low_confidence, 4),
                "provenance": self.provenance}

    @classmethod
    def from_dict(cls, data: dict) -> "RouteModel":
        try:
            model = cls(embedder=data["embedder"], dimension=int(data["dimension"]),
                        cue_features=tuple(data["cue_features"]), means=np.asarray(data["means"], dtype=np.float64),
                        scales=np.asarray(data["scales"], dtype=np.float64),
                        weights=np.asarray(data["weights"], dtype=np.float64),
                        bias=np.asarray(data["bias"], dtype=np.float64), temperature=float(data["temperature"]),
                        low_confidence=float(data["low_confidence"]), provenance=dict(data.get("provenance", {})))
        except (KeyError, TypeError, ValueError) as exc:
            raise RouteModelError(f"route model weights are incomplete: {exc}") from exc
        if tuple(data.get("routes", ())) != ROUTES:
            raise RouteModelError(f"route model is for routes {data.get('routes')}, the code has {list(ROUTES)}")
        if model.cue_features != CUE_FEATURES:
            raise RouteModelError("route model cue features differ from router/route_features.py: "
                                  "retrain with `python -m bench.train_router`")
        width = model.dimension + len(CUE_FEATURES)
        if model.means.shape != (width,) or model.scales.shape != (width,) or model.weights.shape != (width, len(ROUTES)):
            raise RouteModelError(f"route model arrays do not have {width} features")
        return model


@functools.lru_cache(maxsize=4)
def load_route_model(path: Path = MODEL_PATH) -> RouteModel:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RouteModelError(f"cannot read route model {path}: {exc}") from exc
    return RouteModel.from_dict(data)


class LearnedClassifier:
    """Routes by the model's probabilities; the heuristic supplies the cue features and stands in when
    the question cannot be embedded. Pure apart from `embed`, which the router shares with its search."""

    name = "learned"

    def __init__(self, model: RouteModel, embed: Callable[[str], np.ndarray], *, threshold: float | None = None,
                 heuristic: HeuristicClassifier | None = None):
        self.model, self.embed = model, embed
        self.threshold = model.low_confidence if threshold is None else threshold
        self.heuristic = heuristic or HeuristicClassifier()

    def classify(self, question: str) -> RouteDecision:
        cues = self.heuristic.classify(question)
        try:
            vector = self.embed(question)
        except Exception as exc:  # noqa: BLE001 - routing must not fail where the cue table can answer
            cues.features["learned_error"] = f"embedding failed: {type(exc).__name__}: {exc}"
            return cues
        return self.decide(question, vector, cues)

    def classify_vector(self, question: str, vector: np.ndarray) -> RouteDecision:
        """With the question's vector already computed (benchmarks, batch evaluation)."""
        return self.decide(question, vector, self.heuristic.classify(question))

    def decide(self, question: str, vector: np.ndarray, cues: RouteDecision) -> RouteDecision:
        p = self.model.probabilities(feature_row(question, vector, cues))
        probabilities = {route: round(float(value), 4) for route, value in zip(ROUTES, p)}
        best = ROUTES[int(np.argmax(p))]
        fired = sorted(cues.features["cues"].items(), key=lambda item: (-abs(item[1]), item[0]))
        features = {"probabilities": probabilities, "threshold": self.threshold, "low_confidence": None,
                    "cues": cues.features["cues"], "heuristic_route": cues.route,
                    "model": self.model.provenance.get("trained_on", "route_model.json")}
        cue_text = (f"cues: {', '.join(name for name, _ in fired)}" if fired
                    else "no cue fired, decided by the question's embedding")
        if p.max() >= self.threshold:  # unrounded: a threshold of 1 always falls back
            route, reason = best, f"{best}: learned classifier, p={probabilities[best]:.2f} ({cue_text})."
        else:
            alternative = max(("global", "multihop"), key=lambda r: probabilities[r])
            route = "local"
            features["low_confidence"] = {"best": best, "probability": probabilities[best],
                                          "may_answer_better": alternative}
            reason = (f"local: low confidence (best {best}, p={probabilities[best]:.2f} < {self.threshold:.2f}), so the "
                      f"route cheapest to be wrong; the {alternative} route may answer better ({cue_text}).")
        return RouteDecision(route=route, confidence=probabilities[route], reason=reason, classifier=self.name,
                             features=features)


def offline_classifier(settings, embedder) -> HeuristicClassifier | LearnedClassifier:
    """The learned model when it is switched on and `embedder` is the model it was trained on (its
    vectors mean nothing to weights fitted on another model's); otherwise the cue table."""
    if not settings.router_learned_classifier:
        return HeuristicClassifier()
    try:
        model = load_route_model()
    except RouteModelError as exc:
        log.warning("learned router unavailable, routing by the cue table: %s", exc)
        return HeuristicClassifier()
    if embedder.model_id != model.embedder:
        log.info("the learned router reads %s vectors and the search embeds with %s: routing by the cue table",
                 model.embedder, embedder.model_id)
        return HeuristicClassifier()
    return LearnedClassifier(model, embedder.embed_query, threshold=settings.router_low_confidence)
