"""`make bench-api`: a bounded load on the HTTP API over the fixtures.

Starts `crossroads serve` on a free 127.0.0.1 port against the configured database, makes sure the
fixtures are indexed as tenant `demo` (a sync: free when they already are) with a reader token, then
runs N concurrent clients for D seconds, each alternating `POST /v1/search` and `POST /v1/ask` over
the golden questions. Prints throughput, p50/p95/p99 per endpoint and every error. Offline unless
ANTHROPIC_API_KEY is set (then /v1/ask spends tokens: the summary prints them).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TENANT, GROUPS = "demo", "public,staff"


def crossroads(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "api.cli", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 3):
        raise SystemExit(f"crossroads {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def questions() -> list[str]:
    lines = (ROOT / "fixtures" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


def ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:  # not listening yet
        return False


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def client(n: int, base: str, token: str, asks: list[str], until: float, results: dict, errors: Counter) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120) as http:
        i = n
        while time.monotonic() < until:
            question = asks[i % len(asks)]
            endpoint, body = (("/v1/search", {"query": question, "k": 10}) if i % 2 == 0
                              else ("/v1/ask", {"question": question}))
            started = time.perf_counter()
            try:
                response = await http.post(endpoint, json=body)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code == 200:
                    results[endpoint].append(elapsed)
                else:
                    errors[f"{endpoint} {response.status_code} {response.json().get('title', '')}"] += 1
            except httpx.HTTPError as exc:
                errors[f"{endpoint} {type(exc).__name__}"] += 1
            i += 1


async def run_load(base: str, token: str, clients: int, seconds: float) -> tuple[dict, Counter, float]:
    results: dict[str, list[float]] = defaultdict(list)
    errors: Counter = Counter()
    asks = questions()
    started = time.monotonic()
    await asyncio.gather(*(client(n, base, token, asks, started + seconds, results, errors) for n in range(clients)))
    return results, errors, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=1, help="`crossroads serve --workers`")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    crossroads("db", "start")
    crossroads("ingest", "fixtures/corpus", "--tenant", TENANT)
    token = crossroads("token", "create", "--tenant", TENANT, "--groups", GROUPS, "--name", "bench-api").strip()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--log-level", "warning",
                               "--workers", str(args.workers)],
                              cwd=ROOT, env=os.environ.copy())
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not ready(base):
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the API did not become ready in 60 s")
            time.sleep(0.3)
        # one request of each kind first: model loading is not load
        httpx.post(f"{base}/v1/search", json={"query": "warm up", "k": 3}, headers={"Authorization": f"Bearer {token}"},
                   timeout=120)
        results, errors, elapsed = asyncio.run(run_load(base, token, args.clients, args.seconds))
    finally:
        server.terminate()
        server.wait(timeout=30)
        crossroads("token", "revoke", token)
    total = sum(len(v) for v in results.values())
    report = {"clients": args.clients, "workers": args.workers, "seconds": round(elapsed, 1), "requests_ok": total,
              "throughput_rps": round(total / elapsed, 1), "errors": dict(errors),
              "endpoints": {e: {"n": len(v), "p50_ms": round(statistics.median(v)), "p95_ms": round(percentile(v, 0.95)),
                                "p99_ms": round(percentile(v, 0.99))} for e, v in sorted(results.items())}}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"{args.clients} clients, {args.workers} worker(s), {elapsed:.0f} s: {total} requests ok, {report['throughput_rps']} req/s, "
              f"{sum(errors.values())} errors")
        for endpoint, r in report["endpoints"].items():
            print(f"  {endpoint:11} n={r['n']:5}  p50 {r['p50_ms']} ms  p95 {r['p95_ms']} ms  p99 {r['p99_ms']} ms")
        for what, count in errors.most_common():
            print(f"  error x{count}: {what}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
