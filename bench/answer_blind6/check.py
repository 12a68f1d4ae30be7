"""Gold check for bench/answer_blind6/questions.jsonl (Python standard library only).

Run from the repository root:  python3 bench/answer_blind6/check.py
It reads only fixtures/corpus/ and this set's questions.jsonl.
"""
import collections
import json
import os
import re
import sys

CORPUS = "fixtures/corpus"
QFILE = "bench/answer_blind6/questions.jsonl"
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

# expected question language per qid (the make-up of the set)
EN = {"m01", "m03", "m05", "m07", "m10", "m12", "m13", "m15", "m17", "m19", "m22", "m23",
      "m25", "m26", "m27", "m28", "m29", "m30", "m37", "m39", "m41", "m43", "m45", "m46"}
# expected extra groups per multi-hop qid
EXTRA = {"m03": {"finance"}, "m04": {"finance"}, "m11": {"finance"}, "m19": {"finance"},
         "m20": {"finance"}, "m21": {"finance"}, "m09": {"hr"}, "m12": {"hr"}, "m16": {"hr"},
         "m17": {"hr"}, "m22": {"hr"}, "m15": {"hr", "finance"}}

# negatives: kind and what was grepped
NEG = {
    # (a) entity never named: none of these strings may occur in a readable document
    "m37": ("a", {"forbid": ["Warsaw", "Варшав", "Poland", "Польш", "Polska"]}),
    "m38": ("a", {"forbid": ["Зайцев", "Zaytsev", "Zaitsev", "Марина", "Marina"]}),
    "m39": ("a", {"forbid": ["ERR_2060", "2060"]}),
    # (b) attribute never given
    "m40": ("b", {"line_pairs": ("ru-central", ["адрес", "address", "улиц", "street", "бульвар",
                                                "проспект", "шоссе", "д. "]),
                  "forbid": ["дата-центр находится по адресу", "data centre is located at",
                             "data center is located at", "data centre at", "data center at"]}),
    "m41": ("b", {"line_regex": ("Enterprise", r"\d[\d,. ]*\s*(customers|клиент|forwarders|экспедитор|workspaces)"),
                  "forbid": ["Enterprise customers:", "customers on the Enterprise plan",
                             "клиентов на тарифе Enterprise", "Enterprise-клиентов"]}),
    "m42": ("b", {"doc_forbid": ("services/shipments-api.md", ["max_weight", "maximum weight", "weight limit",
                                                               "kg per parcel", "heavier than"]),
                  "line_pairs": ("weight_kg", ["max", "limit", "не более", "максим"]),
                  "forbid": ["максимальный вес", "вес одной посылки", "вес посылки не"]}),
    # (c) answer only in a document the asker cannot read
    "m43": ("c", {"doc": "hr/performance-review-policy.md", "answer": "1 September"}),
    "m44": ("c", {"doc": "finance/q2-2025-report.md", "answer": "1.83 млн €"}),
    "m45": ("c", {"doc": "finance/budget-fy2026.md", "answer": "72.9"}),
    # (d) false premise / period not covered
    "m46": ("d", {"forbid": ["moved to Hamburg", "Hamburg office", "headquarters in Hamburg", "HQ in Hamburg",
                             "офис в Гамбурге", "штаб-квартира в Гамбурге", "переехала в Гамбург"],
                  "require": ("offices/berlin.md", "Berlin is Larkspur's headquarters")}),
    "m47": ("d", {"line_pairs": ("Webhook Relay", ["2024"]),
                  "forbid": ["INC-2024-0", "INC-2024-2", "INC-2024-3"],
                  "require": ("incidents/2025-08-webhook-backlog.md", "21 августа 2025")}),
    "m48": ("d", {"forbid": ["отказались от configsync", "stopped using configsync", "configsync was retired",
                             "configsync was removed", "retired configsync", "больше не используем configsync",
                             "отключили configsync", "configsync was switched off"],
                  "require": ("handbook/engineering-handbook.md",
                              "must be on `configsync` by the end of 2025")}),
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

        want_lang = "EN" if qid in EN else "RU"
        if lang(q["question"]) != want_lang:
            err(qid, "question language %s, the make-up wants %s" % (lang(q["question"]), want_lang))
        if kind not in ("local", "negative") and groups - BASE != EXTRA.get(qid, set()):
            err(qid, "extra groups %s, the make-up wants %s" % (sorted(groups - BASE), sorted(EXTRA.get(qid, set()))))
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
            if "line_regex" in spec:
                anchor_s, rx = spec["line_regex"]
                for d, v in readable.items():
                    for line in v["text"].splitlines():
                        if anchor_s.lower() in line.lower() and re.search(rx, line, re.I):
                            err(qid, "line in %s pairs %r with a count: %s" % (d, anchor_s, line.strip()[:100]))
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
