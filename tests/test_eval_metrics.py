"""Evaluation harness, pure parts: the seed's metric definitions, dataset loaders, README report."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evaluation.datasets import DatasetError, find_datasets, load_dataset
from evaluation.metrics import (
    QueryScores,
    dedupe_docs,
    evidence_recall_at_k,
    ndcg_at_k,
    percentile,
    precision_at_k,
    recall_at_k,
    reciprocal_rank,
    score_query,
    summarise,
)
from evaluation.report import markdown_table, replace_readme_section

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

# The seed's `eval_retrieval.py --demo` golden set and search results, verbatim ids.
DEMO_GOLDEN = [
    ("q1", {"limits#2": 2, "go-sdk#5": 2, "errors#1": 1}),
    ("q2", {"limits#1": 1}),
    ("q3", {"billing#4": 2}),
]
DEMO_RESULTS = {
    "q1": ["go-sdk#5", "changelog#9", "limits#2", "python-sdk#3", "errors#1"],
    "q2": ["limits#3", "limits#1", "batch#2"],
    "q3": ["billing#1", "faq#7", "billing#2"],
}


def test_seed_demo_numbers():
    # Expected output of the seed: "n=3  recall@5=0.667  MRR=0.500  nDCG@5=0.512", "MISS: q3".
    scores = [score_query(qid, DEMO_RESULTS[qid], grades, 5) for qid, grades in DEMO_GOLDEN]
    s = summarise(scores)
    assert s["n"] == 3
    assert f"{s['recall']:.3f}" == "0.667"
    assert f"{s['mrr']:.3f}" == "0.500"
    assert f"{s['ndcg']:.3f}" == "0.512"
    assert s["misses"] == ["q3"]


def test_seed_self_checks():
    rel = {"a": 2, "b": 1}
    assert recall_at_k(["x", "a", "y"], set(rel), 2) == 0.5
    assert reciprocal_rank(["x", "a"], set(rel), 10) == 0.5
    assert ndcg_at_k(["a", "b"], rel, 2) == 1.0
    assert 0 < ndcg_at_k(["b", "a"], rel, 2) < 1


def test_graded_ndcg_hand_computed():
    grades = {"a": 3, "b": 2, "c": 1, "z": 0}
    # ranked b, x, a at k=3:
    #   DCG  = (2^2-1)/log2(2) + 0/log2(3) + (2^3-1)/log2(4) = 3 + 0 + 7/2          = 6.5
    #   IDCG = 7/log2(2) + 3/log2(3) + 1/log2(4)             = 7 + 1.892789 + 0.5   = 9.392789
    #   nDCG = 6.5 / 9.392789 = 0.692021
    assert ndcg_at_k(["b", "x", "a"], grades, 3) == pytest.approx(6.5 / (7 + 3 / math.log2(3) + 0.5))
    assert ndcg_at_k(["b", "x", "a"], grades, 3) == pytest.approx(0.692021, abs=1e-6)
    # A grade-0 document earns nothing: ranked z, a at k=2: DCG = 0 + 7/log2(3) = 4.416508;
    #   IDCG = 7 + 3/log2(3) = 8.892789; nDCG = 0.496640
    assert ndcg_at_k(["z", "a"], grades, 2) == pytest.approx(0.496640, abs=1e-6)
    # The seed's demo question 1 (grades 2, 2, 1), ranked go-sdk, -, limits, -, errors at k=5:
    #   DCG = 3 + 3/2 + 1/log2(6) = 4.886853; IDCG = 3 + 3/log2(3) + 1/2 = 5.392789; nDCG = 0.906183
    q1 = dict(DEMO_GOLDEN[0][1])
    assert ndcg_at_k(DEMO_RESULTS["q1"], q1, 5) == pytest.approx(0.906183, abs=1e-6)
    # Perfect order is 1 at any k; nothing relevant gives 0 (seed), not a division error.
    assert ndcg_at_k(["a", "b", "c"], grades, 3) == pytest.approx(1.0)
    assert ndcg_at_k(["a"], {"a": 0}, 3) == 0.0


def test_idcg_counts_relevant_documents_never_retrieved():
    # Only "a" is retrieved, at rank 1; "b" (grade 1) is known relevant but missing.
    #   DCG = 1; IDCG = 1 + 1/log2(3) = 1.630930; nDCG = 0.613147 (not 1.0)
    assert ndcg_at_k(["a"], {"a": 1, "b": 1}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # IDCG keeps only the k best grades: at k=1 the ideal is one grade-1 document.
    assert ndcg_at_k(["a"], {"a": 1, "b": 1}, 1) == 1.0


def test_recall_precision_rr_respect_k():
    relevant = {"a", "b"}
    ranked = ["x", "y", "a", "b"]
    assert recall_at_k(ranked, relevant, 2) == 0.0
    assert recall_at_k(ranked, relevant, 3) == 0.5
    assert precision_at_k(ranked, relevant, 4) == 0.5
    assert precision_at_k(["a"], relevant, 4) == 0.25  # fewer hits than k are not rewarded
    assert reciprocal_rank(ranked, relevant, 2) == 0.0  # first relevant is beyond k
    assert reciprocal_rank(ranked, relevant, 3) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        recall_at_k(ranked, set(), 5)
    with pytest.raises(ValueError):
        precision_at_k(ranked, relevant, 0)


def test_evidence_recall_all_or_nothing():
    gold = {"p1", "p2", "p3"}
    assert evidence_recall_at_k(["p1", "x", "p2", "p3"], gold, 4) == 1.0
    assert evidence_recall_at_k(["p1", "x", "p2", "p3"], gold, 3) == 0.0
    assert evidence_recall_at_k(["p1", "p2"], gold, 10) == 0.0
    s = score_query("q", ["p1", "p2", "p3"], {g: 1 for g in gold}, 2, multi_gold=True)
    assert s.evidence_recall == 0.0 and s.missing == ("p3",)
    assert score_query("q", ["p1"], {"p1": 1}, 2).evidence_recall is None


def test_dedupe_by_document():
    # Chunks of doc "a" at ranks 1 and 3: the document counts once, at rank 1.
    chunk_docs = ["a", "b", "a", "c", "b", "d"]
    assert dedupe_docs(chunk_docs) == ["a", "b", "c", "d"]
    s = score_query("q", chunk_docs, {"c": 1, "d": 1}, 3)
    # Deduplicated top-3 is a, b, c: c found at rank 3; d found too late.
    assert s.found == ("a", "b", "c") and s.recall == 0.5 and s.rr == pytest.approx(1 / 3)
    assert s.missing == ("d",)
    # Without dedupe "a" would score twice in DCG; here DCG = 3 / log2(2) = 3 = IDCG.
    assert score_query("q", ["a", "a", "b"], {"a": 2}, 3).ndcg == 1.0


def test_percentile_linear_interpolation():
    values = [10, 20, 30, 40]
    assert percentile(values, 0) == 10
    assert percentile(values, 100) == 40
    assert percentile(values, 50) == 25  # halfway between 20 and 30
    assert percentile(values, 95) == pytest.approx(38.5)  # pos 2.85: 30 + 0.85 * 10
    assert percentile([7.0], 95) == 7.0
    assert percentile([3, 1, 2], 50) == 2  # unsorted input
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_summarise_means_latency_and_multi_gold():
    scores = [
        QueryScores("a", 1.0, 0.2, 1.0, 1.0, evidence_recall=1.0, latency_ms=10.0),
        QueryScores("b", 0.5, 0.1, 0.5, 0.5, evidence_recall=0.0, latency_ms=30.0),
        QueryScores("c", 0.0, 0.0, 0.0, 0.0, latency_ms=20.0),
    ]
    s = summarise(scores)
    assert s["n"] == 3 and s["recall"] == pytest.approx(0.5) and s["mrr"] == pytest.approx(0.5)
    assert s["evidence_recall"] == 0.5 and s["n_multi_gold"] == 2
    assert s["p50_ms"] == 20.0 and s["p95_ms"] == pytest.approx(29.0)
    assert s["misses"] == ["c"]
    empty = summarise([])
    assert empty["n"] == 0 and empty["recall"] is None and empty["p95_ms"] is None


# ---- dataset loaders ----------------------------------------------------------------------------

def make_dataset(root: Path, queries: list | str, qrels: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "x"}\n', encoding="utf-8")
    text = queries if isinstance(queries, str) else "".join(json.dumps(q) + "\n" for q in queries)
    (root / "queries.jsonl").write_text(text, encoding="utf-8")
    if qrels is not None:
        (root / "qrels.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_load_gold_lists(tmp_path):
    d = make_dataset(tmp_path / "mh", [
        {"qid": "q1", "question": "Who?", "answer": "Ann", "aliases": ["Anne", "Ann"], "qtype": "2hop", "gold": ["p1", "p2"]},
        {"qid": 7, "question": "Что?", "answers": ["ответ"], "gold": ["p3"]},
        {"qid": "q3", "question": "Graded?", "gold": {"p4": 2, "p5": 0}},
    ])
    ds = load_dataset(d)
    assert ds.name == "mh" and ds.labelled and ds.label_source == "gold"
    assert ds.corpus_path == d / "corpus.jsonl"
    q1, q2, q3 = ds.queries
    assert q1.grades == {"p1": 1, "p2": 1} and q1.multi_gold and q1.qtype == "2hop"
    assert q1.answers == ["Ann", "Anne"]
    assert q2.qid == "7" and q2.grades == {"p3": 1} and not q2.multi_gold and q2.answers == ["ответ"]
    assert q3.grades == {"p4": 2} and not q3.multi_gold


def test_load_graded_qrels_with_header(tmp_path):
    d = make_dataset(
        tmp_path / "beir",
        [{"qid": "q1", "question": "a"}, {"qid": "q2", "question": "b"}, {"qid": "q3", "question": "c"}],
        "qid\tdoc_id\tgrade\nq1\td1\t2\nq1\td2\t0\nq1\td3\t1\n\nq2\td9\t0\n",
    )
    ds = load_dataset(d)
    assert ds.labelled and ds.label_source == "qrels"
    q1, q2, q3 = ds.queries
    assert q1.grades == {"d1": 2, "d3": 1} and q1.relevant == {"d1", "d3"}
    assert q1.judged_irrelevant == {"d2"} and not q1.multi_gold
    # Only-irrelevant and unjudged questions cannot be scored: the harness skips them.
    assert q2.grades == {} and q3.grades == {}
    assert [q.qid for q in ds.scored_queries] == ["q1"] and ds.unjudged == ["q2", "q3"]


def test_qrels_without_header(tmp_path):
    d = make_dataset(tmp_path / "b", [{"qid": "1", "question": "a"}], "1\t5\t3\n")
    assert load_dataset(d).queries[0].grades == {"5": 3}


def test_unlabelled_dataset(tmp_path):
    d = make_dataset(tmp_path / "podcast", [{"qid": "g1", "question": "What themes recur?"}])
    ds = load_dataset(d)
    assert not ds.labelled and ds.label_source is None and ds.queries[0].grades == {}


@pytest.mark.parametrize("queries, qrels, message", [
    ('{"qid": "q1", "question": "a", "gold": ["p"]}\n{not json\n', None, "queries.jsonl:2: not valid JSON"),
    ('{"qid": "q1", "question": "a", "gold": ["p"]}\n\n["list"]\n', None, "queries.jsonl:3: line is not a JSON object"),
    ('{"question": "a", "gold": ["p"]}\n', None, "queries.jsonl:1: missing 'qid'"),
    ('{"qid": "q1", "gold": ["p"]}\n', None, "queries.jsonl:1: 'question'"),
    ('{"qid": "q1", "question": "a", "gold": ["p"]}\n{"qid": "q1", "question": "b", "gold": ["p"]}\n', None,
     "queries.jsonl:2: duplicate qid 'q1' (first at line 1)"),
    ('{"qid": "q1", "question": "a", "gold": ["p"]}\n{"qid": "q2", "question": "b"}\n', None,
     "queries.jsonl:2: no 'gold'"),
    ('{"qid": "q1", "question": "a", "gold": []}\n', None, "queries.jsonl:1: 'gold' names no relevant"),
    ('{"qid": "q1", "question": "a", "gold": "p1"}\n', None, "queries.jsonl:1: 'gold' must be"),
    ('{"qid": "q1", "question": "a", "gold": ["p"], "aliases": [1]}\n', None, "queries.jsonl:1: 'aliases'"),
    ('{"qid": "q1", "question": "a"}\n', "qid\tdoc\tgrade\nq1\td1\t1\nq1\td2\n", "qrels.tsv:3: expected 3"),
    ('{"qid": "q1", "question": "a"}\n', "q1\td1\t1\nq1\td2\thigh\n", "qrels.tsv:2: grade 'high'"),
    ('{"qid": "q1", "question": "a"}\n', "q1\td1\t1\nq9\td2\t1\n", "qrels.tsv:2: qid 'q9' is not in"),
    ('{"qid": "q1", "question": "a"}\n', "q1\td1\t1\nq1\td1\t2\n", "qrels.tsv:2: 'q1'/'d1' graded 2, but 1 at line 1"),
    ('{"qid": "q1", "question": "a", "gold": ["p"]}\n', "q1\td1\t1\n", "queries.jsonl:1: 'gold' in queries and a qrels.tsv"),
])
def test_malformed_files_name_the_line(tmp_path, queries, qrels, message):
    d = make_dataset(tmp_path / "bad", queries, qrels)
    with pytest.raises(DatasetError) as info:
        load_dataset(d)
    assert message in str(info.value)
    assert str(d) in str(info.value)


def test_missing_files(tmp_path):
    with pytest.raises(DatasetError, match="no queries.jsonl"):
        load_dataset(tmp_path)
    (tmp_path / "queries.jsonl").write_text('{"qid": "q", "question": "a"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="no corpus.jsonl"):
        load_dataset(tmp_path)


# ---- the real evaluation data, when this machine has it -----------------------------------------

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is absent")


def _corpus_ids(path: Path) -> set[str]:
    with path.open(encoding="utf-8") as handle:
        return {str(json.loads(line)["_id"]) for line in handle if line.strip()}


@needs_data
def test_real_datasets_match_readme():
    found = {p.name for p in find_datasets(SHARED_DATA)}
    expected = {  # name: (queries, labelled, label source), from ../shared/data/README.md
        "multihop": (100, True, "gold"),
        "xquad_ru": (100, True, "gold"),
        "anthropic_docs": (50, True, "gold"),
        "beir_msmarco": (25, True, "qrels"),
        "beir_dbpedia": (25, True, "qrels"),
        "podcast": (25, False, None),
    }
    for name, (count, labelled, source) in expected.items():
        if name not in found:
            continue
        ds = load_dataset(SHARED_DATA / name)
        assert (len(ds.queries), ds.labelled, ds.label_source) == (count, labelled, source), name
        if not labelled:
            assert all(not q.grades for q in ds.queries)
            continue
        # Every labelled id is a corpus document, or it could never be found.
        ids = _corpus_ids(ds.corpus_path)
        assert all(d in ids for q in ds.queries for d in q.grades), name
        if source == "gold":
            assert not ds.unjudged, name
    if "multihop" in found:
        mh = load_dataset(SHARED_DATA / "multihop")
        assert all(2 <= len(q.grades) <= 4 and q.multi_gold and q.answers and q.qtype for q in mh.queries)
    if "xquad_ru" in found:
        xq = load_dataset(SHARED_DATA / "xquad_ru")
        assert all(len(q.grades) == 1 and not q.multi_gold and q.answers for q in xq.queries)
    if "anthropic_docs" in found:
        ad = load_dataset(SHARED_DATA / "anthropic_docs")
        assert all(1 <= len(q.grades) <= 4 for q in ad.queries)
        assert any(q.multi_gold for q in ad.queries)


@needs_data
def test_real_beir_qrels_parsed():
    for name, grades_seen in (("beir_msmarco", {1, 2, 3}), ("beir_dbpedia", {1, 2})):
        if not (SHARED_DATA / name).is_dir():
            continue
        ds = load_dataset(SHARED_DATA / name)
        assert {g for q in ds.queries for g in q.grades.values()} == grades_seen, name
        assert not any(q.multi_gold for q in ds.queries)
        # Some questions have no positive judgment (dev data: msmarco 5, dbpedia 6); they are
        # not scorable, and everything else is.
        assert 0 < len(ds.unjudged) < len(ds.queries) and len(ds.scored_queries) + len(ds.unjudged) == 25
        rows = [l for l in (SHARED_DATA / name / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:] if l.strip()]
        kept = sum(len(q.grades) + len(q.judged_irrelevant) for q in ds.queries)
        assert kept == len(rows), name  # header skipped, every judgment line kept
    if (SHARED_DATA / "beir_dbpedia").is_dir():
        assert any(q.judged_irrelevant for q in load_dataset(SHARED_DATA / "beir_dbpedia").queries)


# ---- report -------------------------------------------------------------------------------------

def _summary(recall, p50=12.34):
    return {"n": 3, "recall": recall, "precision": 0.2, "mrr": 0.5, "ndcg": 0.51234,
            "evidence_recall": None, "p50_ms": p50, "p95_ms": 40.0}


def test_markdown_table_order_and_format():
    results = {
        "xquad_ru": {"hybrid+rerank": _summary(1.0), "bm25": _summary(0.9), "dense": _summary(0.95)},
        "anthropic_docs": {"custom": _summary(0.1), "hybrid": _summary(0.8)},
    }
    table = markdown_table(results, 10)
    lines = table.strip().split("\n")
    assert lines[0].startswith("| dataset | config | n | recall@10 | precision@10 | MRR | nDCG@10 |")
    assert [l.split(" | ")[:2] for l in lines[2:]] == [
        ["| anthropic_docs", "hybrid"], ["| anthropic_docs", "custom"],
        ["| xquad_ru", "dense"], ["| xquad_ru", "bm25"], ["| xquad_ru", "hybrid+rerank"],
    ]
    assert "| xquad_ru | dense | 3 | 0.950 | 0.200 | 0.500 | 0.512 | — | 12.3 | 40.0 |" in lines
    assert markdown_table(dict(reversed(list(results.items()))), 10) == table  # deterministic


README = """# Crossroads

Intro.

## Retrieval quality

old table

### Notes kept inside the section

old notes

```bash
## not a heading: a shell comment
```

## Benchmark

numbers
"""


def test_replace_readme_section_replaces_and_is_idempotent():
    once = replace_readme_section(README, "| new | table |\n")
    assert "old table" not in once and "old notes" not in once and "not a heading" not in once
    assert "## Retrieval quality\n\n| new | table |\n\n## Benchmark\n\nnumbers\n" in once
    assert once.startswith("# Crossroads\n\nIntro.\n\n## Retrieval quality")
    assert replace_readme_section(once, "| new | table |\n") == once
    assert replace_readme_section(once, "| new | table |") == once


def test_replace_readme_section_appends_when_missing():
    text = "# Crossroads\n\n## Usage\n\nrun it\n"
    once = replace_readme_section(text, "table")
    assert once == "# Crossroads\n\n## Usage\n\nrun it\n\n## Retrieval quality\n\ntable\n"
    assert replace_readme_section(once, "table") == once
    # Last section of the file replaced in place, another body.
    assert replace_readme_section(once, "other").endswith("## Retrieval quality\n\nother\n")
    assert replace_readme_section("", "t") == "## Retrieval quality\n\nt\n"
    with pytest.raises(ValueError):
        replace_readme_section(text, "## sneaky heading")
