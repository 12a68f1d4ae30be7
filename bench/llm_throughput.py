"""`make bench-llm`: the fixtures graph build through the loopback Messages API fake answering in 300 ms.

Indexes fixtures/corpus into a scratch database (title contexts, the local embedder), then builds level
`all` with the LLM extractor, summarizer and reporter twice from an empty cache: one call at a time
(CROSSROADS_LLM_CONCURRENCY=1, what a build did before: reports one after another) and at the default
concurrency. Prints wall time, calls, the most calls in flight at once, and per stage the estimate
printed before the build (with its range) against the usage the fake reported. The fake counts tokens as
chars / 4. The first build is estimated with the defaults; the second with what the first measured
(graph.indexing.calibration), once a stage made enough calls (calibration.MIN_CALLS).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from bench.common import scratch_database
from core.embeddings import make_embedder
from core.llm.client import make_llm
from core.llm.usage import UsageMeter
from core.settings import Settings
from graph import store
from graph.indexing.contracts import BuildSettings
from graph.indexing.estimate import estimate_build
from graph.indexing.parts import make_pipeline
from graph.indexing.runner import build_graph
from tests.fakes.anthropic_server import FakeAnthropic
from tests.test_llm_bad_day import healthy
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import load_source

ROOT = Path(__file__).resolve().parent.parent
TENANT = "bench_llm"
LATENCY_S = 0.3
STAGES = ("extraction", "summaries", "reports")


def measured(db) -> dict[str, dict]:
    """Calls and tokens per stage recorded in llm_call_stats for the bench's tenant, so far."""
    with db.connection() as conn:
        rows = conn.execute("SELECT stage, sum(calls), sum(input_tokens), sum(output_tokens) FROM llm_call_stats "
                            "WHERE tenant_id = %s GROUP BY 1", (TENANT,)).fetchall()
    return {stage: {"calls": int(c), "input_tokens": int(i), "output_tokens": int(o)} for stage, c, i, o in rows}


def run(db, settings: Settings, concurrency: int) -> dict:
    with db.connection() as conn:  # from an empty cache: every call is made again
        conn.execute("DELETE FROM extraction_cache")
        store.clear_level_graph(conn, TENANT, "all")
        levels = [lvl for lvl in store.list_levels(conn, TENANT) if lvl.name == "all"]
    with FakeAnthropic(handler=healthy, latency_s=LATENCY_S) as api:
        keyed = settings.model_copy(update={"anthropic_base_url": api.url, "llm_concurrency": concurrency})
        meter = UsageMeter()
        llm = make_llm(keyed, meter)
        pipeline = make_pipeline(keyed, llm, claims=False)
        estimate = estimate_build(db, TENANT, levels, pipeline.extractor, pipeline.reporter, pipeline.summarizer)
        before = measured(db)
        started = time.perf_counter()
        job = build_graph(db, TENANT, "all", pipeline.extractor, pipeline.reporter, None, BuildSettings(),
                          usage=meter.summary, summarizer=pipeline.summarizer)
        wall = time.perf_counter() - started
    after = measured(db)
    actual = {stage: {k: v - before.get(stage, {}).get(k, 0) for k, v in sums.items()} for stage, sums in after.items()}
    planned = {"extraction": estimate, "summaries": estimate["summaries"], "reports": estimate["reports"]}
    keys = ("calls", "input_tokens", "input_tokens_range", "output_tokens", "output_tokens_range", "measured_calls")
    stages = {name: {"estimate": {k: planned[name][k] for k in keys}, "actual": actual.get(name, {})}
              for name in STAGES}
    return {"concurrency": concurrency, "wall_s": round(wall, 1), "status": job["status"],
            "calls": meter.summary()["llm_calls"], "max_in_flight": api.max_in_flight,
            "max_in_flight_by_kind": api.max_in_flight_by_kind, "usage": meter.summary(), "stages": stages}


def main() -> None:
    settings = Settings(anthropic_api_key="bench-key", llm_model_fast="claude-haiku-4-5",
                        llm_model_answer="claude-sonnet-5", llm_max_retries=0, contextual_retrieval="title")
    with scratch_database(settings) as db:  # fresh: the first build is estimated with the defaults
        docs, skipped = load_source(ROOT / "fixtures" / "corpus", [], settings.max_document_bytes)
        ingest_documents(db, make_embedder(settings), settings, TENANT, docs, skipped)
        results = [run(db, settings, 1), run(db, settings, settings.llm_concurrency)]
    for r in results:
        print(f"concurrency {r['concurrency']}: {r['wall_s']} s, {r['calls']} calls, "
              f"at most {r['max_in_flight']} in flight {r['max_in_flight_by_kind']}, {r['status']}")
        for name, s in r["stages"].items():
            e, a = s["estimate"], s["actual"]
            (il, ih), (ol, oh) = e["input_tokens_range"], e["output_tokens_range"]
            basis = f"measured on {max(e['measured_calls'].values())} calls" if e["measured_calls"] else "defaults"
            print(f"  {name:>10}: estimate {e['calls']} calls {e['input_tokens']:,} ({il:,}-{ih:,}) in "
                  f"{e['output_tokens']:,} ({ol:,}-{oh:,}) out [{basis}]; fake reported {a.get('calls', 0)} calls "
                  f"{a.get('input_tokens', 0):,} in {a.get('output_tokens', 0):,} out")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
