"""Run in a subprocess by tests/test_determinism.py: the offline answers to the golden questions over the
fixture corpus (the local and multi-hop ones; the global ones as themes over every chunk) and the route the
cue table gives each, the offline reranker's features, and the graph the offline extractor, Leiden and the
offline reports build of the corpus, printed as JSON. Nothing here reads a database or a model: the
passages are each question's best chunks by shared words (ties by chunk order), so the output depends only
on the code, and must not depend on the interpreter's hash seed (PYTHONHASHSEED), which
orders every set and frozenset of strings."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

from answers.extractive import offline_answer
from answers.themes.answer import themes_in_scope
from answers.question import Question
from answers.types import Passage
from core.text.terms import content_stems
from graph.indexing.contracts import BuildSettings, LevelReport
from graph.indexing.extract_offline import OfflineExtractor
from graph.indexing.reports import offline_report
from graph.indexing.runner import build_level_graph, cluster
from graph.types import ChunkInput, ScopePassage
from router.classify import classify
from vector.ingest.prepare import chunk_document, sha256
from vector.ingest.sources import load_folder
from vector.search.rerank.features import extract

PASSAGES = 6  # per question, as the local route sends about so many


def main(root: Path) -> None:
    documents, _ = load_folder(root / "corpus", ("public",), 1_000_000)
    chunks = [(doc, draft) for doc in sorted(documents, key=lambda d: d.doc_id)
              for draft in chunk_document(doc, max_chars=1000, overlap=0.15)]
    stems = [frozenset(content_stems(f"{doc.title} {draft.heading} {draft.content}")) for doc, draft in chunks]
    out = []
    for line in (root / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        asked = json.loads(line)
        wanted = set(content_stems(asked["question"]))
        decision = classify(asked["question"])  # the cue table's route (the learned one needs the model)
        out.append({"qid": f'{asked["qid"]}:route', "route": [decision.route, decision.confidence, decision.reason,
                                                               decision.features]})
        if asked["route"] == "global":
            scope = [ScopePassage(i, doc.doc_id, doc.title, draft.content, draft.heading)
                     for i, (doc, draft) in enumerate(chunks)]
            # a community per folder, as the themes are cited by the report holding most of their passages
            folders = sorted({doc.doc_id.split("/")[0] for doc, _ in chunks})
            reports = [{"id": n, "source_chunk_ids": [i for i, (doc, _) in enumerate(chunks)
                                                      if doc.doc_id.split("/")[0] == name]}
                       for n, name in enumerate(folders)]
            themes = themes_in_scope(asked["question"], wanted, scope, {}, reports, 6, {})
            out.append({"qid": asked["qid"], "themes": [(t.label, t.summary, t.score, t.chunk_ids) for t in themes]})
            continue
        ranked = sorted(range(len(chunks)), key=lambda i: (-len(wanted & stems[i]), i))[:PASSAGES]
        passages = [Passage(id=i, doc_id=chunks[i][0].doc_id, title=chunks[i][0].title, heading=chunks[i][1].heading,
                            text=chunks[i][1].content) for i in ranked]
        answer = offline_answer(Question(asked["question"]), passages, multihop=asked["route"] == "multihop")
        candidates = [SimpleNamespace(title=p.title, heading=p.heading, text=p.text, vector_score=None,
                                      vector_rank=None, fts_score=1.0 / rank, fts_rank=rank)
                      for rank, p in enumerate(passages, start=1)]
        features = extract(asked["question"], candidates)
        out.append({"qid": asked["qid"], "answer": answer.text, "confidence": answer.confidence,
                    "chain": answer.chain, "features": features.tolist()})
    out.append({"qid": "graph", **_graph(chunks)})
    json.dump(out, sys.stdout, ensure_ascii=False)


def _graph(chunks: list) -> dict:
    """The entities, relationships, communities and offline reports a batch rebuild of the corpus's graph
    makes."""
    inputs = [ChunkInput(i, doc.doc_id, doc.title, draft.heading, draft.content, lang="simple",
                         content_hash=sha256(draft.content)) for i, (doc, draft) in enumerate(chunks)]
    extractor = OfflineExtractor()
    extractions = {c.content_hash: extractor.extract(c) for c in inputs}
    entities, relationships = build_level_graph(inputs, extractions, None, 0.93, LevelReport("probe", []))
    communities = cluster([], relationships, BuildSettings())
    members = [set(c.members) for c in communities]
    reports = [offline_report([e for e in entities if e.key in inside],
                              [r for r in relationships if r.source_key in inside and r.target_key in inside])
               for inside in members]
    return {"entities": [(e.key, e.name, e.type, e.description) for e in entities],
            "relationships": [(r.source_key, r.target_key, r.description, r.weight) for r in relationships],
            "communities": [(c.level, c.members) for c in communities], "reports": reports}


if __name__ == "__main__":
    main(Path(sys.argv[1]))
