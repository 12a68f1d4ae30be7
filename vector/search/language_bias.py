"""The vector leg across languages: a question's cosines to pages of another language, moved onto
its own language's scale.

A multilingual embedding model places each language's texts around that language's own centre
(Libovický, Rosa & Fraser, "On the Language Neutrality of Pre-trained Multilingual
Representations", 2020): to an English question every English page sits a little closer than a
Russian page saying the same, so a Russian page that answers it ranks below English pages that do
not (measured on the demo corpus's cross-language questions: the answering document's mean
reciprocal rank 0.43 by raw cosine, 0.77 lifted as below). Their remedy is to subtract each
language's mean vector, and for one question that is one number per language: q . (d - mu_L) =
q . d - q . mu_L. So a page of script L scores

    cos(q, d) + max(0, q . mu_Q - q . mu_L)       (Q: the question's script)

which is its raw cosine when written in the question's script (a corpus of one language is searched
exactly as before, and the reranker's absolute-cosine feature keeps its scale) and, in the other
script, that cosine lifted by how much nearer the question lies to its own language's centre. Never
lowered: a question nearer the other language's centre is nearer what that language's pages are
about (an English question about the Yekaterinburg office, which a Russian page answers), and
that is no bias to take away. (A lift the same for every question, mu_Q . mu_Q - mu_Q . mu_L, raised
the cross-language questions further but lifted every English page over the Russian one a Russian
question about a Russian colleague needed.) Scripts, not languages: what splits the embedding space is Russian against the rest (an
English page and a code listing share one). Within a script the order is the model's own, so each
script's nearest are fetched apart (the other script's answer may lie below the raw top 50) and
merged on the common scale.

The means are of the reader's chunks (`acl && groups`), kept for a while per reader: a mean of
hundreds of vectors moves little with one ingest, and reading it costs a scan of what the reader may
read (about 7 microseconds a chunk here), so past SCRIPT_MEANS_UP_TO chunks the leg stays raw: a
large tenant would need the sums kept at write time, as the full-text statistics are.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

# each script needs this many of the reader's chunks for its mean to be the language's centre rather
# than the topic of a few pages; a corpus short of it in either script is searched by raw cosine
MIN_SCRIPT_CHUNKS = 20
MEANS_TTL_S = 300.0
# the most chunks a reader's means are read over on a question's path (about 0.15 s, once per MEANS_TTL_S)
SCRIPT_MEANS_UP_TO = 20_000
MAX_READERS = 1024


def calibrated(nearest: dict[bool, list[tuple[int, float]]], means: dict[bool, np.ndarray], query: np.ndarray,
               asked_cyrillic: bool, limit: int) -> list[tuple[int, float]]:
    """Each script's nearest (chunk id, cosine) merged on the question's scale (see the module's
    docstring), best first, ties by id, at most `limit`."""
    own = float(query @ means[asked_cyrillic])
    lift = {cyrillic: max(0.0, own - float(query @ mean)) for cyrillic, mean in means.items()}
    merged = [(chunk, score + lift[cyrillic]) for cyrillic, found in nearest.items() for chunk, score in found]
    return sorted(merged, key=lambda p: (-p[1], p[0]))[:limit]


class ScriptMeans:
    """The reader's mean vector per script, read through `load` at most once per MEANS_TTL_S per
    (tenant, groups, model); None when either script has fewer than MIN_SCRIPT_CHUNKS chunks."""

    def __init__(self, load: Callable[..., dict[bool, tuple[int, np.ndarray]]], ttl_s: float = MEANS_TTL_S):
        self.load, self.ttl_s = load, ttl_s
        self._kept: OrderedDict[tuple, tuple[float, dict[bool, np.ndarray] | None]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conn, *, tenant: str, groups: Sequence[str], model: str) -> dict[bool, np.ndarray] | None:
        key = (tenant, tuple(sorted(groups)), model)
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and now - kept[0] < self.ttl_s:
                return kept[1]
        counted = self.load(conn, tenant=tenant, groups=groups, model=model)
        means = ({cyrillic: mean for cyrillic, (_, mean) in counted.items()}
                 if len(counted) == 2 and all(n >= MIN_SCRIPT_CHUNKS for n, _ in counted.values()) else None)
        with self._lock:
            self._kept[key] = (now, means)
            self._kept.move_to_end(key)
            while len(self._kept) > MAX_READERS:
                self._kept.popitem(last=False)
        return means
