"""`make bench-api`: a bounded load on the HTTP API over the fixtures.

Starts `crossroads serve` on a free 127.0.0.1 port against the configured database, makes sure the
fixtures are indexed as tenant `demo` (a sync: free when they already are) with a reader token, then
runs N concurrent clients for D seconds, each alternating `POST /v1/search` and `POST /v1/ask` over
the golden questions. Prints throughput, p50/p95/p99 per endpoint and every error. Offline unless
ANTHROPIC_API_KEY is set (then /v1/ask spends tokens: the summary prints them).

Then a soak (`--soak-seconds`, default 600; 0 skips it): a few clients for that long mixing ordinary
questions with hostile traffic (queries from every Unicode category, U+FDFA runs, lone surrogates,
made-up HTTP methods, unknown paths, hidden document ids, garbage tokens). It reports the server's
resident memory and the size of /metrics before and after, and every 5xx or transport error: a
process that leaks per request, or whose metrics grow with what clients send, shows here.
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
import random
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TENANT, GROUPS = "demo", "public,staff"


def crossroads(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "api.cli.main", *args], cwd=ROOT, capture_output=True, text=True)
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


def hostile_queries(seed: int = 7) -> list[str]:
    """Queries a fuzzer would send: a sample of every Unicode general category, and known traps."""
    by_category: dict[str, list[str]] = defaultdict(list)
    for cp in range(0, 0x30000, 7):
        by_category[unicodedata.category(chr(cp))].append(chr(cp))
    rng = random.Random(seed)
    queries = ["".join(rng.choices(chars, k=40)) for _, chars in sorted(by_category.items())]
    return queries + ["\ufdfa" * 30, "\ud800 lone surrogate", "x" * 20_000, "", " \t\n", "' OR 1=1 --", "a & | ! :* ( ) \\"]


async def soak_client(n: int, base: str, token: str, asks: list[str], hostile: list[str], until: float,
                      counts: Counter, failures: Counter) -> None:
    """One soak client: ordinary and hostile requests in turn until `until`. Only 5xx and transport
    errors are failures; 4xx is the right answer to most hostile requests."""
    rng = random.Random(n)
    good = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        while time.monotonic() < until:
            kind = rng.choice(("search", "ask", "hostile-search", "hostile-ask", "method", "path", "document", "token"))
            try:
                if kind == "search":
                    response = await http.post("/v1/search", json={"query": rng.choice(asks), "k": 5}, headers=good)
                elif kind == "ask":
                    response = await http.post("/v1/ask", json={"question": rng.choice(asks)}, headers=good)
                elif kind == "hostile-search":
                    response = await post_escaped(http, "/v1/search", {"query": rng.choice(hostile), "k": 5}, good)
                elif kind == "hostile-ask":
                    response = await post_escaped(http, "/v1/ask", {"question": rng.choice(hostile)}, good)
                elif kind == "method":
                    response = await http.request(f"X{rng.randrange(10**9)}", "/v1/search", headers=good)
                elif kind == "path":
                    response = await http.get(f"/v1/nowhere/{rng.randrange(10**9)}", headers=good)
                elif kind == "document":
                    response = await http.get(f"/v1/documents/hidden-{rng.randrange(10**9)}.md", headers=good)
                else:
                    response = await http.post("/v1/search", json={"query": "x"},
                                               headers={"Authorization": f"Bearer {rng.randrange(10**30)}"})
                counts[f"{kind} {response.status_code}"] += 1
                if response.status_code >= 500:
                    failures[f"{kind} {response.status_code}"] += 1
            except httpx.HTTPError as exc:
                failures[f"{kind} {type(exc).__name__}"] += 1


async def post_escaped(http: httpx.AsyncClient, path: str, body: dict, headers: dict) -> httpx.Response:
    """POST `body` as ASCII-escaped JSON: a lone surrogate travels as `\\ud800`, as a fuzzer sends it
    (httpx's own JSON encoder refuses it)."""
    return await http.post(path, content=json.dumps(body), headers={**headers, "Content-Type": "application/json"})


def resident_mb(pid: int) -> float:
    """Resident memory of a process and its children (uvicorn workers), in MB, from /proc."""
    total_kb, pids = 0, [pid]
    try:
        pids += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:  # the server has no child processes (one worker) or has just ended: its own memory counts
        pass
    for each in pids:
        try:
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return round(total_kb / 1024, 1)


def metrics_kb(base: str) -> float:
    return round(len(httpx.get(f"{base}/metrics", timeout=30).content) / 1024, 1)


def run_soak(base: str, token: str, server_pid: int, clients: int, seconds: float) -> dict:
    counts: Counter = Counter()
    failures: Counter = Counter()
    before = {"rss_mb": resident_mb(server_pid), "metrics_kb": metrics_kb(base)}

    async def soak() -> None:
        until = time.monotonic() + seconds
        asks, hostile = questions(), hostile_queries()
        await asyncio.gather(*(soak_client(n, base, token, asks, hostile, until, counts, failures)
                               for n in range(clients)))

    started = time.monotonic()
    asyncio.run(soak())
    after = {"rss_mb": resident_mb(server_pid), "metrics_kb": metrics_kb(base)}
    return {"clients": clients, "seconds": round(time.monotonic() - started, 1), "requests": sum(counts.values()),
            "failures": dict(failures), "before": before, "after": after,
            "rss_growth_mb": round(after["rss_mb"] - before["rss_mb"], 1), "answers": dict(sorted(counts.items()))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=1, help="`crossroads serve --workers`")
    parser.add_argument("--soak-seconds", type=float, default=600, help="hostile + ordinary soak after the load; 0 skips")
    parser.add_argument("--soak-clients", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    crossroads("db", "start")
    crossroads("ingest", "fixtures/corpus", "--tenant", TENANT)
    token = crossroads("token", "create", "--tenant", TENANT, "--groups", GROUPS, "--name", "bench-api").strip()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "api.cli.main", "serve", "--port", str(port), "--log-level", "warning",
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
        soak = (run_soak(base, token, server.pid, args.soak_clients, args.soak_seconds)
                if args.soak_seconds > 0 else None)
    finally:
        server.terminate()
        server.wait(timeout=30)
        crossroads("token", "revoke", token)
    total = sum(len(v) for v in results.values())
    report = {"clients": args.clients, "workers": args.workers, "seconds": round(elapsed, 1), "requests_ok": total,
              "throughput_rps": round(total / elapsed, 1), "errors": dict(errors),
              "endpoints": {e: {"n": len(v), "p50_ms": round(statistics.median(v)), "p95_ms": round(percentile(v, 0.95)),
                                "p99_ms": round(percentile(v, 0.99))} for e, v in sorted(results.items())},
              "soak": soak}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"{args.clients} clients, {args.workers} worker(s), {elapsed:.0f} s: {total} requests ok, {report['throughput_rps']} req/s, "
              f"{sum(errors.values())} errors")
        for endpoint, r in report["endpoints"].items():
            print(f"  {endpoint:11} n={r['n']:5}  p50 {r['p50_ms']} ms  p95 {r['p95_ms']} ms  p99 {r['p99_ms']} ms")
        for what, count in errors.most_common():
            print(f"  error x{count}: {what}")
        if soak:
            print(f"soak: {soak['clients']} clients, {soak['seconds']:.0f} s, {soak['requests']} requests, "
                  f"{sum(soak['failures'].values())} failures (5xx or transport); server memory "
                  f"{soak['before']['rss_mb']} -> {soak['after']['rss_mb']} MB, /metrics "
                  f"{soak['before']['metrics_kb']} -> {soak['after']['metrics_kb']} KB")
            for what, count in sorted(soak["failures"].items()):
                print(f"  soak failure x{count}: {what}")
    return 1 if errors or (soak and soak["failures"]) else 0


if __name__ == "__main__":
    sys.exit(main())
