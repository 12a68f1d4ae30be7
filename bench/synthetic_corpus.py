"""The synthetic corpus of `make bench-search`: vocabulary, vectors, ACL mix, loading, queries.

See bench/search.py for why it looks like this.
"""
from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import psycopg
from psycopg import sql

from bench.common import ROOT, SHARED_DATA
from core.database import Database
from vector import store

TENANT = "bench"
MODEL = "bench/synthetic-384"
DIM = 384
N_SUPER, N_TOPICS, LATENT_DIM = 50, 1000, 32
TOPIC_WORDS = 30
QUERY_COSINE = 0.85

GROUPS = ["public", "staff", "dept-engineering", "dept-sales", "dept-finance", "dept-legal",
          "team-apollo", "team-borealis", "team-cygnus", "team-draco", "team-eridani"]
GROUP_SHARE = [0.60, 0.25] + [0.025] * 4 + [0.01] * 5
# user group sets, from broad to rare
PROFILES = {
    "staff": ["public", "staff"],
    "public": ["public"],
    "departments": ["dept-engineering", "dept-sales", "dept-finance", "dept-legal"],
    "rare-team": ["team-apollo"],
}
TEMPLATES = [
    "how does the {a} {b} work with {c}",
    "what is the {a} of the {b} and {c}",
    "where can I find the {a} for {b} in {c}",
    "why is the {a} {b} not {c}",
    "what are the {a} and {b} of {c}",
    "how do I use {a} with the {b} {c}",
]


class PrecomputedQueryEmbedder:
    """Benchmark harness: returns the vector prepared for each query text (no model runs)."""

    dimension = DIM

    def __init__(self, model_id: str, vectors: dict[str, np.ndarray]):
        self.model_id = model_id
        self._vectors = vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self._vectors[text]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise TypeError("PrecomputedQueryEmbedder only answers queries: the benchmark writes corpus vectors directly")


# --- vocabulary ---------------------------------------------------------------------------------

def load_vocabulary(max_words: int = 30_000) -> tuple[list[str], str]:
    """English words ranked by their frequency in real text (read at run time, never stored)."""
    counts: Counter[str] = Counter()
    sources = [SHARED_DATA / d / "corpus.jsonl" for d in ("beir_msmarco", "beir_dbpedia", "podcast", "multihop", "anthropic_docs")]
    sources = [p for p in sources if p.exists()]
    word = re.compile(r"[a-z]{2,20}")
    if sources:
        for path in sources:
            for line in path.open(encoding="utf-8"):
                row = json.loads(line)
                counts.update(word.findall((row.get("title", "") + " " + row.get("text", "")).lower()))
        origin = "../shared/data"
    else:
        for path in sorted((ROOT / "fixtures" / "corpus").rglob("*")):
            if path.is_file():
                counts.update(word.findall(path.read_text(encoding="utf-8", errors="replace").lower()))
        origin = "fixtures/corpus"
    words = [w for w, c in counts.most_common(max_words) if c >= 2 or len(counts) < 5000]
    return words, origin


# --- corpus layout (cheap arrays for every row, generated up front) ------------------------------

@dataclass
class Layout:
    rows: int
    doc_of: np.ndarray        # chunk -> document index
    chunk_no: np.ndarray
    topic: np.ndarray         # chunk -> topic
    acl: np.ndarray           # chunk -> group index
    doc_acl: np.ndarray
    doc_topic: np.ndarray


def make_layout(rows: int, rng: np.random.Generator) -> Layout:
    sizes = []
    total = 0
    while total < rows:  # chunks per document: 1 + geometric, mean ~8
        batch = 1 + rng.geometric(1 / 7.5, size=max(1024, (rows - total) // 6))
        sizes.append(batch)
        total += int(batch.sum())
    sizes = np.concatenate(sizes)
    ends = np.cumsum(sizes)
    n_docs = int(np.searchsorted(ends, rows) + 1)
    sizes = sizes[:n_docs].copy()
    sizes[-1] -= int(ends[n_docs - 1] - rows)
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int32), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    chunk_no = (np.arange(rows) - np.repeat(starts, sizes)).astype(np.int32)
    popularity = 1.0 / (np.arange(N_TOPICS) + 10.0) ** 0.7
    popularity /= popularity.sum()
    doc_topic = rng.choice(N_TOPICS, size=n_docs, p=popularity).astype(np.int16)
    doc_acl = rng.choice(len(GROUPS), size=n_docs, p=GROUP_SHARE).astype(np.int8)
    topic = doc_topic[doc_of].copy()
    stray = rng.random(rows) < 0.2
    topic[stray] = rng.choice(N_TOPICS, size=int(stray.sum()), p=popularity)
    return Layout(rows, doc_of, chunk_no, topic, doc_acl[doc_of], doc_acl, doc_topic)


@dataclass
class Space:
    centroids: np.ndarray     # (topics, DIM)
    bases: np.ndarray         # (topics, LATENT_DIM, DIM)
    latent_scale: float = 0.8 / math.sqrt(LATENT_DIM)
    iso_scale: float = 0.25 / math.sqrt(DIM)

    @classmethod
    def make(cls, rng: np.random.Generator) -> "Space":
        supers = _normalise(rng.standard_normal((N_SUPER, DIM)).astype(np.float32))
        owner = rng.integers(0, N_SUPER, N_TOPICS)
        own = _normalise(rng.standard_normal((N_TOPICS, DIM)).astype(np.float32))
        centroids = _normalise(supers[owner] + 0.8 * own)
        bases = (rng.standard_normal((N_TOPICS, LATENT_DIM, DIM)) / math.sqrt(DIM)).astype(np.float32)
        return cls(centroids, bases)

    def draw(self, topics: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = self.centroids[topics].copy()
        out += rng.standard_normal(out.shape, dtype=np.float32) * self.iso_scale
        latent = rng.standard_normal((len(topics), LATENT_DIM), dtype=np.float32) * self.latent_scale
        order = np.argsort(topics, kind="stable")
        sorted_topics = topics[order]
        bounds = np.flatnonzero(np.diff(sorted_topics)) + 1
        for group in np.split(order, bounds):
            if len(group):
                out[group] += latent[group] @ self.bases[topics[group[0]]]
        return _normalise(out)


def _normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


class Words:
    def __init__(self, vocabulary: list[str], rng: np.random.Generator):
        self.vocab = np.array(vocabulary)
        ranks = np.arange(len(vocabulary))
        p = 1.0 / (ranks + 2.7)  # Zipf-Mandelbrot over the real frequency ranks
        self.cdf = np.cumsum(p / p.sum())
        lo, hi = min(150, len(vocabulary) // 4), min(8000, len(vocabulary))
        self.topic_words = rng.integers(lo, hi, size=(N_TOPICS, TOPIC_WORDS))
        self.content_from = lo  # ranks below this are mostly function words

    def sample(self, topics: np.ndarray, lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Word indices for all chunks concatenated (lengths[i] words for chunk i)."""
        total = int(lengths.sum())
        idx = np.searchsorted(self.cdf, rng.random(total)).clip(0, len(self.vocab) - 1)
        per_word_topic = np.repeat(topics, lengths)
        from_topic = rng.random(total) < 0.25
        idx[from_topic] = self.topic_words[per_word_topic[from_topic], rng.integers(0, TOPIC_WORDS, int(from_topic.sum()))]
        return idx

    def texts(self, idx: np.ndarray, lengths: np.ndarray, rng: np.random.Generator) -> list[str]:
        words = self.vocab[idx].astype(object)
        # sentence ends every 8-16 words
        ends = np.cumsum(rng.integers(8, 17, size=len(idx) // 8 + 2))
        ends = ends[ends < len(idx)]
        words[ends] = words[ends] + "."
        bounds = np.cumsum(lengths)[:-1]
        return [" ".join(chunk.tolist()).capitalize() + "." for chunk in np.split(words, bounds)]


# --- loading --------------------------------------------------------------------------------------

@dataclass
class QuerySpec:
    text: str
    vector: np.ndarray
    kind: str  # "chunk" or "topic"
    target: tuple[str, int] | None = None  # (doc_id, chunk_no) of the chunk a "chunk" query was made from


@dataclass
class Plan:
    """Which rows the queries are built from (picked before generation, filled during it)."""
    targets: dict[str, np.ndarray] = field(default_factory=dict)  # profile -> chunk indices
    captured: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # chunk -> (vector, word idx)


def _secondary_indexes(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(name, definition) of the chunks indexes that back no constraint: dropped during the load."""
    return conn.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
        " WHERE x.indrelid = 'chunks'::regclass AND NOT EXISTS"
        " (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) ORDER BY i.relname"
    ).fetchall()


def _batch_words(layout: Layout, space: Space, words: Words, seed: int, lo: int, hi: int):
    """Rows lo..hi's vectors and word indices, from the batch's own seed (so any batch can be made
    again alone); returns the generator too, positioned for the batch's texts and headings."""
    brng = np.random.default_rng([seed, lo])
    topics = layout.topic[lo:hi].astype(np.int64)
    vectors = space.draw(topics, brng)
    lengths = brng.integers(80, 201, size=hi - lo)
    return brng, topics, vectors, lengths, words.sample(topics, lengths, brng)


def _capture(plan: Plan, wanted: np.ndarray, lo: int, vectors: np.ndarray, lengths: np.ndarray, idx: np.ndarray) -> None:
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for i in np.flatnonzero(wanted[lo:lo + len(vectors)]):
        plan.captured[lo + int(i)] = (vectors[i].copy(), idx[offsets[i]:offsets[i + 1]].copy())


def _wanted(layout: Layout, plan: Plan) -> np.ndarray:
    wanted = np.zeros(layout.rows, dtype=bool)
    for chosen in plan.targets.values():
        wanted[chosen] = True
    return wanted


def recapture_targets(layout: Layout, space: Space, words: Words, plan: Plan, batch: int, seed: int) -> None:
    """Fill `plan.captured` as `load_corpus` does, without writing anything: for a kept corpus
    (bench-search --reuse), whose batches are generated again only as far as the queries need."""
    wanted = _wanted(layout, plan)
    for lo in range(0, layout.rows, batch):
        hi = min(layout.rows, lo + batch)
        if wanted[lo:hi].any():
            _, _, vectors, lengths, idx = _batch_words(layout, space, words, seed, lo, hi)
            _capture(plan, wanted, lo, vectors, lengths, idx)


def load_corpus(db: Database, layout: Layout, space: Space, words: Words, plan: Plan, batch: int, seed: int,
                workers: int) -> dict:
    timings = {}
    rows = layout.rows
    n_docs = len(layout.doc_acl)
    wanted = _wanted(layout, plan)
    with db.connection() as conn:
        started = time.perf_counter()
        indexes = _secondary_indexes(conn)
        for name, _ in indexes:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(name)))
        conn.commit()

        rng = np.random.default_rng(seed + 1)
        titles_idx = words.sample(layout.doc_topic.astype(np.int64), np.full(n_docs, 4), rng)
        titles = [" ".join(t).title() for t in words.vocab[titles_idx].reshape(n_docs, 4).tolist()]
        with conn.cursor() as cur, cur.copy(
            "COPY documents (tenant_id, doc_id, title, source, lang, acl, content_hash, index_key)"
            " FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "text", "text", "text[]", "text", "text"])
            for d in range(n_docs):
                copy.write_row((TENANT, f"doc-{d:07d}", titles[d], f"synthetic://{d}", "english",
                                [GROUPS[layout.doc_acl[d]]], f"{d:016x}", "bench"))
        conn.commit()
        timings["documents_copy_s"] = time.perf_counter() - started

        started = time.perf_counter()
        gen_s = 0.0
        columns = ("tenant_id", "doc_id", "chunk_no", "heading", "context", "content", "acl",
                   "content_hash", "lang", "embedding", "embed_model")
        statement = sql.SQL("COPY chunks ({}) FROM STDIN (FORMAT BINARY)").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)))

        def copy_batch(lo: int, headings: list[str], texts: list[str], vectors: np.ndarray) -> int:
            # its own pooled connection: the server builds the tsvectors of two batches at once
            with db.connection() as c, c.cursor() as cur, cur.copy(statement) as copy:
                copy.set_types(["text", "text", "int4", "text", "text", "text", "text[]", "text", "text", "vector", "text"])
                for i in range(len(texts)):
                    r = lo + i
                    copy.write_row((TENANT, f"doc-{layout.doc_of[r]:07d}", int(layout.chunk_no[r]), headings[i], "",
                                    texts[i], [GROUPS[layout.acl[r]]], f"{r:016x}", "english", vectors[i], MODEL))
            return lo + len(texts)

        pending: list = []
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for lo in range(0, rows, batch):
                hi = min(rows, lo + batch)
                g0 = time.perf_counter()
                brng, topics, vectors, lengths, idx = _batch_words(layout, space, words, seed, lo, hi)
                texts = words.texts(idx, lengths, brng)
                head_idx = words.sample(topics, np.full(hi - lo, 3), brng)
                headings = [" ".join(h).capitalize() for h in words.vocab[head_idx].reshape(hi - lo, 3).tolist()]
                _capture(plan, wanted, lo, vectors, lengths, idx)
                gen_s += time.perf_counter() - g0
                pending.append(pool.submit(copy_batch, lo, headings, texts, vectors))
                while len(pending) > workers:  # bounded memory: at most one batch waiting per worker
                    done = pending.pop(0).result()
                    if (done // batch) % 5 == 0:
                        elapsed = time.perf_counter() - started
                        print(f"  chunks: {done:,}/{rows:,} ({done / elapsed:,.0f} rows/s)", flush=True)
            for future in pending:
                future.result()
        print(f"  chunks: {rows:,}/{rows:,} ({rows / (time.perf_counter() - started):,.0f} rows/s)", flush=True)
        timings["chunks_copy_s"] = time.perf_counter() - started
        timings["generate_s"] = gen_s

        started = time.perf_counter()
        for _, definition in indexes:
            conn.execute(definition)
            conn.commit()
        timings["secondary_indexes_s"] = time.perf_counter() - started

        started = time.perf_counter()  # as an ingest ends: fold the COPY batches' statistics deltas
        store.compact_fulltext_stats(conn, TENANT, min_pending=1)
        conn.commit()
        timings["fulltext_stats_compact_s"] = time.perf_counter() - started
    timings["secondary_indexes"] = [name for name, _ in indexes]
    return timings


def build_queries(layout: Layout, space: Space, words: Words, plan: Plan, n: int, seed: int) -> dict[str, list[QuerySpec]]:
    rng = np.random.default_rng(seed + 2)
    seen: set[str] = set()
    out: dict[str, list[QuerySpec]] = {}
    noise = math.tan(math.acos(QUERY_COSINE)) / math.sqrt(DIM)
    for profile in PROFILES:
        specs = []
        for r in plan.targets[profile]:
            vector, idx = plan.captured[int(r)]
            content = idx[idx >= words.content_from]
            pool = content if len(content) >= 2 else idx
            while True:
                a, b = words.vocab[rng.choice(pool, 2)]
                c = words.vocab[words.topic_words[layout.topic[r], rng.integers(TOPIC_WORDS)]]
                text = TEMPLATES[rng.integers(len(TEMPLATES))].format(a=a, b=b, c=c)
                if text not in seen:
                    break
            seen.add(text)
            q = _normalise(vector + rng.standard_normal(DIM).astype(np.float32) * noise)
            specs.append(QuerySpec(text, q, "chunk", (f"doc-{layout.doc_of[r]:07d}", int(layout.chunk_no[r]))))
        readable = np.isin(layout.acl, [GROUPS.index(g) for g in PROFILES[profile]])
        topics_readable = np.unique(layout.topic[readable])
        for _ in range(n - len(specs)):
            t = int(rng.choice(topics_readable))
            while True:
                a, b, c = words.vocab[words.topic_words[t, rng.choice(TOPIC_WORDS, 3, replace=False)]]
                text = TEMPLATES[rng.integers(len(TEMPLATES))].format(a=a, b=b, c=c)
                if text not in seen:
                    break
            seen.add(text)
            specs.append(QuerySpec(text, space.draw(np.array([t]), rng)[0], "topic"))
        order = rng.permutation(len(specs))
        out[profile] = [specs[i] for i in order]
    return out


def pick_targets(layout: Layout, n: int, rng: np.random.Generator) -> Plan:
    plan = Plan()
    for profile, groups in PROFILES.items():
        readable = np.flatnonzero(np.isin(layout.acl, [GROUPS.index(g) for g in groups]))
        k = min(len(readable), int(round(n * 0.8)))
        plan.targets[profile] = rng.choice(readable, size=k, replace=False) if k else np.array([], dtype=np.int64)
    return plan
