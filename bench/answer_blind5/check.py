"""Gold check for bench/answer_blind5/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind5/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.
"""
import collections
import json
import os
import re
import sys

CORPUS = "fixtures/corpus"
QFILE = "bench/answer_blind5/questions.jsonl"
BASE = {"public", "staff"}

KIND = {}
for i in range(1, 11):
    KIND["m%02d" % i] = "2-hop"
for i in range(11, 19):
    KIND["m%02d" % i] = "3-hop"
for i in (19, 20):
    KIND["m%02d" % i] = "4-hop"
for i in (21, 22):
    KIND["m%02d" % i] = "two-part"
for i in (23, 24):
    KIND["m%02d" % i] = "comparison"
for i in range(25, 37):
    KIND["m%02d" % i] = "local"
for i in range(37, 49):
    KIND["m%02d" % i] = "negative"

# negatives: kind and what was grepped
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["mobile app team", "mobile team", "команда мобильн", "mobile app"]}),
    "m38": ("a", {"forbid": ["Сибирский Экспресс", "Siberian Express", "Сибирск"]}),
    "m39": ("a", {"forbid": ["INC-2025-052", "2025-052"]}),
    # (b) attribute never given
    "m40": ("b", {"regex_in": ("offices/moscow.md", r"\b1\d{5}\b"),
                  "forbid": ["почтовый индекс", "postcode: 1", "Moscow, 1"]}),
    "m41": ("b", {"line_pairs": ("TransUral", ["€", "$", "contract", "договор", "annual", "годов"])}),
    "m42": ("b", {"doc_forbid": ("offices/austin.md", ["room", "переговорн", "seats", "вмещает"]),
                  "line_pairs": ("Austin", ["meeting room", "переговорн", "seats"])}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/reorganisation-plan-2026.md", "answer": "15 January 2026"}),
    "m44": ("c", {"doc": "finance/q2-2025-report.md", "answer": "21.4 млн €"}),
    "m45": ("c", {"doc": "finance/budget-fy2026.md", "answer": "18%"}),
    # (d) false premise / period or version not covered
    "m46": ("d", {"forbid": ["primary: paymora", "replaced Ferrocard", "switched to Paymora",
                             "Paymora is the primary", "primary acquirer, **Paymora"],
                  "require": ("services/payments-gateway.md", "primary acquirer, **Ferrocard**")}),
    "m47": ("d", {"forbid": ["December 2025", "Dec 2025", "декабря 2025", "декабре 2025", "декабрь 2025"]}),
    "m48": ("d", {"forbid": ["version 2 was switched off", "v2 was switched off", "v2 switched off",
                             "version 2 has been switched off", "версию 2 отключ", "v2 отключ"],
                  "require": ("services/shipments-api.md", "version 1 was switched off")}),
}


def load_corpus():
    docs = {}
    for root, _, files in os.walk(CORPUS):
        for fn in files:
            if not fn.endswith(".md"):
                continue
            path = os.path.join(root, fn)
            doc_id = os.path.relpath(path, CORPUS).replace(os.sep, "/")
            text = open(path, encoding="utf-8").read()
            m = re.search(r"^acl:\s*\[([^\]]*)\]", text, re.M)
            acl = {a.strip() for a in m.group(1).split(",")} if m else set()
            docs[doc_id] = {"text": text, "low": text.lower(), "acl": acl}
    return docs


def lang(q):
    return "RU" if re.search(r"[А-Яа-яЁё]", q) else "EN"


def doc_lang(doc):
    body = doc["text"].split("---", 2)[2]
    return "RU" if len(re.findall(r"[А-Яа-яЁё]", body)) > len(re.findall(r"[A-Za-z]", body)) else "EN"


def main():
    docs = load_corpus()
    errors = []
    infos = []
    qs = [json.loads(l) for l in open(QFILE, encoding="utf-8") if l.strip()]
    qids = [q["qid"] for q in qs]
    if qids != ["m%02d" % i for i in range(1, 49)]:
        errors.append("qids are not m01..m48 in order")
    counts = collections.Counter()
    langs = collections.Counter()
    cross = []

    def err(qid, msg):
        errors.append("%s: %s" % (qid, msg))

    for q in qs:
        qid = q["qid"]
        kind = KIND.get(qid)
        counts[kind] += 1
        langs[lang(q["question"])] += 1
        groups = set(q.get("groups", []))
        exp = q["expected_docs"]
        # schema
        want_route = "multihop" if kind in ("2-hop", "3-hop", "4-hop", "two-part", "comparison") else "local"
        if q.get("route") != want_route:
            err(qid, "route %r, expected %r" % (q.get("route"), want_route))
        if not BASE <= groups:
            err(qid, "groups must include public and staff")
        for d in exp:
            if d not in docs:
                err(qid, "doc id does not exist: %s" % d)
        if any(d not in docs for d in exp):
            continue
        # groups can read every chain document; extra groups only where a chain doc lists them
        for d in exp:
            if not (groups & docs[d]["acl"]):
                err(qid, "groups %s cannot read %s (acl %s)" % (sorted(groups), d, sorted(docs[d]["acl"])))
        for g in groups - BASE:
            if not any(g in docs[d]["acl"] for d in exp):
                err(qid, "group %r added but no chain document lists it" % g)

        if kind == "negative":
            if exp != []:
                err(qid, "negative must have expected_docs []")
            if not q.get("note"):
                err(qid, "negative without note")
            if "answer" in q or "aliases" in q or "hops" in q:
                err(qid, "negative must not have answer/aliases/hops")
            if groups != BASE:
                err(qid, "negatives are asked with [public, staff]")
            nk, spec = NEG[qid]
            if not q.get("note", "").startswith("(%s)" % nk):
                err(qid, "note does not start with kind (%s)" % nk)
            readable = {d: v for d, v in docs.items() if groups & v["acl"]}
            for s in spec.get("forbid", []):
                hits = [d for d, v in readable.items() if s.lower() in v["low"]]
                if hits:
                    err(qid, "forbidden string %r found in readable %s" % (s, hits))
            if "regex_in" in spec:
                d, rx = spec["regex_in"]
                if re.search(rx, docs[d]["text"]):
                    err(qid, "regex %r matches %s" % (rx, d))
            if "line_pairs" in spec:
                anchor, others = spec["line_pairs"]
                for d, v in readable.items():
                    for line in v["text"].splitlines():
                        if anchor.lower() in line.lower() and any(o.lower() in line.lower() for o in others):
                            err(qid, "line in %s pairs %r with a forbidden word: %s" % (d, anchor, line.strip()[:100]))
            if "doc_forbid" in spec:
                d, words = spec["doc_forbid"]
                for w in words:
                    if w.lower() in docs[d]["low"]:
                        err(qid, "%r found in %s" % (w, d))
            if "require" in spec:
                d, s = spec["require"]
                if s.lower() not in docs[d]["low"]:
                    err(qid, "expected %r in %s" % (s, d))
            if nk == "c":
                d, a = spec["doc"], spec["answer"]
                if groups & docs[d]["acl"]:
                    err(qid, "answering doc %s is readable by %s" % (d, sorted(groups)))
                if a.lower() not in docs[d]["low"]:
                    err(qid, "answer %r not in %s" % (a, d))
                hits = [x for x, v in readable.items() if a.lower() in v["low"]]
                if hits:
                    err(qid, "answer %r also in readable %s" % (a, hits))
                if d not in q["note"] or a not in q["note"]:
                    err(qid, "note should name the answering doc and answer")
            continue

        ans = q.get("answer")
        aliases = q.get("aliases", [])
        if not ans or not aliases:
            err(qid, "answer and aliases required")
            continue
        if len(set(a.lower() for a in aliases)) != len(aliases) or ans.lower() in (a.lower() for a in aliases):
            err(qid, "duplicate aliases or answer repeated among aliases")

        if kind == "local":
            if len(exp) != 1:
                err(qid, "local must have exactly one expected doc")
            elif ans.lower() not in docs[exp[0]]["low"]:
                err(qid, "answer %r not in %s" % (ans, exp[0]))
            if "hops" in q:
                err(qid, "local question must not have hops")
            if doc_lang(docs[exp[0]]) != lang(q["question"]):
                cross.append(qid)
            continue

        # multi-hop
        if kind == "comparison":
            if not any(ans.lower() in docs[d]["low"] for d in exp):
                err(qid, "answer %r in none of %s" % (ans, exp))
            if q.get("hops") != len(exp) // 2:
                err(qid, "comparison hops should be %d" % (len(exp) // 2))
        else:
            if ans.lower() not in docs[exp[-1]]["low"]:
                err(qid, "answer %r not in last doc %s" % (ans, exp[-1]))
            first = docs[exp[0]]["low"]
            for s in [ans] + aliases:
                if s.lower() in first:
                    err(qid, "answer/alias %r occurs in first doc %s" % (s, exp[0]))
            if q.get("hops") != len(exp):
                err(qid, "hops %r != %d chain docs" % (q.get("hops"), len(exp)))
            want = {"2-hop": 2, "3-hop": 3, "4-hop": 4}.get(kind)
            if want and len(exp) != want:
                err(qid, "%s question has %d docs" % (kind, len(exp)))
        if len(set(exp)) != len(exp):
            err(qid, "repeated doc on chain")
        if {doc_lang(docs[d]) for d in exp} - {lang(q["question"])}:
            cross.append(qid)

    kinds_order = ["2-hop", "3-hop", "4-hop", "two-part", "comparison", "local", "negative"]
    print("cross-lingual:", " ".join(cross))
    for e in errors:
        print("ERROR", e)
    print("questions: %d %s %s" % (len(qs), {k: counts[k] for k in kinds_order}, dict(sorted(langs.items()))))
    print("errors: %d" % len(errors))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
