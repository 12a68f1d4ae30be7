"""Progress of long jobs (api/cli/common.py): plain lines without a terminal, stages counted by chunk with
an ETA; Ctrl-C during an ingest or a graph build keeps what was saved, and a re-run resumes from it."""
from __future__ import annotations

import io
import sys

import pytest
import typer

from api.cli.common import PlainProgress, eta
from api.cli.search import settings_lines
from graph.indexing.contracts import STAGE_UNITS as GRAPH_UNITS, BuildSettings, OfflineReporter
from graph.indexing.extract_offline import OfflineExtractor
from graph.indexing.runner import build_graph
from tests.conftest import write_mini_dataset
from tests.test_jobs import stored_row
from vector.ingest.runner import STAGE_UNITS, IngestInterrupted, ingest_documents
from vector.ingest.sources import SourceDocument


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_name_the_stage_count_chunks_and_give_an_eta_every_10_percent_or_10_s():
    clock, stream = Clock(), io.StringIO()
    progress = PlainProgress("ingest", STAGE_UNITS, stream, clock)
    progress("parse", 0, 60)
    for n in range(1, 61):  # documents chunked quickly: one line at the start, then per 10%
        progress("parse", n, 60)
    progress("embed", 0, 5000)  # a new count (chunks): its own line and clock
    clock.now = 30.0
    progress("write", 1234, 5000)
    progress("write", 1240, 5000)  # under 10% and 10 s since the last line: silent
    clock.now = 45.0
    progress("write", 1300, 5000)  # 15 s since the last line
    progress("index", 0, 0)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "ingest: parse 0/60 documents (0%)"
    assert lines[1] == "ingest: parse 6/60 documents (10%)" and lines[10] == "ingest: parse 60/60 documents (100%)"
    assert lines[11:] == ["ingest: embed 0/5,000 chunks (0%)",
                          "ingest: write 1,234/5,000 chunks (24%), ETA 1m32s",  # 1,234 chunks in 30 s
                          "ingest: write 1,300/5,000 chunks (26%), ETA 2m08s",
                          "ingest: index"]
    assert progress.describe() == "index"


def test_graph_stages_without_a_count_are_named_once_and_eta_reads_well():
    clock, stream = Clock(), io.StringIO()
    progress = PlainProgress("graph build", GRAPH_UNITS, stream, clock)
    progress("extract", 0, 597)
    clock.now = 10.0
    progress("extract", 597, 597)
    progress("resolve", 0, 0)
    progress("communities", 0, 0)
    progress("reports", 0, 40)
    assert stream.getvalue().splitlines() == [
        "graph build: extract 0/597 chunks (0%)", "graph build: extract 597/597 chunks (100%)",
        "graph build: resolve", "graph build: communities", "graph build: reports 0/40 communities (0%)"]
    assert [eta(s) for s in (0, 45, 190, 3600 + 125)] == ["0s", "45s", "3m10s", "1h02m"]


def test_eval_output_names_the_settings_of_each_path():
    used = {"ranking": {"fusion": "zscore", "dense_weight": 0.5, "reranker": "offline", "configs": ["hybrid+rerank"],
                        "threshold": None, "passages": 30},
            "api": {"fusion": "zscore", "dense_weight": 0.5, "reranker": "offline", "query_transforms": [],
                    "threshold": 0.12, "threshold_source": "calibrated", "group_by": "document", "questions": 50,
                    "questions_cut": 14, "questions_short": 9}}
    ranking, api = settings_lines(used, 10)
    assert "fusion zscore" in ranking and "reranker offline" in ranking and "no threshold" in ranking
    assert "first 10 documents of 30 passages" in ranking
    assert "threshold 0.12 (calibrated)" in api and "14 of 50 questions" in api and "k=10, group_by document" in api
    over_http = settings_lines({"api": {"threshold": None, "threshold_source": "none", "group_by": "document",
                                        "questions": 2, "questions_cut": 0, "questions_short": 0,
                                        "url": "http://127.0.0.1:8000"}}, 5)
    assert "over HTTP at http://127.0.0.1:8000" in over_http[0] and "threshold none" in over_http[0]


def _documents(tenant: str, n: int) -> list[SourceDocument]:
    """Texts unique to the tenant: nothing cached elsewhere (vectors, extractions) makes the runs look resumed."""
    return [SourceDocument(f"ops/{i}.md", f"Gateway {i}", f"The {tenant} Gateway {i} retries calls to the Billing "
                           f"Service {i} in Lisbon.", ("staff",), "english", "test") for i in range(n)]


def test_an_interrupted_ingest_keeps_the_documents_written_and_a_rerun_does_the_rest(db, settings, local_embedder,
                                                                                     tenant):
    docs = _documents(tenant, 5)
    seen = []

    def ctrl_c_after_two_writes(stage: str, done: int, total: int) -> None:
        seen.append((stage, done, total))
        if [s for s, *_ in seen].count("write") == 2:
            raise KeyboardInterrupt

    with pytest.raises(IngestInterrupted) as stopped:
        ingest_documents(db, local_embedder, settings, tenant, docs, [], progress=ctrl_c_after_two_writes)
    assert (stopped.value.saved, stopped.value.documents) == (2, 5)
    assert seen[:7] == [("parse", n, 5) for n in range(6)] + [("embed", 0, 5)]  # one chunk each: 5 chunks
    assert seen[7:] == [("write", 1, 5), ("write", 2, 5)]

    stages = []
    again = ingest_documents(db, local_embedder, settings, tenant, docs, [], progress=lambda *s: stages.append(s))
    assert again.documents["unchanged"] == 2 and again.documents["added"] == 3 and again.clean
    assert stages[0] == ("parse", 0, 3) and stages[-2:] == [("write", 3, 3), ("index", 0, 0)]


def test_an_interrupted_graph_build_resumes_from_its_saved_extractions(db, settings, local_embedder, tenant):
    ingest_documents(db, local_embedder, settings, tenant, _documents(tenant, 4), [])

    def ctrl_c_at_the_second_chunk(stage: str, done: int, total: int) -> None:
        if (stage, done) == ("extract", 2):
            raise KeyboardInterrupt

    def build(progress=None):
        return build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), None, BuildSettings(), progress)

    with pytest.raises(KeyboardInterrupt):
        build(ctrl_c_at_the_second_chunk)
    with db.connection() as conn:
        job_id = conn.execute("SELECT max(id) FROM jobs WHERE tenant_id = %s", (tenant,)).fetchone()[0]
    assert stored_row(db, job_id)["status"] == "failed"  # the tenant's build slot is free at once
    stages = []
    job = build(lambda stage, done, total: stages.append(stage))
    level = job["counts"]["levels"][0]
    # the chunk being extracted when Ctrl-C came is finished and saved too; the ones queued are not started
    assert job["status"] == "done" and level["extraction_cached"] >= 2
    assert level["extracted"] == 4 - level["extraction_cached"]
    assert [s for s in dict.fromkeys(stages)] == ["extract", "resolve", "communities", "reports"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_new_tenant_is_confirmed_at_a_terminal_and_noted_in_a_script(db, tenant, monkeypatch, capsys):
    from api.cli.main import _confirm_new_tenant

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    with pytest.raises(typer.Exit) as refused:
        _confirm_new_tenant(db, tenant, yes=False)
    assert refused.value.exit_code == 1
    said = capsys.readouterr().err
    assert f"tenant '{tenant}' does not exist yet" in said and "nothing ingested" in said
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert _confirm_new_tenant(db, tenant, yes=False) is True
    assert _confirm_new_tenant(db, tenant, yes=True) is True and capsys.readouterr().err.count("create it?") == 1
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # a script: not asked, told
    assert _confirm_new_tenant(db, tenant, yes=False) is True
    assert f"tenant '{tenant}' is new" in capsys.readouterr().err
    from graph import store

    with db.connection() as conn:  # a tenant with access levels (or tokens) exists before its first document
        store.set_level(conn, tenant, "staff", ["staff"])
    assert _confirm_new_tenant(db, tenant, yes=False) is False and capsys.readouterr().err == ""


def test_eval_api_config_measures_what_post_v1_search_returns_in_process_and_over_http(db, settings, local_embedder,
                                                                                       client, tmp_path):
    import uuid

    from api import tokens
    from api.cli.search import API_CONFIG, _ServedSearch, _ThresholdStats, http_search
    from evaluation.datasets import load_dataset
    from evaluation.runner import eval_tenant, evaluate, index_dataset
    from vector.search.factory import make_searcher

    data = write_mini_dataset(tmp_path / f"api_{uuid.uuid4().hex[:6]}")
    dataset = load_dataset(data)
    index_dataset(db, local_embedder, settings, dataset)

    found_here, found_over_http = [], []

    def recorded(search, found: list):
        return lambda question, n: found.append(search(question, n)) or found[-1]

    served = _ServedSearch(make_searcher(db, settings, embedder=local_embedder), settings, dataset, 2)
    try:
        here = evaluate(None, dataset, [API_CONFIG], 2, extra={API_CONFIG: recorded(served, found_here)})[API_CONFIG]
    finally:
        served.close()
    with db.connection() as conn:
        token = tokens.create_token(conn, eval_tenant(dataset), ["public"], "reader", "eval")[0]
    client.headers["Authorization"] = f"Bearer {token}"
    try:
        stats = _ThresholdStats(2)
        over_http = evaluate(None, dataset, [API_CONFIG], 2,
                             extra={API_CONFIG: recorded(http_search(client, 2, stats), found_over_http)})[API_CONFIG]
    finally:
        del client.headers["Authorization"]
    # one path: the same documents for each question, whichever face asks
    assert found_here == found_over_http and all(len(docs) <= 2 for docs in found_here)
    assert {m: here[m] for m in ("recall", "mrr", "ndcg", "misses")} == \
        {m: over_http[m] for m in ("recall", "mrr", "ndcg", "misses")}
    assert served.stats.to_dict() | {"questions": 2} == stats.to_dict() | {"questions": 2}
    assert stats.to_dict()["group_by"] == "document" and stats.questions == 2
