"""`make bench-llm`: the fixtures graph build through the loopback Messages API fake answering in 300 ms.

Indexes fixtures/corpus into a scratch database (title contexts, the local embedder), then builds level
`all` with the LLM extractor, summarizer and reporter twice from an empty cache: one call at a time
(CROSSROADS_LLM_CONCURRENCY=1, what a build did before: reports one after another) and at the default
concurrency. Prints wall time, calls, the most calls in flight at once, and per stage the estimate
printed before the build against the usage the fake reported. The fake estimates tokens as chars / 4.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from bench.common import scratch_database
from core.embeddings import make_embedder
from core.llm import UsageMeter, make_llm
from core.settings import Settings
from graph import store
from graph.build.contracts import BuildSettings
from graph.build.estimate import estimate_build
from graph.build.parts import make_pipeline
from graph.build.runner import build_graph
from tests.fakes.anthropic_server import FakeAnthropic
from tests.test_llm_bad_day import healthy
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import load_source

ROOT = Path(__file__).resolve().parent.parent
TENANT = "bench_llm"
LATENCY_S = 0.3
STAGES = {"record_graph": "extraction", "text": "summaries", "write_report": "reports"}


def run(db, settings: Settings, concurrency: int) -> dict:
    with db.connection() as conn:  # from an empty cache: every call is made again
        conn.execute("DELETE FROM extraction_cache")
        store.clear_level_graph(conn, TENANT, "all")
        levels = [lvl for lvl in store.list_levels(conn, TENANT) if lvl.name == "all"]
    with FakeAnthropic(handler=healthy, latency_s=LATENCY_S) as api:
        keyed = settings.model_copy(update={"anthropic_base_url": api.url, "llm_concurrency": concurrency})
        meter = UsageMeter()
        llm = make_llm(keyed, meter, record_calls=True)
        pipeline = make_pipeline(keyed, llm, claims=False)
        estimate = estimate_build(db, TENANT, levels, pipeline.extractor, pipeline.reporter, pipeline.summarizer)
        started = time.perf_counter()
        job = build_graph(db, TENANT, "all", pipeline.extractor, pipeline.reporter, None, BuildSettings(),
                          usage=meter.summary, summarizer=pipeline.summarizer)
        wall = time.perf_counter() - started
    actual: dict = {}
    for call in llm.calls:
        stage = actual.setdefault(STAGES.get(call.kind, call.kind), {"calls": 0, "input_tokens": 0, "output_tokens": 0})
        stage["calls"] += 1
        stage["input_tokens"] += call.usage.prompt_tokens
        stage["output_tokens"] += call.usage.output_tokens
    planned = {"extraction": estimate, "summaries": estimate["summaries"], "reports": estimate["reports"]}
    stages = {name: {"estimate": {k: planned[name][k] for k in ("calls", "input_tokens", "output_tokens")},
                     "actual": actual.get(name, {})} for name in planned}
    return {"concurrency": concurrency, "wall_s": round(wall, 1), "status": job["status"], "calls": len(llm.calls),
            "max_in_flight": api.max_in_flight, "max_in_flight_by_kind": api.max_in_flight_by_kind,
            "usage": meter.summary(), "stages": stages}


def main() -> None:
    settings = Settings(anthropic_api_key="bench-key", llm_model_fast="claude-haiku-4-5",
                        llm_model_answer="claude-sonnet-5", llm_max_retries=0, contextual_retrieval="title")
    with scratch_database(settings) as db:
        docs, skipped = load_source(ROOT / "fixtures" / "corpus", [], settings.max_document_bytes)
        ingest_documents(db, make_embedder(settings), settings, TENANT, docs, skipped)
        results = [run(db, settings, 1), run(db, settings, settings.llm_concurrency)]
    for r in results:
        print(f"concurrency {r['concurrency']}: {r['wall_s']} s, {r['calls']} calls, "
              f"at most {r['max_in_flight']} in flight {r['max_in_flight_by_kind']}, {r['status']}")
        for name, s in r["stages"].items():
            e, a = s["estimate"], s["actual"]
            print(f"  {name:>10}: estimate {e['calls']} calls {e['input_tokens']:,} in {e['output_tokens']:,} out; "
                  f"fake reported {a.get('calls', 0)} calls {a.get('input_tokens', 0):,} in {a.get('output_tokens', 0):,} out")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
