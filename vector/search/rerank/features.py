"""Features of (query, candidate) pairs for the offline learning-to-rank reranker. Pure: no I/O.

Features are computed for a whole candidate list at once, because several are relative to the
other candidates of the same query (a cosine of 0.82 means little on its own, 0.03 below the best
candidate means a lot; a term every candidate contains does not tell them apart). The absolute ones
(vec_sim, coverage) let the score say "nothing here is relevant"; vec_sim ties a fitted model to the
embedding model it was fitted with (recorded in the weights' provenance). Words are matched
as core/text/terms.py says; in a candidate written in the other script than the query, through their
translations too (core/text/lexicon), in either order for word pairs. Also tried, and dropped because
leaving each out
raised the cross-validated gain over RRF: title/heading match on its own (the title still counts in
coverage), proximity of query terms, chunks per document and text length.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

from core.text.lexicon import search_translations
from core.text.terms import QueryTerms, match_positions, normalise

# name -> what it measures (one line each); the model file names the subset it was fitted on
FEATURES: dict[str, str] = {
    "vec_sim": "cosine similarity from the vector leg; a candidate it did not return gets the lowest it did return",
    "vec_gap": "vec_sim minus the best vec_sim in the list (0 for the closest candidate, negative below it)",
    "vec_rr": "1 / rank in the vector leg, 0 when the leg did not return the candidate",
    "fts_rr": "1 / rank in the full-text leg, 0 when absent",
    "fts_rel": "full-text score / the best full-text score in the list, 0 when absent",
    "rrf": "RRF (k=60) of the two legs' ranks, scaled so that rank 1 in both legs is 1 (whatever fused the list)",
    "coverage": "share of the query's content stems found in title, heading or text, weighted by idf over the list",
    "rare": "share of the query's rare tokens (digits, underscores, CamelCase, dotted, `quoted`) found verbatim",
    "bigram": "share of the query's adjacent content-stem pairs found adjacent (stop words skipped) in the candidate",
}
FEATURE_NAMES = tuple(FEATURES)

def _rrf60(vector_rank: int | None, fts_rank: int | None) -> float:
    """RRF with k=60 computed from the leg ranks, so the feature means the same under any fusion (the
    weights were fitted on RRF-fused lists, where this equals the fused score), times 61 / 2:
    2 / (60 + 1) is the best two legs can give."""
    return sum(1.0 / (60 + r) for r in (vector_rank, fts_rank) if r) * 61 / 2


def extract(query: str, candidates: Sequence, other: Sequence[bool] | None = None) -> np.ndarray:
    """Feature matrix (len(candidates), len(FEATURE_NAMES)) in FEATURE_NAMES order.

    `candidates` are `vector.search.hybrid.Candidate`s (any object with the same fields will do);
    `other`: which of them are written in the other script than the query (their words are matched
    through the dictionary).
    """
    n = len(candidates)
    out = np.zeros((n, len(FEATURE_NAMES)), dtype=np.float64)
    if n == 0:
        return out
    terms = QueryTerms.of(query)
    texts = [normalise(f"{c.title}\n{c.heading}\n{c.text}") for c in candidates]
    other = list(other) if other is not None else [False] * n
    # a stem of the other language -> the query stem it translates (the first in query order)
    back = {t: s for s in reversed(terms.stems) for t in search_translations(s)} if any(other) else {}
    prefixes = frozenset(t[:2] for t in back)
    scans = [match_positions(terms, text, back, prefixes) if o else match_positions(terms, text)
             for text, o in zip(texts, other)]
    present = [{s for _, s in matched} for matched in scans]
    # idf over this candidate list: a term every candidate shares does not tell them apart
    df = Counter(s for found in present for s in found)
    idf = {s: math.log((n + 1) / (df[s] + 0.5)) for s in terms.stems}
    idf_total = sum(idf.values()) or 1.0
    sims = [c.vector_score for c in candidates if c.vector_score is not None]
    floor_sim, best_sim = (min(sims), max(sims)) if sims else (0.0, 0.0)
    fts = [c.fts_score for c in candidates if c.fts_score is not None]
    best_fts = max(fts) if fts and max(fts) > 0 else 1.0
    col = {name: i for i, name in enumerate(FEATURE_NAMES)}
    for row, c in enumerate(candidates):
        matched, found = scans[row], present[row]
        sim = c.vector_score if c.vector_score is not None else floor_sim
        hits = {(a, b) for (i, a), (j, b) in zip(matched, matched[1:]) if j == i + 1}
        if other[row]:  # another language may put the two words in the other order
            hits |= {(b, a) for a, b in hits}
        hits &= terms.bigrams
        values = {
            "vec_sim": sim,
            "vec_gap": sim - best_sim,
            "vec_rr": 1.0 / c.vector_rank if c.vector_rank else 0.0,
            "fts_rr": 1.0 / c.fts_rank if c.fts_rank else 0.0,
            "fts_rel": c.fts_score / best_fts if c.fts_score is not None else 0.0,
            "rrf": _rrf60(c.vector_rank, c.fts_rank),
            # summed exactly: a set's order follows the interpreter's hash seed, and a rounding that followed it
            # would make two candidates holding the same words differ in the last bit, and rank apart, by run
            "coverage": math.fsum(idf[s] for s in found) / idf_total,
            "rare": sum(1 for p in terms.rare if p.search(texts[row])) / len(terms.rare) if terms.rare else 0.0,
            "bigram": len(hits) / len(terms.bigrams) if terms.bigrams else 0.0,
        }
        for name, value in values.items():
            out[row, col[name]] = value
    return out
