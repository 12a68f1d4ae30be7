"""The learned reader's training cases (`python -m bench.train_reader --collect` builds them;
bench/train_reader.py fits on them): every training question searched as the local route searches it,
cached in .crossroads/ with the e5 closeness of its pooled units, so that a fit embeds nothing.

The data (bench/reader_data/README.md says where each part comes from):
- the dev questions of ../shared/data multihop and xquad_ru and the local questions of
  fixtures/questions.jsonl, and the questions written for this reader over fixtures/corpus
  (bench/reader_data/questions.jsonl), each searched as the local route searches it ("asked");
- the same questions with every passage of their gold documents taken out of the search's results
  ("removed": the passages a search returns when the corpus lacks the answer, near the topic);
- the same questions asked of another corpus ("elsewhere": off-topic passages; the dev questions of
  the fixtures corpus, the fixtures' questions of xquad_ru's);
- the negatives written for the fixtures corpus (no document answers them);
- the questions of bench/answer_xl_written (four corpora, one dataset each: `xl_hospital`, `xl_museum`,
  `xl_transit`, `xl_university`): the answerable ones in either language ("asked" and "removed") and the
  near-topic negatives written for them, which name the corpus's own people and places and ask what no
  document states ("asked", negative): the kind of negative a no-answer must catch, which the other
  datasets hold only a dozen of.
A negative whose remaining passages hold the gold string anywhere is dropped (it may be answerable).
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict

from answers.local import reader_pool
from answers.question import Question
from answers.types import Passage
from bench.answer_eval import DATASETS, XL_WRITTEN_TENANT, _raw_queries, contains_answer, dataset_questions
from bench.common import ROOT, SHARED_DATA
from core.text.markdown import ReadingBlock

CACHE = ROOT / ".crossroads" / "reader_cases.json"
SIMS = ROOT / ".crossroads" / "reader_similarities.json"
WRITTEN = ROOT / "bench" / "reader_data" / "questions.jsonl"
XL_WRITTEN = DATASETS["xl_written"]
XL_CORPORA = {"h": "xl_hospital", "m": "xl_museum", "t": "xl_transit", "u": "xl_university"}  # by qid's letter
PASSAGES = 5
REMOVED_K = 20


def _questions() -> list[dict]:
    """Every training question as {group, qid, question, golds, tenant, groups, docs, negative}."""
    out = []
    for name in ("multihop", "xquad_ru"):
        path = SHARED_DATA / name / "queries.jsonl"
        if not path.exists():
            print(f"{path} is absent: {name} is left out", file=sys.stderr)
            continue
        for line in path.open(encoding="utf-8"):
            if not line.strip():
                continue
            q = json.loads(line)
            golds = [q["answer"], *q.get("aliases", [])] if name == "multihop" else list(q["answers"])
            out.append({"group": name, "qid": q["qid"], "question": q["question"], "golds": golds,
                        "tenant": f"eval_{name}", "groups": ["public"], "docs": [str(d) for d in q["gold"]],
                        "negative": False})
    for group, path in (("fixtures", ROOT / "fixtures" / "questions.jsonl"), ("written", WRITTEN)):
        for line in path.open(encoding="utf-8"):
            if not line.strip():
                continue
            q = json.loads(line)
            if q["route"] != "local":
                continue
            negative = not q["expected_docs"]
            out.append({"group": group, "qid": q["qid"], "question": q["question"],
                        "golds": [] if negative else [q["answer"], *q.get("aliases", [])], "tenant": "demo",
                        "groups": q["groups"], "docs": list(q["expected_docs"]), "negative": negative})
    return out + _xl_questions()


def _xl_questions() -> list[dict]:
    """bench/answer_xl_written's questions: the other-language ones, then per corpus the same-language ones
    and the negatives (an empty or absent `answers`), each corpus its own dataset."""
    out = []
    for q in [*_raw_queries("xl_written"), *dataset_questions("xl_written", "same_language_*.jsonl"),
              *dataset_questions("xl_written", "negatives_*.jsonl")]:
        negative = not q.get("answers")
        out.append({"group": XL_CORPORA[q["qid"][0]], "qid": q["qid"], "question": q["question"],
                    "golds": [] if negative else list(q["answers"]), "tenant": XL_WRITTEN_TENANT,
                    "groups": ["public"], "docs": [] if negative else list(q["gold"]), "negative": negative})
    return out


# (multihop's questions are asked nowhere else: its 100 searches of another corpus would cost a quarter of
# an hour of embedding on the shared machine, and xquad_ru's already ask the fixtures corpus; the xl corpora's
# hold negatives of their own)
ELSEWHERE = {"eval_multihop": None, XL_WRITTEN_TENANT: None, "eval_xquad_ru": ("demo", ["public", "staff"]),
             "demo": ("eval_xquad_ru", ["public"])}


def _passages(searcher, tenant: str, groups: list[str], question: str, k: int, drop: set[str] = frozenset()):
    result = searcher.search(tenant, groups, question, k=k, mode="hybrid+rerank")
    calibrated = result.trace.get("rerank_threshold") is not None and not result.degraded
    hits = [h for h in result.hits if str(h.doc_id) not in drop][:PASSAGES]
    return [asdict(Passage.of_chunk(h, h.score if calibrated else None)) for h in hits]


def holds_gold(passages: list[dict], golds: list[str]) -> bool:
    return bool(golds) and contains_answer(" ".join(f"{p['title']} {p['text']}" for p in passages), golds)


def collect(only: set[str] | None = None) -> list[dict]:
    """Searches the questions (of the `only` datasets, the cache keeping the others') and embeds
    their pooled units; returns every cached case."""
    from core.database import open_database
    from core.settings import Settings
    from evaluation.datasets import load_dataset
    from evaluation.runner import index_dataset
    from router.service import QuestionRouter

    settings = Settings()
    db = open_database(settings)
    cases = []
    try:
        with QuestionRouter(db, settings, use_llm=False) as router:
            searcher = router.local_searcher
            questions = [q for q in _questions() if only is None or q["group"] in only]
            if any(q["tenant"] == XL_WRITTEN_TENANT for q in questions):  # its corpus ships in bench/: indexed here
                index_dataset(db, router.embedder, settings, load_dataset(XL_WRITTEN))
            for i, q in enumerate(questions, 1):
                base = {k: q[k] for k in ("group", "qid", "question", "golds")}
                asked = _passages(searcher, q["tenant"], q["groups"], q["question"], settings.answer_passages)
                cases.append({**base, "variant": "asked", "negative": q["negative"], "passages": asked})
                if q["negative"]:
                    continue
                removed = _passages(searcher, q["tenant"], q["groups"], q["question"], REMOVED_K, set(q["docs"]))
                if not holds_gold(removed, q["golds"]):
                    cases.append({**base, "variant": "removed", "negative": True, "passages": removed})
                if ELSEWHERE[q["tenant"]] is None:
                    continue
                tenant, groups = ELSEWHERE[q["tenant"]]
                elsewhere = _passages(searcher, tenant, groups, q["question"], settings.answer_passages)
                if not holds_gold(elsewhere, q["golds"]):
                    cases.append({**base, "variant": "elsewhere", "negative": True, "passages": elsewhere})
                if i % 25 == 0:
                    print(f"collect: {i}/{len(questions)} questions, {len(cases)} cases", file=sys.stderr, flush=True)
            similarity = CachedSimilarity(router.writer.similarity)
            for i, case in enumerate(cases, 1):  # the pooled units' closeness, embedded once
                reader_pool(Question(case["question"]), as_passages(case), similarity=similarity)
                if i % 100 == 0:
                    print(f"embed: {i}/{len(cases)} cases", file=sys.stderr, flush=True)
                    similarity.save()
            similarity.save()
    finally:
        db.close()
    kept = [c for c in json.loads(CACHE.read_text(encoding="utf-8"))
            if only is not None and c["group"] not in only] if CACHE.exists() else []
    cases = kept + cases
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    return cases


class CachedSimilarity:
    """The search's e5 closeness of units to questions, remembered in SIMS (a fit reads only these)."""

    def __init__(self, inner=None):
        self.inner = inner
        self.missed = 0
        self.cache: dict[str, float] = json.loads(SIMS.read_text(encoding="utf-8")) if SIMS.exists() else {}

    def __call__(self, question: str, texts):
        keys = [f"{question}\u241e{t}" for t in texts]
        missing = list(dict.fromkeys(t for k, t in zip(keys, texts) if k not in self.cache))
        if missing:
            if self.inner is None:  # the hand-weighted answer embeds more of a cross-language lead than the pool
                from answers.unit_similarity import EmbeddingSimilarity
                from core.embeddings import make_embedder
                from core.settings import Settings
                self.inner = EmbeddingSimilarity(make_embedder(Settings()))
            self.missed += len(missing)
            for t, v in zip(missing, self.inner(question, missing)):
                self.cache[f"{question}\u241e{t}"] = round(float(v), 6)
        return [self.cache[k] for k in keys]

    def save(self) -> None:
        SIMS.parent.mkdir(parents=True, exist_ok=True)
        SIMS.write_text(json.dumps(self.cache, ensure_ascii=False), encoding="utf-8")


def as_passages(case: dict) -> list[Passage]:
    """A case's passages as the answer reads them; their reading blocks come back from JSON as lists or
    dicts (asdict), not as ReadingBlock, which `units` reads by attribute."""
    return [Passage(**{**p, "blocks": None if p.get("blocks") is None else tuple(
        ReadingBlock(b["start"], b["end"], tuple(b["header"])) if isinstance(b, dict) else ReadingBlock.from_json(b)
        for b in p["blocks"])}) for p in case["passages"]]
