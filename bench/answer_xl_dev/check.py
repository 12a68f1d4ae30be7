#!/usr/bin/env python3
"""Sanity check for bench/answer_xl_dev/questions.jsonl (standard library only).

Run from the repository root:  python3 bench/answer_xl_dev/check.py
Prints one line per problem and finally `errors: N`.
"""
import json
import re
import sys
from pathlib import Path

QFILE = Path("bench/answer_xl_dev/questions.jsonl")
CORPUS = Path("fixtures/corpus")
N = 48
FIELDS = ["qid", "question", "expected_docs", "route", "groups", "answer", "aliases"]
BASE_GROUPS = {"public", "staff"}
OPTIONAL_GROUPS = {"hr", "finance"}

CYR = re.compile(r"[\u0400-\u04FF]")
LAT = re.compile(r"[A-Za-z]")


def lang(text):
    """'ru' when Cyrillic letters outnumber Latin ones, else 'en'."""
    c, l = len(CYR.findall(text)), len(LAT.findall(text))
    return "ru" if c > l else "en"


def parse_acl(text):
    m = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    if not m:
        return None
    for line in m.group(1).splitlines():
        if line.startswith("acl:"):
            return {g.strip() for g in line[4:].strip().strip("[]").split(",") if g.strip()}
    return None


def body(text):
    return re.sub(r"^---\n.*?\n---\n", "", text, count=1, flags=re.S)


def main():
    errors = []
    err = errors.append
    lines = QFILE.read_text(encoding="utf-8").splitlines()
    if len(lines) != N:
        err(f"expected {N} lines, found {len(lines)}")
    for i, line in enumerate(lines, 1):
        want = f"x{i:02d}"
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            err(f"line {i}: bad JSON: {e}")
            continue
        qid = q.get("qid")
        if qid != want:
            err(f"line {i}: qid {qid!r}, expected {want}")
        tag = qid or f"line {i}"
        if list(q) != FIELDS:
            err(f"{tag}: fields {list(q)} != {FIELDS}")
        if q.get("route") != "local":
            err(f"{tag}: route {q.get('route')!r} != 'local'")
        docs = q.get("expected_docs")
        if not isinstance(docs, list) or len(docs) != 1:
            err(f"{tag}: expected_docs must hold exactly one doc: {docs!r}")
            continue
        path = CORPUS / docs[0]
        if not path.is_file():
            err(f"{tag}: expected doc does not exist: {docs[0]}")
            continue
        text = path.read_text(encoding="utf-8")
        acl = parse_acl(text)
        if acl is None:
            err(f"{tag}: no acl in front matter of {docs[0]}")
            continue
        groups = q.get("groups")
        if not isinstance(groups, list):
            err(f"{tag}: groups is not a list")
            continue
        gs = set(groups)
        if not BASE_GROUPS <= gs or not gs <= BASE_GROUPS | OPTIONAL_GROUPS or len(gs) != len(groups):
            err(f"{tag}: groups {groups} must be public, staff plus optionally hr/finance")
        if not gs & acl:
            err(f"{tag}: groups {groups} cannot read {docs[0]} (acl {sorted(acl)})")
        extra = gs - BASE_GROUPS
        if extra and (BASE_GROUPS & acl):
            err(f"{tag}: extra groups {sorted(extra)} not required by acl {sorted(acl)}")
        for g in extra:
            if g not in acl:
                err(f"{tag}: group {g} not in acl {sorted(acl)}")
        ans = q.get("answer")
        if not isinstance(ans, str) or not ans.strip():
            err(f"{tag}: empty answer")
        elif ans.lower() not in text.lower():
            err(f"{tag}: answer {ans!r} not found in {docs[0]}")
        aliases = q.get("aliases")
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
            err(f"{tag}: aliases must be a list of non-empty strings")
        else:
            low = [a.strip().lower() for a in aliases]
            if len(set(low)) != len(low):
                err(f"{tag}: duplicate aliases {aliases}")
            if isinstance(ans, str) and ans.strip().lower() in low:
                err(f"{tag}: an alias repeats the answer")
        qlang, dlang = lang(q.get("question", "")), lang(body(text))
        n = int(want[1:])
        if n <= 40:
            if qlang == dlang:
                err(f"{tag}: question ({qlang}) and doc ({dlang}) must differ in language")
            if n <= 20 and (qlang, dlang) != ("en", "ru"):
                err(f"{tag}: x01-x20 must be an English question on a Russian doc ({qlang}/{dlang})")
            if 21 <= n <= 40 and (qlang, dlang) != ("ru", "en"):
                err(f"{tag}: x21-x40 must be a Russian question on an English doc ({qlang}/{dlang})")
        else:
            if qlang != dlang:
                err(f"{tag}: control question ({qlang}) and doc ({dlang}) must share a language")
    ctl = [json.loads(l) for l in lines[40:48]] if len(lines) >= 48 else []
    ctl_langs = [lang(c["question"]) for c in ctl]
    if ctl and (ctl_langs.count("en"), ctl_langs.count("ru")) != (4, 4):
        err(f"controls x41-x48 must be 4 EN and 4 RU, got {ctl_langs}")
    for e in errors:
        print(e)
    print(f"errors: {len(errors)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
