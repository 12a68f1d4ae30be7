"""`make eval-answers`: the offline answer baseline an LLM must beat, on the dev split.

multihop  - the gold answer or an alias appears in the answer; single search (local route) vs the
            agentic route, same run;
xquad_ru  - an answer span appears in the answer (local route).

Uses the tenants `make eval` indexed (eval_multihop, eval_xquad_ru; group `public`). Answers are
offline (extractive) unless --llm is given and ANTHROPIC_API_KEY is set.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time

from bench.common import SHARED_DATA
from core.database import open_database
from core.settings import Settings
from router.service import Router
from vector.evaluation.datasets import load_dataset

GROUPS = ["public"]


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower().replace("ё", "е")).strip()


def contains_answer(answer: str, golds: list[str]) -> bool:
    got = normalise(answer)
    return any(g and normalise(g) in got for g in golds)


def _raw_queries(name: str) -> list[dict]:
    with (SHARED_DATA / name / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run(router: Router, name: str, routes: list[str], golds_of, limit: int | None) -> dict:
    queries = _raw_queries(name)[:limit]
    tenant = f"eval_{load_dataset(SHARED_DATA / name).name}"
    out: dict = {}
    for route in routes:
        hits, latencies, misses = 0, [], []
        for q in queries:
            started = time.perf_counter()
            answer = router.ask(tenant, GROUPS, q["question"], route=route)
            latencies.append((time.perf_counter() - started) * 1000)
            if contains_answer(answer.answer, golds_of(q)):
                hits += 1
            elif len(misses) < 5:
                misses.append({"qid": q["qid"], "question": q["question"], "gold": golds_of(q)[0],
                               "answer": answer.answer[:300]})
        out[route] = {"accuracy": round(hits / len(queries), 3), "n": len(queries),
                      "latency_p50_ms": round(statistics.median(latencies)),
                      "latency_p95_ms": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))]),
                      "misses": misses}
        print(f"{name:9} {route:9} answer accuracy {hits / len(queries):.3f} (n={len(queries)})", file=sys.stderr,
              flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="first N questions per dataset")
    parser.add_argument("--llm", action="store_true", help="answer with the LLM (ANTHROPIC_API_KEY)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not SHARED_DATA.exists():
        print(f"{SHARED_DATA} is absent: nothing to evaluate")
        return 0
    settings = Settings()
    db = open_database(settings)
    try:
        with Router(db, settings, use_llm=None if args.llm else False) as router:
            results = {
                "multihop": run(router, "multihop", ["local", "multihop"],
                                lambda q: [q["answer"], *q.get("aliases", [])], args.limit),
                "xquad_ru": run(router, "xquad_ru", ["local"], lambda q: q["answers"], args.limit),
            }
    finally:
        db.close()
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=1))
    else:
        for name, by_route in results.items():
            for route, r in by_route.items():
                print(f"| {name} | {route} | {r['accuracy']:.3f} | {r['n']} | {r['latency_p50_ms']} | {r['latency_p95_ms']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
