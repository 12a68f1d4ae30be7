#!/usr/bin/env python3
"""Sanity checks for bench/answer_unseen_mh/questions.jsonl (standard library only).

Run from the repository root:  python3 bench/answer_unseen_mh/check.py
Exits non-zero on any failure.
"""
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = os.path.join(HERE, "questions.jsonl")
CORPUS_CANDIDATES = [
    os.environ.get("MH_CORPUS", ""),
    "/work/shared/data/multihop/corpus.jsonl",
    os.path.join(HERE, "..", "..", "shared", "data", "multihop", "corpus.jsonl"),
]
EXPECTED_COUNTS = {"bridge": 40, "3hop": 10, "comparison": 10}
YES_NO = {"yes", "no"}


def load_corpus():
    for path in CORPUS_CANDIDATES:
        if path and os.path.exists(path):
            docs = {}
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        d = json.loads(line)
                        docs[d["_id"]] = d
            return path, docs
    sys.exit("FAIL: corpus.jsonl not found (set MH_CORPUS)")


def main():
    corpus_path, docs = load_corpus()
    failures = []

    def fail(msg):
        failures.append(msg)

    with open(QUESTIONS, encoding="utf-8") as f:
        lines = [l for l in f.read().split("\n") if l.strip()]
    if len(lines) != 60:
        fail(f"expected 60 lines, found {len(lines)}")

    rows = []
    for i, line in enumerate(lines, 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            fail(f"line {i}: invalid JSON ({e})")

    required = ["qid", "question", "expected_docs", "route", "groups",
                "hops", "qtype", "answer", "aliases"]
    qtypes = collections.Counter()
    answering = collections.Counter()
    seen_q = {}
    for i, r in enumerate(rows, 1):
        qid = r.get("qid")
        for k in required:
            if k not in r:
                fail(f"{qid}: missing field {k}")
        if qid != f"u{i:02d}":
            fail(f"line {i}: qid {qid!r} out of order (expected u{i:02d})")
        if r.get("route") != "multihop":
            fail(f"{qid}: route must be 'multihop'")
        if r.get("groups") != ["public"]:
            fail(f"{qid}: groups must be ['public']")
        if not isinstance(r.get("aliases"), list):
            fail(f"{qid}: aliases must be a list")
        qt = r.get("qtype")
        qtypes[qt] += 1
        ed = r.get("expected_docs") or []
        for d in ed:
            if d not in docs:
                fail(f"{qid}: unknown doc id {d}")
        if len(set(ed)) != len(ed):
            fail(f"{qid}: repeated doc id in expected_docs")
        hops = r.get("hops")
        if hops != len(ed):
            fail(f"{qid}: hops={hops} but {len(ed)} expected_docs")
        if qt == "bridge" and hops != 2:
            fail(f"{qid}: bridge must have 2 hops")
        if qt == "3hop" and hops != 3:
            fail(f"{qid}: 3hop must have 3 hops")
        if qt == "comparison" and hops != 2:
            fail(f"{qid}: comparison must have 2 hops")
        if qt not in EXPECTED_COUNTS:
            fail(f"{qid}: unknown qtype {qt!r}")
        ans = (r.get("answer") or "").strip()
        if not ans:
            fail(f"{qid}: empty answer")
            continue
        al = ans.lower()
        if any(d not in docs for d in ed) or not ed:
            continue
        if qt in ("bridge", "3hop"):
            first, last = docs[ed[0]]["text"].lower(), docs[ed[-1]]["text"].lower()
            if al not in last:
                fail(f"{qid}: answer {ans!r} not in last paragraph {ed[-1]}")
            if al in first:
                fail(f"{qid}: answer {ans!r} also occurs in first paragraph {ed[0]}")
            answering[ed[-1]] += 1
        elif qt == "comparison":
            if al in YES_NO:
                for d in ed:
                    answering[d] += 1
            else:
                hits = [d for d in ed if al in docs[d]["text"].lower()]
                if not hits:
                    fail(f"{qid}: comparison answer {ans!r} in neither paragraph")
                for d in hits:
                    answering[d] += 1
        q = " ".join((r.get("question") or "").lower().split())
        if q in seen_q:
            fail(f"{qid}: duplicate question of {seen_q[q]}")
        seen_q[q] = qid

    for qt, n in EXPECTED_COUNTS.items():
        if qtypes[qt] != n:
            fail(f"qtype {qt}: expected {n}, found {qtypes[qt]}")
    for d, n in answering.items():
        if n > 2:
            fail(f"paragraph {d} is the answering paragraph {n} times (max 2)")

    yn = sum(1 for r in rows if r.get("qtype") == "comparison"
             and (r.get("answer") or "").lower() in YES_NO)
    all_docs = {d for r in rows for d in r.get("expected_docs") or []}
    print(f"corpus: {corpus_path} ({len(docs)} paragraphs)")
    print(f"questions: {len(rows)}")
    print("per qtype: " + ", ".join(f"{k}={qtypes[k]}" for k in EXPECTED_COUNTS))
    print(f"comparison yes/no: {yn}, comparison 'which': {qtypes['comparison'] - yn}")
    print(f"distinct paragraphs used: {len(all_docs)}")
    print(f"max uses of one answering paragraph: {max(answering.values()) if answering else 0}")
    if failures:
        print(f"FAILED: {len(failures)} problem(s)")
        for m in failures:
            print("  - " + m)
        sys.exit(1)
    print("OK: all checks passed")


if __name__ == "__main__":
    main()
