"""The offline (extractive) community report: each sentence said once, however many entities share it."""
from __future__ import annotations

import re

from graph.indexing.reports import distinct_sentences, offline_report
from graph.types import GraphEntity, GraphRelationship


def test_offline_report_says_each_sentence_once():
    shared = "Anna Petrova and Boris Ivanov moved the billing service to the new cluster in March."
    headed = "Migration log: " + shared  # a heading run into the sentence by the source's layout
    ents = [
        GraphEntity("anna petrova", "Anna Petrova", "PERSON", f"{shared} Anna Petrova leads the platform team.", (1, 2), 2),
        GraphEntity("boris ivanov", "Boris Ivanov", "PERSON", f"{headed} Boris Ivanov runs the on-call rota.", (1, 3), 2),
        GraphEntity("billing", "Billing", "SYSTEM", shared, (1,), 2),
    ]
    rels = [GraphRelationship("anna petrova", "boris ivanov", shared, 5.0, (1,)),
            GraphRelationship("billing", "boris ivanov", "Boris Ivanov runs the on-call rota.", 3.0, (3,))]
    report = offline_report(ents, rels)
    said = report["summary"].split(". ") + [s for f in report["findings"] for s in f["explanation"].split(". ")]
    words = [" ".join(re.findall(r"\w+", s.lower())) for s in said]
    assert sum(shared.lower().rstrip(".") in w for w in words) == 1  # the shared sentence, headed or not, once
    # all Billing had was said already: no finding filled with "mentioned in 1 passage" for it
    assert not [f for f in report["findings"] if "billing" in f["entity_keys"]]
    assert all(f["explanation"] and "(" not in f["summary"] for f in report["findings"])  # no type tags


def test_offline_report_shows_no_co_occurrence_filler():
    ents = [GraphEntity("a", "Tellwave", "ORG", "Tellwave blocked the sender name for 40 minutes.", (1,), 1),
            GraphEntity("b", "Москва", "LOCATION", "Москва and Tellwave co-occur in Причины", (1,), 1)]
    rels = [GraphRelationship("a", "b", "Tellwave and Москва co-occur in Причины", 1.0, (1,))]
    report = offline_report(ents, rels)
    text = " ".join([report["summary"], *(f"{f['summary']} {f['explanation']}" for f in report["findings"])])
    assert "co-occur" not in text and "Tellwave blocked the sender name" in text


def test_distinct_sentences_keep_the_shorter_of_two_that_repeat_and_what_a_longer_one_adds():
    assert distinct_sentences(["Log: The disk filled up.", "The disk filled up.", "The disk filled up."]) == [
        "The disk filled up."]
    short, long = "No, it is true.", "He said no, it is true that the team shipped the whole engine in one year."
    assert distinct_sentences([long, short]) == [long, short]  # the long one says much more: both stay
    assert distinct_sentences(["A.", "", "  "]) == ["A."]
