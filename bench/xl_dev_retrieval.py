"""Retrieval on the demo corpus for questions in the other language than their page: bench/answer_xl_dev's
48 questions, each with its one expected document as gold, over fixtures/corpus's pages (every page readable
to the eval's reader, so each question's page can be found).

    .venv/bin/python -m bench.xl_dev_retrieval [--config bm25,hybrid,hybrid+rerank,api] [--set xl_dev]

Writes the dataset folder (corpus.jsonl, queries.jsonl) under .crossroads/datasets/<set>_retrieval and runs
`crossroads eval` on it (tenant eval_<set>_retrieval, indexed on the first run). bench/answer_xl_written
measures the same on four corpora written for the project; this is the corpus the blind sets ask about.
`--set blind_xl` or `blind_xl2` measures the held-out blind sets' local questions the same way (their
negatives have no page): run only to report a change's result, as their READMEs say.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from api.cli.main import run
from bench.common import ROOT

SETS = ("xl_dev", "blind_xl", "blind_xl2")


def write_dataset(name: str = "xl_dev") -> Path:
    folder = ROOT / ".crossroads" / "datasets" / f"{name}_retrieval"
    folder.mkdir(parents=True, exist_ok=True)
    corpus = ROOT / "fixtures" / "corpus"
    pages = [{"_id": p.relative_to(corpus).as_posix(), "text": p.read_text(encoding="utf-8")}
             for p in sorted(corpus.rglob("*.md"))]
    questions = [json.loads(line) for line in (ROOT / "bench" / f"answer_{name}" / "questions.jsonl")
                 .read_text(encoding="utf-8").splitlines() if line.strip()]
    queries = [{"qid": q["qid"], "question": q["question"], "gold": q["expected_docs"]}
               for q in questions if q.get("expected_docs") and q.get("route", "local") == "local"]
    for name, rows in (("corpus.jsonl", pages), ("queries.jsonl", queries)):
        (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="bm25,hybrid,hybrid+rerank,api")
    parser.add_argument("--set", default="xl_dev", choices=SETS, help="whose questions (bench/answer_<set>)")
    args = parser.parse_args()
    sys.argv = ["crossroads", "eval", str(write_dataset(args.set)), "--config", args.config]
    sys.exit(run())


if __name__ == "__main__":
    main()
