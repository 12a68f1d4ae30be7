#!/usr/bin/env python3
"""Self-check for bench/answer_unseen_xq/questions.jsonl (standard library only).

Run from /work/main:  python3 bench/answer_unseen_xq/check.py
Exits non-zero on any failure.
"""
import json
import os
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = os.path.join(HERE, "questions.jsonl")
CORPUS_CANDIDATES = [
    "/work/shared/data/xquad_ru/corpus.jsonl",
    os.path.join(HERE, "..", "..", "..", "shared", "data", "xquad_ru", "corpus.jsonl"),
]

N_ANSWERABLE = 80
N_NEGATIVE = 20
MIN_TITLES = 35
MAX_PER_PARAGRAPH = 3
MAX_ANSWER_WORDS = 8

# Aliases that are deliberately NOT exact substrings of the paragraph
# (qid, alias) -> reason.
NON_SPAN_ALIASES = {
    ("x013", "Лукас Кранах"): "nominative form of the span 'Лукаса Кранаха'",
    ("x015", "17 786 419"): "same number with ordinary spaces; the paragraph uses no-break spaces",
    ("x020", "Дэвид Коллинз"): "nominative form of the span 'Дэвидом Коллинзом'",
    ("x027", "Уильям Саймон"): "nominative form of the span 'Уильяма Э. Саймона' without the initial",
    ("x041", "соединение трех планет"): "nominative form of the span 'соединения трех планет'",
    ("x042", "Марсель"): "nominative form of 'Марселя'",
    ("x043", "Джеймс Хаттон"): "nominative form of the span 'Джеймса Хаттона'",
    ("x049", "Роберт Кинтнер"): "nominative form of the span 'Роберта Кинтнера'",
    ("x067", "Библиотека Регенштейна"): "nominative form of the span 'Библиотеку Регенштейна'",
    ("x076", "Хасан ат-Тураби"): "nominative form of the span 'Хасана ат-Тураби'",
}

# Strings that must NOT occur anywhere in the corpus (case-insensitive) for
# each negative question: the true answer value(s) / key entity + attribute.
NEGATIVE_PROBES = {
    "x081": ["1856", "Смилян", "Тесла родился", "родился Тесла"],
    "x082": ["Levi's", "Levi’s", "Левайс", "Левис", "Санта-Клар"],
    "x083": ["Висл", "Vistula"],
    "x084": ["911", "Сен-Клер", "Карл Простоватый", "Карла Простоватого"],
    "x085": ["95 тезис", "1517", "тезисы"],
    "x086": ["−183", "-183", "183 °", "183°", "кипит", "кипения"],
    "x087": ["Армстронг", "Олдрин", "Armstrong"],
    "x088": ["6400", "6 400", "6992", "длина Амазонки", "длина реки"],
    "x089": ["биолюминес", "светятся", "свечени", "светит"],
    "x090": ["миллионов человек в Европе", "млн человек в Европе", "миллионов жизней", "25 миллионов", "50 миллионов", "75 миллионов"],
    "x091": ["Юнайтед", "United", "Сент-Джеймс", "Премьер-лиг"],
    "x092": ["Тристрам", "Хант,", "Хант ", "нынешний директор", "нынешним директором"],
    "x093": ["Есугей", "Есугэй", "Есүхэй", "Есухей"],
    "x094": ["основан в 1636", "1636 году", "1636 г.", "Джон Гарвард", "Джона Гарварда"],
    "x095": ["Найроби", "Nairobi"],
    "x096": ["Ягуар", "Jaguars"],
    "x097": ["Евклид", "Euclid"],
    "x098": ["1230", "1 230", "1233", "1 233", "длина Рейна", "км в длину"],
    "x099": ["129 депутат", "129 член", "129 мест", "129 парламент"],
    "x100": ["Хартнелл", "Hartnell", "Первого Доктора", "Первый Доктор"],
}


def main():
    errors = []

    def fail(msg):
        errors.append(msg)

    corpus_path = next((p for p in CORPUS_CANDIDATES if os.path.exists(p)), None)
    if corpus_path is None:
        print("FAIL: corpus.jsonl not found")
        return 1
    corpus = {}
    with open(corpus_path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                corpus[d["_id"]] = d
    corpus_lower = "\n".join(d["text"] for d in corpus.values()).lower()

    rows = []
    with open(QUESTIONS, encoding="utf-8") as f:
        raw_lines = f.read().split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines = raw_lines[:-1]
    for i, line in enumerate(raw_lines, 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            fail(f"line {i}: invalid JSON ({e})")
    print(f"lines: {len(raw_lines)}")
    if len(rows) != N_ANSWERABLE + N_NEGATIVE:
        fail(f"expected {N_ANSWERABLE + N_NEGATIVE} rows, got {len(rows)}")

    expected_qids = [f"x{i:03d}" for i in range(1, N_ANSWERABLE + N_NEGATIVE + 1)]
    got_qids = [r.get("qid") for r in rows]
    if got_qids != expected_qids:
        fail("qids are not x001..x100 in order")

    # duplicate questions (exact, and after normalising case/punctuation)
    def norm(q):
        return "".join(ch for ch in q.lower().replace("ё", "е") if ch.isalnum())

    qs = Counter(norm(r.get("question", "")) for r in rows)
    dups = [q for q, c in qs.items() if c > 1]
    if dups:
        fail(f"duplicate questions: {dups}")

    answerable = [r for r in rows if r.get("qid", "") <= f"x{N_ANSWERABLE:03d}"]
    negatives = [r for r in rows if r.get("qid", "") > f"x{N_ANSWERABLE:03d}"]

    per_par = Counter()
    per_title = Counter()
    n_span_aliases = n_nonspan_aliases = 0
    used_nonspan = set()
    for r in rows:
        for key in ("qid", "question", "expected_docs", "route", "groups"):
            if key not in r:
                fail(f"{r.get('qid')}: missing key {key}")
        if r.get("route") != "local" or r.get("groups") != ["public"]:
            fail(f"{r.get('qid')}: route/groups wrong")
        if not any("а" <= ch.lower() <= "я" or ch in "ёЁ" for ch in r.get("question", "")):
            fail(f"{r.get('qid')}: question does not look Russian")

    for r in answerable:
        qid = r["qid"]
        docs = r.get("expected_docs", [])
        if len(docs) != 1:
            fail(f"{qid}: expected exactly one doc, got {docs}")
            continue
        doc = docs[0]
        if doc not in corpus:
            fail(f"{qid}: doc {doc} not in corpus")
            continue
        text = corpus[doc]["text"]
        per_par[doc] += 1
        per_title[corpus[doc]["title"]] += 1
        ans = r.get("answer")
        if not ans:
            fail(f"{qid}: empty answer")
            continue
        if ans not in text:
            fail(f"{qid}: answer {ans!r} not a substring of {doc}")
        nw = len(ans.split())
        if not 1 <= nw <= MAX_ANSWER_WORDS:
            fail(f"{qid}: answer has {nw} words")
        if "note" in r:
            fail(f"{qid}: answerable row should not carry a note")
        aliases = r.get("aliases")
        if not isinstance(aliases, list):
            fail(f"{qid}: aliases must be a list")
            continue
        for al in aliases:
            if al in text:
                n_span_aliases += 1
            elif (qid, al) in NON_SPAN_ALIASES:
                n_nonspan_aliases += 1
                used_nonspan.add((qid, al))
            else:
                fail(f"{qid}: alias {al!r} not in {doc} and not whitelisted")

    for key in NON_SPAN_ALIASES:
        if key not in used_nonspan:
            fail(f"whitelisted non-span alias {key} not used")

    over = {p: c for p, c in per_par.items() if c > MAX_PER_PARAGRAPH}
    if over:
        fail(f"paragraphs with > {MAX_PER_PARAGRAPH} questions: {over}")
    if len(per_title) < MIN_TITLES:
        fail(f"only {len(per_title)} titles covered (< {MIN_TITLES})")

    n_probes = 0
    for r in negatives:
        qid = r["qid"]
        if r.get("expected_docs") != []:
            fail(f"{qid}: negative must have empty expected_docs")
        if not r.get("note"):
            fail(f"{qid}: negative needs a note")
        if "answer" in r:
            fail(f"{qid}: negative should not carry an answer")
        probes = NEGATIVE_PROBES.get(qid)
        if not probes:
            fail(f"{qid}: no probe strings listed")
            continue
        for p in probes:
            n_probes += 1
            if p.lower() in corpus_lower:
                fail(f"{qid}: probe {p!r} occurs in the corpus")
    for qid in NEGATIVE_PROBES:
        if qid not in {r["qid"] for r in negatives}:
            fail(f"probe list for unknown negative {qid}")

    print(f"answerable: {len(answerable)}  negatives: {len(negatives)}")
    print(f"titles covered: {len(per_title)}/{len({d['title'] for d in corpus.values()})}  "
          f"paragraphs used: {len(per_par)}  max per paragraph: {max(per_par.values()) if per_par else 0}")
    print(f"aliases: {n_span_aliases} exact spans, {n_nonspan_aliases} whitelisted non-span")
    print(f"negative probes checked: {n_probes} (all absent from corpus)" if not any(
        'probe' in e for e in errors) else f"negative probes checked: {n_probes}")
    if errors:
        print(f"FAIL ({len(errors)} problems):")
        for e in errors:
            print("  -", e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
