"""POST /v1/search's `min_score` and `group_by`, the `threshold` it reports, and unknown fields refused.

The cut itself is checked on a scripted searcher (no database); the HTTP tests run the real searcher,
with the offline reranker's calibrated threshold, over a small corpus of their own tenant.
"""
from __future__ import annotations

import uuid

import pytest

from api import usecases
from tests.conftest import bearer, reader_and_writer
from vector.search.hybrid import Candidate, SearchResult

TENANT = f"searchopt_{uuid.uuid4().hex[:8]}"
PROBLEM = "application/problem+json"
FILLER = ("The gateway keeps a log of every call it forwards, with the caller, the route and the time taken. "
          "Operators read the log when a team reports slow answers or failed calls. ")
DOCS = [
    {"doc_id": "retry.md", "acl": ["staff"], "text": "# Retry policy\n\nThe retry limit for error 429 is five "
     "attempts with exponential backoff.\n\n## Backoff\n\n" + FILLER * 4 + "Backoff doubles after each retry of 429."},
    {"doc_id": "limits.md", "acl": ["staff"], "text": "# Rate limits\n\nError 429 means the rate limit was hit; "
     "retry after the time in the Retry-After header.\n\n## Quotas\n\n" + FILLER * 4 + "Quotas reset hourly."},
    {"doc_id": "welcome.md", "acl": ["staff"], "text": "# Welcome\n\nThe Platform team runs the Kestrel Gateway."},
    {"doc_id": "hr-retry.md", "acl": ["hr"], "text": "# Retry bonus\n\nThe retry bonus for error 429 handling of "
     "Project Sandpiper is confidential: five thousand."},
]



# --- the cut, on a scripted searcher ------------------------------------------------------------------


def _candidate(chunk_id: int, doc_id: str) -> Candidate:
    return Candidate(id=chunk_id, doc_id=doc_id, title=doc_id, heading="", text=f"text {chunk_id}", lang="english")


class ScriptedSearcher:
    """A searcher whose reranker scored chunks 1..6 (docs a, a, b, c, b, d) 0.9 .. 0.05, threshold 0.3."""

    def __init__(self, reranked: bool = True):
        self.reranked, self.asked = reranked, []

    def search(self, tenant, groups, query, k=10, mode="hybrid+rerank"):
        self.asked.append(k)
        docs = ["a", "a", "b", "c", "b", "d"]
        scores = [0.9, 0.8, 0.5, 0.2, 0.1, 0.05]
        candidates = [_candidate(i + 1, d) for i, d in enumerate(docs)]
        if not self.reranked:  # the reranker failed: fused scores, no threshold
            for c in candidates:
                c.score = 1.0 / c.id
            return SearchResult(candidates[:k], candidates, True, "reranker offline failed: boom",
                                {"stages": {"rerank": []}})
        stage = [{"id": c.id, "rank": r, "score": s} for r, (c, s) in enumerate(zip(candidates, scores), start=1)][:k]
        hits = [_candidate(e["id"], docs[e["id"] - 1]) for e in stage if e["score"] >= 0.3]
        return SearchResult(hits, candidates, trace={"stages": {"rerank": stage}, "rerank_threshold": 0.3})


def test_the_calibrated_threshold_cuts_and_says_where():
    out = usecases.search(ScriptedSearcher(), "t", ["g"], "q", 6)
    assert [h["id"] for h in out.hits] == [1, 2, 3]
    assert out.threshold == {"min_score": 0.3, "source": "calibrated", "applied": True, "cut": 3, "cut_at_rank": 4,
                             "other_script_kept": 0}


def test_min_score_given_or_null_replaces_the_calibrated_one():
    out = usecases.search(ScriptedSearcher(), "t", ["g"], "q", 6, min_score=0.85)
    assert [h["id"] for h in out.hits] == [1] and out.threshold["cut"] == 5 and out.threshold["cut_at_rank"] == 2
    assert out.threshold["source"] == "request" and out.threshold["min_score"] == 0.85
    out = usecases.search(ScriptedSearcher(), "t", ["g"], "q", 4, min_score=None)
    assert [h["id"] for h in out.hits] == [1, 2, 3, 4] and [h["score"] for h in out.hits] == [0.9, 0.8, 0.5, 0.2]
    assert out.threshold == {"min_score": None, "source": "none", "applied": False, "cut": 0, "cut_at_rank": None,
                             "other_script_kept": 0}


def test_group_by_document_gives_k_distinct_documents_from_3k_passages():
    searcher = ScriptedSearcher()
    out = usecases.search(searcher, "t", ["g"], "q", 2, min_score=None, group_by="document")
    assert searcher.asked == [6] and out.group_by == "document"
    assert [(h["doc_id"], h["id"]) for h in out.hits] == [("a", 1), ("b", 3)]  # each document's best passage
    out = usecases.search(ScriptedSearcher(), "t", ["g"], "q", 10, group_by="document")
    assert [h["doc_id"] for h in out.hits] == ["a", "b"]  # the calibrated cut applies before grouping


def test_no_threshold_on_fused_scores_when_the_reranker_failed():
    out = usecases.search(ScriptedSearcher(reranked=False), "t", ["g"], "q", 3, min_score=0.99)
    assert [h["id"] for h in out.hits] == [1, 2, 3] and out.degraded
    assert out.threshold == {"min_score": None, "source": "none", "applied": False, "cut": 0, "cut_at_rank": None,
                             "other_script_kept": 0}


# --- over HTTP -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tok(db, client):
    return reader_and_writer(db, client, TENANT, DOCS)


def _search(client, token, **body):
    r = client.post("/v1/search", json={"query": "What is the retry limit for error 429?", **body},
                    headers=bearer(token))
    assert r.status_code == 200, r.text
    return r.json()


def test_search_reports_the_calibrated_threshold_and_null_lifts_it(client, tok):
    default = _search(client, tok["staff"], k=6)
    assert default["threshold"]["source"] == "calibrated" and default["threshold"]["applied"] is True
    cutoff = default["threshold"]["min_score"]
    assert 0 < cutoff < 1 and all(h["score"] >= cutoff for h in default["hits"])
    assert default["hits"][0]["doc_id"] == "retry.md" and default["group_by"] == "chunk"
    everything = _search(client, tok["staff"], k=6, min_score=None)
    assert everything["threshold"]["applied"] is False and everything["threshold"]["cut"] == 0
    assert len(everything["hits"]) == len(default["hits"]) + default["threshold"]["cut"]  # nothing lost silently
    assert default["threshold"]["cut"] == sum(1 for h in everything["hits"] if h["score"] < cutoff)
    strict = _search(client, tok["staff"], k=6, min_score=0.999999)
    assert strict["threshold"]["source"] == "request" and strict["threshold"]["cut_at_rank"] == len(strict["hits"]) + 1


def test_group_by_document_and_no_threshold_never_reach_an_unreadable_document(client, tok):
    out = _search(client, tok["staff"], k=100, min_score=None, group_by="document")
    docs = [h["doc_id"] for h in out["hits"]]
    assert len(docs) == len(set(docs)) and set(docs) == {"retry.md", "limits.md", "welcome.md"}
    assert "hr-retry" not in str(out) and "Sandpiper" not in str(out)
    writer = _search(client, tok["writer"], k=100, min_score=None, group_by="document")
    assert "hr-retry.md" in {h["doc_id"] for h in writer["hits"]}  # the control: the filter is the token's groups


@pytest.mark.parametrize("extra,field", [
    ({"mode": "bm25"}, "mode"), ({"groups": ["hr"]}, "groups"), ({"tenant": "other"}, "tenant"),
    ({"min_score": "high"}, "min_score"), ({"min_score": 1e300 * 10}, "min_score"), ({"group_by": "page"}, "group_by"),
    ({"min_scor": 0.5}, "min_scor"),
])
def test_unknown_and_bad_fields_are_422_naming_them(client, tok, extra, field):
    r = client.post("/v1/search", json={"query": "retry 429", **extra}, headers=bearer(tok["staff"]))
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
    assert field in [e["field"] for e in r.json()["errors"]] and field in r.json()["detail"]


def test_nan_min_score_is_422(client, tok):
    r = client.post("/v1/search", content=b'{"query": "retry", "min_score": NaN}',
                    headers={**bearer(tok["staff"]), "Content-Type": "application/json"})
    assert r.status_code in (400, 422) and r.headers["content-type"].startswith(PROBLEM), r.text


def test_openapi_describes_the_options(client):
    spec = client.get("/openapi.json").json()["components"]["schemas"]
    request = spec["SearchRequest"]
    assert request["additionalProperties"] is False
    assert "default" not in request["properties"]["min_score"]  # absent and null differ
    assert request["properties"]["group_by"]["enum"] == ["chunk", "document"]
    assert set(spec["Threshold"]["properties"]) == {"min_score", "source", "applied", "cut", "cut_at_rank",
                                                      "other_script_kept"}
    assert "threshold" in spec["SearchResponse"]["required"]


def test_the_cli_reads_min_score_as_the_api_does():
    import typer

    from api.cli.search import _min_score

    assert _min_score(None) == usecases.CALIBRATED and _min_score("none") is None and _min_score(" None ") is None
    assert _min_score("0.25") == 0.25
    for bad in ("high", "nan", "inf", ""):
        with pytest.raises(typer.Exit):
            _min_score(bad)


class CheckingSearcher(ScriptedSearcher):
    """The scripted searcher with a code check that answers, or fails as a dying database does."""

    def __init__(self, fails: bool):
        super().__init__()
        self.fails, self.checked = fails, []

    def unmentioned(self, tenant, groups, codes, misspellings=False, spellings=False):
        self.checked.append(tuple(codes))
        if self.fails:
            import psycopg

            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return tuple(c for c in codes if c != "ERR_2043")


def test_the_codes_no_readable_document_holds_are_named_and_a_failed_check_degrades_only():
    searcher = CheckingSearcher(fails=False)
    out = usecases.search(searcher, "t", ["g"], "ERR_2043 or ERR_9999?", 6)
    assert out.unmentioned == ("ERR_9999",) and searcher.checked == [("ERR_2043", "ERR_9999")] and not out.degraded
    assert usecases.search(searcher, "t", ["g"], "retry 429", 6).unmentioned == () and len(searcher.checked) == 1
    broken = usecases.search(CheckingSearcher(fails=True), "t", ["g"], "ERR_9999", 6)
    assert [h["id"] for h in broken.hits] == [1, 2, 3] and broken.unmentioned == ()
    assert broken.degraded and "codes no readable document mentions failed" in broken.degraded_reason
    names = CheckingSearcher(fails=False)
    assert usecases.search(names, "t", ["g"], "Is Elena Smirnova on call?", 6).unmentioned == ("Elena Smirnova",)
    assert names.checked == [("Elena", "Smirnova")]
    broken = usecases.search(CheckingSearcher(fails=True), "t", ["g"], "Is Elena Smirnova on call?", 6)
    assert broken.hits and broken.unmentioned == () and "names no readable document mentions failed" in broken.degraded_reason
