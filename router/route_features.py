"""What the learned router reads: the question embedding the search computes anyway, plus the cue table.

The cue table (router/question_cues.py, scored by router/classify.py) sees the FORM of a question
and fires on explicit words ("across all", "the director of", "Which is older, A or B?"); the
embedding places a question among questions of similar intent even when it names no cue word
("What narrative devices recur?"). The model weighs both: the numbers the heuristic already measured,
and the counts of the generic clause structures in router/question_structure.py (`STRUCTURES`: relative,
contact and participial clauses after any noun, described possessors and of-objects, a name inside a
clause, imperative overview requests, in English and Russian) that the heuristic does not score.
Nothing here is tuned to one corpus.
"""
from __future__ import annotations

import math

import numpy as np

from router.question_cues import CUES, CueText
from router.question_structure import STRUCTURES
from answers.types import RouteDecision

# Cues that router/classify.py adds beside the table (see `find_cues` and `premise_cues` there).
DERIVED_CUES = (
    "description used as an argument", "statement before the question", "question refers back to it",
    "statement with the wh-word in place", "two named things", "keyword query",
)
CUE_NAMES: tuple[str, ...] = tuple(cue.name for cue in CUES) + DERIVED_CUES
SUMMARY_FEATURES = ("global points", "comparison points", "bridge points", "penalty points",
                    "heuristic says global", "heuristic says multihop", "named entities (log)", "words (log)",
                    "ends with a question mark")
STRUCTURE_NAMES: tuple[str, ...] = tuple(s.name for s in STRUCTURES) + ("descriptions nested",)
CUE_FEATURES: tuple[str, ...] = (SUMMARY_FEATURES + tuple(f"cue: {name}" for name in CUE_NAMES)
                                 + tuple(f"structure: {name}" for name in STRUCTURE_NAMES))
_CUE_INDEX = {name: i for i, name in enumerate(CUE_NAMES)}
POINTS_CAP = 6.0  # a long chain of relational nouns is still one multi-hop question: bound its pull
COUNT_CAP = 3  # the same for clause counts
# the clauses that each describe an entity: two or more in one question nest one description in another
DESCRIBING = frozenset({"relative clause", "contact clause", "reduced passive clause", "described of-object",
                        "described possessor", "Russian relative clause", "Russian 'того, кто'",
                        "Russian participial phrase"})


def cue_features(question: str, heuristic: RouteDecision) -> np.ndarray:
    """The CUE_FEATURES row for a question from the heuristic's decision on it (float64)."""
    f = heuristic.features
    comparison, bridge = f["comparison_points"], f["bridge_points"]
    penalty = f["multihop_points"] - comparison - bridge
    summary = [
        min(f["global_points"], POINTS_CAP), min(comparison, POINTS_CAP), min(bridge, POINTS_CAP), penalty,
        float(heuristic.route == "global"), float(heuristic.route == "multihop"),
        math.log1p(f["entities"]), math.log1p(len(question.split())), float(question.rstrip().endswith("?")),
    ]
    cues = np.zeros(len(CUE_NAMES))
    for name, points in f["cues"].items():
        index = _CUE_INDEX.get(name)
        if index is not None:  # a cue added to the table after training carries no weight until retrained
            cues[index] = min(abs(points), POINTS_CAP)
    return np.concatenate([np.asarray(summary, dtype=np.float64), cues, structure_features(question)])


def structure_features(question: str) -> np.ndarray:
    """The STRUCTURE_NAMES counts, each capped at COUNT_CAP; the last is how many describing clauses."""
    q = CueText.of(question)
    counts = [min(s.count(q), COUNT_CAP) for s in STRUCTURES]
    nested = sum(c for s, c in zip(STRUCTURES, counts) if s.name in DESCRIBING)
    return np.asarray(counts + [min(nested, COUNT_CAP)], dtype=np.float64)


def feature_row(question: str, vector: np.ndarray, heuristic: RouteDecision) -> np.ndarray:
    """Embedding first, then the cue features: the column order the model's weights follow."""
    return np.concatenate([np.asarray(vector, dtype=np.float64).ravel(), cue_features(question, heuristic)])
