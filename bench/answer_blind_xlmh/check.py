#!/usr/bin/env python3
"""Structural check for bench/answer_blind_xlmh/questions.jsonl (standard library only).

Run from the repository root:  python3 bench/answer_blind_xlmh/check.py
Prints OK, or one line per failure (exit code 1).
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "answer_xl_written", "corpus.jsonl")
QUESTIONS = os.path.join(HERE, "questions.jsonl")

# qid ranges per corpus (16 each) and the corpus's own language
CORPORA = [("hospital", 1, "ru"), ("museum", 17, "en"), ("transit", 33, "ru"), ("university", 49, "en")]
ANSWER_TYPES = {"bridge": 2, "3hop": 3, "two_part": 2, "comparison": 2}
COMMON_KEYS = {"qid", "question", "route", "groups", "hops", "qtype", "expected_docs"}
ANSWERABLE_KEYS = COMMON_KEYS | {"answer", "aliases"}
NEGATIVE_KEYS = COMMON_KEYS | {"about", "why"}
CYR = re.compile(r"[\u0400-\u04FF]")
MAX_ANSWER_CHARS = 60
COPY_NGRAM = 8  # a question sharing 8 consecutive words with a document counts as copied


def corpus_of(n):
    for name, start, lang in CORPORA:
        if start <= n < start + 16:
            return name, start, lang
    return None, None, None


def words(s):
    return re.findall(r"\w+", s.lower())


def main():
    fails = []
    docs = {}
    with open(CORPUS, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                docs[d["_id"]] = d["text"]
    doc_ngrams = set()
    for text in docs.values():
        w = words(text)
        for i in range(len(w) - COPY_NGRAM + 1):
            doc_ngrams.add(tuple(w[i:i + COPY_NGRAM]))

    rows = []
    with open(QUESTIONS, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                fails.append(f"line {i}: empty line")
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                fails.append(f"line {i}: bad JSON ({e})")
    if len(rows) != 64:
        fails.append(f"expected 64 questions, found {len(rows)}")

    qids = [r.get("qid") for r in rows]
    if len(set(qids)) != len(qids):
        fails.append("duplicate qids")
    want = ["x%02d" % n for n in range(1, 65)]
    if qids != want[:len(qids)] or len(qids) != 64:
        fails.append("qids are not x01..x64 in order")

    stats = {name: {"neg": [], "ans": 0, "bridge": 0, "multi": 0, "comparison": 0, "own": []} for name, _, _ in CORPORA}

    for r in rows:
        qid = r.get("qid", "?")
        m = re.fullmatch(r"x(\d\d)", str(qid))
        if not m:
            fails.append(f"{qid}: bad qid")
            continue
        n = int(m.group(1))
        corpus, start, lang = corpus_of(n)
        if corpus is None:
            fails.append(f"{qid}: qid out of range")
            continue
        pos = n - start  # 0..15 within the corpus
        q = r.get("question")
        if not isinstance(q, str) or not q.strip():
            fails.append(f"{qid}: missing question")
            q = ""
        if r.get("route") != "multihop":
            fails.append(f"{qid}: route must be 'multihop'")
        if r.get("groups") != ["public"]:
            fails.append(f"{qid}: groups must be ['public']")
        if not isinstance(r.get("hops"), int):
            fails.append(f"{qid}: hops must be an int")
        qtype = r.get("qtype")

        # languages: half of a corpus's questions in its own language, half in the other, in both halves
        # of the split (odd qids: development, even: held out; see the README's renumbering)
        own = (lang == "ru") == bool(CYR.search(q))
        stats[corpus]["own"].append((n % 2, own))

        # copied sentences
        qw = words(q)
        for i in range(len(qw) - COPY_NGRAM + 1):
            if tuple(qw[i:i + COPY_NGRAM]) in doc_ngrams:
                fails.append(f"{qid}: question copies {COPY_NGRAM}+ consecutive words from a document")
                break

        if qtype == "negative":
            if set(r) != NEGATIVE_KEYS:
                fails.append(f"{qid}: negative keys {sorted(r)} != {sorted(NEGATIVE_KEYS)}")
            if r.get("expected_docs") != []:
                fails.append(f"{qid}: negative must have expected_docs == []")
            about = r.get("about")
            if not isinstance(about, list) or not about:
                fails.append(f"{qid}: negative needs a non-empty 'about' list")
                about = []
            for d in about:
                if d not in docs:
                    fails.append(f"{qid}: about id {d!r} not in corpus")
                elif not d.startswith(corpus + "/"):
                    fails.append(f"{qid}: about id {d!r} is not in corpus {corpus}")
            if not isinstance(r.get("why"), str) or not r["why"].strip():
                fails.append(f"{qid}: negative needs 'why'")
            stats[corpus]["neg"].append(pos)
        elif qtype in ANSWER_TYPES:
            if set(r) != ANSWERABLE_KEYS:
                fails.append(f"{qid}: answerable keys {sorted(r)} != {sorted(ANSWERABLE_KEYS)}")
            ed = r.get("expected_docs")
            if not isinstance(ed, list) or not ed:
                fails.append(f"{qid}: expected_docs must be a non-empty list")
                ed = []
            if len(set(ed)) != len(ed):
                fails.append(f"{qid}: repeated id in expected_docs")
            for d in ed:
                if d not in docs:
                    fails.append(f"{qid}: expected doc {d!r} not in corpus")
                elif not d.startswith(corpus + "/"):
                    fails.append(f"{qid}: expected doc {d!r} is not in corpus {corpus}")
            if r.get("hops") != len(ed):
                fails.append(f"{qid}: hops {r.get('hops')} != len(expected_docs) {len(ed)}")
            if len(ed) != ANSWER_TYPES[qtype]:
                fails.append(f"{qid}: {qtype} should have {ANSWER_TYPES[qtype]} documents, has {len(ed)}")
            ans = r.get("answer")
            if not isinstance(ans, str) or not ans.strip():
                fails.append(f"{qid}: missing answer")
                ans = ""
            al = r.get("aliases")
            if not isinstance(al, list) or not all(isinstance(a, str) and a.strip() for a in al):
                fails.append(f"{qid}: aliases must be a list of non-empty strings")
            if len(ans) > MAX_ANSWER_CHARS:
                fails.append(f"{qid}: answer longer than {MAX_ANSWER_CHARS} characters")
            if ans in ("yes", "no"):
                if qtype != "comparison":
                    fails.append(f"{qid}: yes/no answer only allowed for comparisons")
                need = "да" if ans == "yes" else "нет"
                if not isinstance(al, list) or need not in al:
                    fails.append(f"{qid}: yes/no answer needs alias {need!r}")
            elif ed and ed[-1] in docs and ans not in docs[ed[-1]]:
                fails.append(f"{qid}: answer {ans!r} is not a substring of {ed[-1]}")
            stats[corpus]["ans"] += 1
            if qtype == "bridge":
                stats[corpus]["bridge"] += 1
            elif qtype in ("3hop", "two_part"):
                stats[corpus]["multi"] += 1
            else:
                stats[corpus]["comparison"] += 1
        else:
            fails.append(f"{qid}: unknown qtype {qtype!r}")

    for name, _, _ in CORPORA:
        s = stats[name]
        if len(s["neg"]) != 4:
            fails.append(f"{name}: {len(s['neg'])} negatives, expected 4")
        if s["ans"] != 12:
            fails.append(f"{name}: {s['ans']} answerable, expected 12")
        if s["bridge"] != 8:
            fails.append(f"{name}: {s['bridge']} bridge questions, expected 8")
        if s["multi"] != 2:
            fails.append(f"{name}: {s['multi']} 3hop/two_part questions, expected 2")
        if s["comparison"] != 2:
            fails.append(f"{name}: {s['comparison']} comparisons, expected 2")
        if sum(own for _, own in s["own"]) != 8:
            fails.append(f"{name}: {sum(own for _, own in s['own'])} questions in the corpus's language, expected 8")
        for half in (0, 1):
            mine = [own for odd, own in s["own"] if odd == half]
            if not (3 <= sum(mine) <= len(mine) - 3):
                fails.append(f"{name}: a half of the split holds fewer than 3 questions of a language")
            if sum(1 for p in s["neg"] if (p + 1) % 2 == half) != 2:
                fails.append(f"{name}: each half of the split holds 2 negatives")

    if fails:
        for f_ in fails:
            print("FAIL", f_)
        print(f"{len(fails)} failure(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
