"""The demo corpus loads cleanly and its golden questions are consistent with its ACLs."""
from __future__ import annotations

import json
from collections import defaultdict

from tests.conftest import FIXTURES
from vector.ingest.sources import load_source

HR_ONLY = "Project Sandpiper"
FINANCE_ONLY = "Programme Nightjar"
INJECTION = "Ignore all previous instructions"


def corpus():
    docs, skipped = load_source(FIXTURES / "corpus", [], 5_000_000)
    assert skipped == []
    return {d.doc_id: d for d in docs}


def test_corpus_shape_languages_and_groups():
    docs = corpus()
    assert 25 <= len(docs) <= 40
    langs = defaultdict(int)
    for d in docs.values():
        langs[d.lang] += 1
    assert langs["russian"] >= 10 and langs["english"] >= 15
    assert {g for d in docs.values() for g in d.acl} == {"public", "staff", "hr", "finance"}
    assert sum("```" in d.text for d in docs.values()) >= 4
    assert sum("\n|" in d.text for d in docs.values()) >= 4


def test_restricted_names_appear_only_in_their_groups_documents():
    docs = corpus()
    hr_holders = [d for d in docs.values() if HR_ONLY in d.text]
    finance_holders = [d for d in docs.values() if FINANCE_ONLY in d.text]
    assert hr_holders and all("hr" in d.acl and "public" not in d.acl and "staff" not in d.acl for d in hr_holders)
    assert finance_holders and all(d.acl == ("finance",) for d in finance_holders)
    assert [d.doc_id for d in docs.values() if INJECTION in d.text] == ["handbook/customer-faq.md"]


def test_questions_point_at_documents_their_askers_may_read():
    docs = corpus()
    questions = [json.loads(line) for line in (FIXTURES / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line]
    assert len({q["qid"] for q in questions}) == len(questions) >= 24
    assert {q["route"] for q in questions} == {"local", "global", "multihop"}
    for q in questions:
        for doc_id in q["expected_docs"]:
            assert doc_id in docs, (q["qid"], doc_id)
            assert set(docs[doc_id].acl) & set(q["groups"]), (q["qid"], doc_id)
        if q.get("answer"):
            assert any(q["answer"].lower() in docs[d].text.lower() for d in q["expected_docs"]), q["qid"]
