"""The learned reader: which candidate unit answers the question, and how sure the answer is.

The local answer's candidates (answers/local.py: units sharing the question's words, or of the asked
type) were ranked by a hand-weighted sum (answers/unit_scoring.Scorer.score). The reader ranks the
best of them by a logistic regression over features that do not name any question or corpus: the
lexical coverage the scorer measures, the asked type and whether the unit holds it, the unit's
closeness in meaning to the question (the search's e5 model, answers/unit_similarity.py), its
passage's search rank and calibrated reranker relevance, its position, length and script. Its
best unit answers. A second logistic regression, over that unit's absolute features and the first's
logit, fitted on the units the held-out folds chose, says whether the answer built on it is right;
its logit, Platt-scaled on held-out folds, is the answer's confidence. Below the
model's threshold (the highest that withholds at most 5% of the right answers of the held-out
folds, a rule fixed before any blind set was run) the answer is that the documents do not say.

Weights, feature names, calibration and threshold live in reader_model.json, written by
`python -m bench.train_reader` (the data and its provenance: bench/reader_data/README.md).
"""
from __future__ import annotations

import functools
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.text.script import script_name
from core.text.terms import normalise
from answers.units import Unit
from answers.unit_scoring import Scorer
from answers.expected_type import counts

log = logging.getLogger(__name__)
MODEL_PATH = Path(__file__).with_name("reader_model.json")
# the reader re-ranks at most this many candidates, the best by their words (and embeds only those)
POOL = 12

FEATURES = (
    "lex",  # share of the question (rarity-weighted stems, names twice) the unit's own words cover
    "context",  # the same with its passage's title and heading
    "bigram",  # share of the question's word pairs the unit holds in order
    "kind_asked",  # the question asks a date, number, amount, person or place
    "typed",  # the unit holds a value or name of that type the question does not
    "untyped",  # a type is asked and the unit holds none
    "counted",  # a "how many X" question: a number stands right before X
    "defines",  # a "what does X mean" question: the unit opens with the code X
    "inv_rank",  # 1 / the passage's search rank
    "relevance",  # the reranker's calibrated probability that the passage is relevant (0 when none)
    "has_relevance",
    "similarity",  # e5 cosine of the unit (as a passage) and the question (as a query)
    "similarity_gap",  # that cosine less the best among the pooled units
    "lex_gap",  # the word score less the best among the pooled units
    "first_in_passage",
    "position",  # log(1 + the unit's index in its passage)
    "length",  # log of the unit's characters
    "cut",  # the chunk cut the unit's start
    "anaphoric",  # the unit refers back
    "other_script",  # the unit is written in the other script than the question
    "names_share",  # share of the question's names the unit and its title cover
    "unit_confidence",  # the scorer's share of the question for the unit alone (answers/unit_scoring.confidence)
    "score",  # the hand-weighted score (answers/unit_scoring.Scorer.score): the rules' own ranking, as one feature
    "score_gap",  # that score less the best among the pooled units
    "pool_rank",  # 1 / (1 + the unit's place in the pool, best score first)
    "best_context",  # the best context coverage among the pooled units (the same for every unit of a question)
    "passages_cover",  # share of the question any passage covers, with its title: does the search hold it at all
    "names_missing",  # share of the question's names that no passage holds
    "identifier_missing",  # the question spells a code or identifier (ERR_2043, v4.3) the unit's document never holds
    "best_relevance",  # the highest calibrated relevance among the passages (0 when none)
    "relevance_gap",  # the unit's passage's relevance less that
)


def unit_rows(scorer: Scorer, pool: list[Unit], similarities: list[float]) -> np.ndarray:
    """The feature rows (FEATURES order) of the pooled units: deterministic for the same question,
    passages and similarities."""
    focus = scorer.focus
    lexes = [scorer.coverage(scorer.covered(u, with_title=False)) for u in pool]
    scores = [scorer.score(u) for u in pool]
    best_score = max(scores, default=0.0)
    contexts = [scorer.coverage(scorer.covered(u)) for u in pool]
    anywhere = set().union(*(scorer.covered(u) for u in scorer.all_units)) if scorer.all_units else set()
    passages_cover = scorer.coverage(anywhere)
    names_missing = len(focus.name_stems - anywhere) / len(focus.name_stems) if focus.name_stems else 0.0
    best_relevance = max((p.relevance or 0.0 for p in scorer.passages), default=0.0)
    documents: dict[str | None, str] = {}
    for p in scorer.passages:
        documents[p.doc_id] = documents.get(p.doc_id, "") + " " + normalise(f"{p.title or ''} {p.heading or ''} {p.text or ''}")
    identifiers = focus.identifiers
    best_lex = max(lexes, default=0.0)
    best_sim = max(similarities, default=0.0)
    names = focus.name_stems
    rows = []
    for rank, (u, lex, sim, score) in enumerate(zip(pool, lexes, similarities, scores)):
        covered = scorer.covered(u)
        pairs = set(zip(u.sequence, u.sequence[1:]))
        terms = focus.terms
        bigram = len(terms.bigrams & pairs) / len(terms.bigrams) if terms.bigrams else 0.0
        typed = bool(focus.kind) and scorer.typed(u)
        relevance = scorer.passages[u.passage - 1].relevance
        rows.append([
            lex, scorer.coverage(covered), bigram, float(bool(focus.kind)), float(typed),
            float(bool(focus.kind) and not typed),
            float(counts(u.text, focus.counted, focus.question_tokens)), float(scorer.about(u)),
            1.0 / u.passage, float(relevance or 0.0), float(relevance is not None),
            float(sim), float(sim - best_sim), float(lex - best_lex),
            float(u.position == 0), math.log1p(u.position), math.log(max(len(u.text), 1)),
            float(u.cut), float(u.anaphoric), float(script_name(u.text) != focus.script),
            (len(covered & names) / len(names)) if names else 1.0, scorer.confidence([u]),
            score, score - best_score, 1.0 / (1 + rank), max(contexts, default=0.0), passages_cover, names_missing,
            float(any(not pattern.search(documents[scorer.passages[u.passage - 1].doc_id]) for pattern in identifiers)),
            best_relevance, float(relevance or 0.0) - best_relevance,
        ])
    return np.asarray(rows, dtype=np.float64).reshape(len(pool), len(FEATURES))


# The answer's features: the absolute ones of the unit the ranker chose and of the question's passages
# (the ranker's relative features, its gaps and places, say nothing of whether any unit answers), and the
# ranker's logit.
ANSWER_FEATURES = ("lex", "context", "kind_asked", "typed", "untyped", "relevance", "similarity", "other_script",
                   "names_share", "unit_confidence", "score", "best_context", "passages_cover", "names_missing",
                   "identifier_missing", "best_relevance", "logit")
_ANSWER_COLUMNS = [FEATURES.index(f) for f in ANSWER_FEATURES[:-1]]


def answer_row(row: np.ndarray, logit: float) -> np.ndarray:
    """The answer model's input for the chosen unit's feature row and the ranker's logit for it."""
    return np.append(np.asarray(row, dtype=np.float64)[_ANSWER_COLUMNS], float(logit))


class ReaderModelError(ValueError):
    """The weights file is missing, unreadable or does not match the code."""


@dataclass(frozen=True)
class ReaderModel:
    """Two logistic regressions. The ranker: P(unit holds the answer) = sigmoid(((x - means) / scales)
    @ weights + bias) over FEATURES, whose best unit answers. The answer model: the same form over
    ANSWER_FEATURES of that unit (`answer_logit`), fitted on held-out folds' choices to say whether the
    answer built on it is right; its logit, Platt-scaled on the held-out folds, is the confidence."""

    features: tuple[str, ...]
    means: np.ndarray
    scales: np.ndarray
    weights: np.ndarray
    bias: float
    answer_means: np.ndarray
    answer_scales: np.ndarray
    answer_weights: np.ndarray
    answer_bias: float
    platt_a: float
    platt_b: float
    threshold: float  # on the calibrated confidence
    provenance: dict
    # which unit answers: "ranker" (the ranker's best) or "rules" (the hand-weighted scorer's, the ranker
    # and the answer model only saying how sure it is); the trainer picks by a rule fixed in advance
    chooser: str = "rules"

    def logits(self, rows: np.ndarray) -> np.ndarray:
        if rows.size == 0:
            return np.zeros(0)
        return ((rows - self.means) / self.scales) @ self.weights + self.bias

    def answer_logit(self, row: np.ndarray, logit: float) -> float:
        return float(((answer_row(row, logit) - self.answer_means) / self.answer_scales) @ self.answer_weights
                     + self.answer_bias)

    def confidence(self, answer_logit: float) -> float:
        """The calibrated probability that the answer is right; monotone increasing in the answer
        model's logit (platt_a > 0 is checked on load)."""
        z = self.platt_a * float(answer_logit) + self.platt_b
        return float(1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0))))

    def to_dict(self) -> dict:
        def numbers(a) -> list:
            return np.round(np.asarray(a, dtype=np.float64), 7).tolist()

        return {"features": list(self.features), "means": numbers(self.means), "scales": numbers(self.scales),
                "weights": numbers(self.weights), "bias": round(float(self.bias), 7),
                "answer_features": list(ANSWER_FEATURES), "answer_means": numbers(self.answer_means),
                "answer_scales": numbers(self.answer_scales), "answer_weights": numbers(self.answer_weights),
                "answer_bias": round(float(self.answer_bias), 7),
                "platt_a": round(float(self.platt_a), 7), "platt_b": round(float(self.platt_b), 7),
                "threshold": round(float(self.threshold), 4), "chooser": self.chooser, "provenance": self.provenance}

    @classmethod
    def from_dict(cls, data: dict) -> "ReaderModel":
        try:
            arrays = {k: np.asarray(data[k], dtype=np.float64) for k in
                      ("means", "scales", "weights", "answer_means", "answer_scales", "answer_weights")}
            model = cls(features=tuple(data["features"]), bias=float(data["bias"]),
                        answer_bias=float(data["answer_bias"]), platt_a=float(data["platt_a"]),
                        platt_b=float(data["platt_b"]), threshold=float(data["threshold"]),
                        provenance=dict(data.get("provenance", {})), chooser=str(data.get("chooser", "rules")),
                        **arrays)
        except (KeyError, TypeError, ValueError) as exc:
            raise ReaderModelError(f"reader model weights are incomplete: {exc}") from exc
        if model.features != FEATURES or tuple(data.get("answer_features", ())) != ANSWER_FEATURES:
            raise ReaderModelError("reader model features do not match answers/reader.py: retrain "
                                   "(python -m bench.train_reader --write)")
        n, m = len(FEATURES), len(ANSWER_FEATURES)
        if (model.means.shape, model.scales.shape, model.weights.shape) != ((n,),) * 3 or (
                model.answer_means.shape, model.answer_scales.shape, model.answer_weights.shape) != ((m,),) * 3:
            raise ReaderModelError("reader model arrays do not match its features")
        finite = all(np.all(np.isfinite(a)) for a in (model.weights, model.answer_weights, model.means, model.answer_means))
        if not (finite and np.all(model.scales > 0) and np.all(model.answer_scales > 0) and model.platt_a > 0
                and 0.0 <= model.threshold <= 1.0 and model.chooser in ("ranker", "rules")):
            raise ReaderModelError("reader model weights are not usable (finite, scales > 0, platt_a > 0, "
                                   "threshold in 0..1)")
        return model


@functools.lru_cache(maxsize=4)
def load_reader(path: Path = MODEL_PATH) -> ReaderModel | None:
    """The shipped reader, or None when its file is absent (the hand-weighted scorer answers then)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ReaderModelError(f"reader model {path} is unreadable: {exc}") from exc
    return ReaderModel.from_dict(data)
