"""Index sync against a real PostgreSQL and the real local model: what changes, what does not."""
from __future__ import annotations

import textwrap

import pytest

from tests.conftest import CountingEmbedder
from vector.ingest import runner as ingest_module
from vector import store
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import load_source

LONG_EN = textwrap.dedent(
    """\
    ---
    title: Payments Gateway
    acl: [staff]
    ---
    # Payments Gateway

    ## Limits

    The gateway accepts at most 200 requests per second per merchant. Bursts above the limit get HTTP 429.
    Each merchant may raise the limit by contacting the payments team. The limit resets every second.

    ## Retries

    Failed calls are retried five times with exponential backoff starting at 200 ms. Error ERR_2043 means the
    carrier rate limit was hit. After the fifth failure the request is parked in the dead letter queue.
    Operators drain the queue every morning at 09:00 UTC. Parked requests older than 7 days are dropped.

    ## Ownership

    The gateway is owned by the Payments Platform team, led by Dana Whitfield.
    """
)

RU = textwrap.dedent(
    """\
    ---
    title: Отпуск
    acl: [hr]
    ---
    # Политика отпусков

    Сотрудник получает 28 календарных дней отпуска в год, т.е. больше минимума. Заявление подаётся за две недели.
    Перенос отпуска на следующий год согласуется с руководителем и т.д.
    """
)

SHORT = "---\ntitle: Status page\nacl: [public]\n---\nThe status page lives at status.example.org and refreshes every minute.\n"


def write_corpus(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def run_ingest(db, settings, embedder, tenant, root, prune=False):
    docs, skipped = load_source(root, [], settings.max_document_bytes)
    return ingest_documents(db, embedder, settings, tenant, docs, skipped, prune=prune)


def snapshot(db, tenant):
    """Row identity and version of every chunk and document: any write changes xmin."""
    with db.connection() as conn:
        chunks = conn.execute(
            "SELECT doc_id, chunk_no, id, xmin::text, acl FROM chunks WHERE tenant_id = %s ORDER BY doc_id, chunk_no",
            (tenant,),
        ).fetchall()
        docs = conn.execute(
            "SELECT doc_id, xmin::text, version FROM documents WHERE tenant_id = %s ORDER BY doc_id", (tenant,)
        ).fetchall()
    return chunks, docs


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    write_corpus(root, {"payments.md": LONG_EN, "hr/vacation.md": RU, "status.md": SHORT})
    return root


def test_first_ingest_indexes_every_chunk_with_vectors_language_and_acl(db, settings, embedder, tenant, corpus):
    report = run_ingest(db, settings, embedder, tenant, corpus)
    assert report.documents["added"] == 3 and report.clean
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT doc_id, chunk_no, heading, lang, acl, embed_model, vector_dims(embedding) FROM chunks"
            " WHERE tenant_id = %s ORDER BY doc_id, chunk_no",
            (tenant,),
        ).fetchall()
        indexed = conn.execute("SELECT index_name FROM embedding_models WHERE embed_model = %s", (embedder.model_id,)).fetchone()
        ru_hit = conn.execute(
            "SELECT doc_id FROM chunks WHERE tenant_id = %s AND tsv @@ websearch_to_tsquery('russian', 'отпуском')",
            (tenant,),
        ).fetchall()
    assert report.chunks["added"] == len(rows) > 3
    assert embedder.texts_embedded == report.embeddings_computed == len({r[:2] for r in rows})
    assert {r[0] for r in rows} == {"payments.md", "hr/vacation.md", "status.md"}
    assert all(r[5] == embedder.model_id and r[6] == 384 for r in rows)
    by_doc = {r[0]: r for r in rows}
    assert by_doc["hr/vacation.md"][3] == "russian" and by_doc["hr/vacation.md"][4] == ["hr"]
    assert by_doc["payments.md"][3] == "english" and by_doc["payments.md"][4] == ["staff"]
    assert any(r[2] == "Payments Gateway > Retries" for r in rows)
    assert indexed is not None
    assert ru_hit == [("hr/vacation.md",)]  # Russian stemming: "отпуском" finds "отпуска"


def test_columns_search_filters_on_stay_inline_and_only_the_text_may_move_to_toast(db, settings, embedder, tenant, corpus):
    """With the vector and tsvector inline, a row is past the TOAST target, and PostgreSQL would move
    every other wide-enough column out of line: each heap-side ACL or model check would then cost a
    TOAST lookup (migrations 009, 010, 015)."""
    run_ingest(db, settings, embedder, tenant, corpus)
    inline = ("tenant_id", "doc_id", "heading", "context", "acl", "content_hash", "lang", "embed_model", "tsv", "embedding")
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT doc_id, chunk_no, pg_column_size(c.*), "
            + ", ".join(f"pg_column_toast_chunk_id({col}) IS NULL" for col in inline)
            + " FROM chunks c WHERE tenant_id = %s ORDER BY doc_id, chunk_no", (tenant,),
        ).fetchall()
    assert any(size > 2032 for _, _, size, *_ in rows)  # rows wide enough for the toaster to act on
    for doc_id, chunk_no, _, *flags in rows:
        assert all(flags), (doc_id, chunk_no, [c for c, ok in zip(inline, flags) if not ok])


def test_unchanged_reingest_writes_nothing_and_embeds_nothing(db, settings, embedder, tenant, corpus):
    run_ingest(db, settings, embedder, tenant, corpus)
    before = snapshot(db, tenant)
    again = CountingEmbedder(embedder.inner)
    report = run_ingest(db, settings, again, tenant, corpus)
    assert report.documents == dict(added=0, changed=0, unchanged=3, deleted=0, skipped=0, metadata_updated=0, failed=0)
    assert report.chunks == dict(added=0, changed=0, deleted=0)
    assert again.calls == 0 and report.embeddings_computed == 0
    assert snapshot(db, tenant) == before


def test_editing_one_paragraph_reembeds_only_that_chunk(db, settings, embedder, tenant, corpus):
    run_ingest(db, settings, embedder, tenant, corpus)
    (chunks_before, _) = snapshot(db, tenant)
    edited = LONG_EN.replace("Operators drain the queue every morning at 09:00 UTC.", "Operators drain the queue at 10:30 UTC.")
    (corpus / "payments.md").write_text(edited, encoding="utf-8")
    again = CountingEmbedder(embedder.inner)
    report = run_ingest(db, settings, again, tenant, corpus)
    assert report.documents["changed"] == 1 and report.documents["unchanged"] == 2
    assert report.chunks == dict(added=0, changed=1, deleted=0)
    assert again.texts_embedded == 1
    chunks_after, _ = snapshot(db, tenant)
    changed = [a for a, b in zip(chunks_after, chunks_before) if a != b]
    assert len(changed) == 1 and changed[0][0] == "payments.md"
    with db.connection() as conn:
        text = conn.execute(
            "SELECT content FROM chunks WHERE tenant_id = %s AND id = %s", (tenant, changed[0][2])
        ).fetchone()[0]
    assert "10:30 UTC" in text


def test_inserted_text_shifting_chunks_reuses_existing_vectors(db, settings, embedder, tenant, tmp_path):
    sections = "\n\n".join(f"## Part {i}\n\nPart {i} explains step {i} of the rollout in detail. It has one more sentence." for i in range(6))
    root = tmp_path / "c"
    write_corpus(root, {"guide.md": f"---\nacl: [staff]\n---\n# Guide\n\n{sections}\n"})
    run_ingest(db, settings, embedder, tenant, root)
    write_corpus(root, {"guide.md": f"---\nacl: [staff]\n---\n# Guide\n\n## Intro\n\nA brand new introduction.\n\n{sections}\n"})
    again = CountingEmbedder(embedder.inner)
    report = run_ingest(db, settings, again, tenant, root)
    assert report.chunks["added"] == 1 and report.chunks["changed"] == 6
    assert again.texts_embedded == 1  # only the new introduction; shifted parts reuse their vectors
    assert report.vectors_reused == 6


def test_acl_change_applies_everywhere_without_reembedding(db, settings, embedder, tenant, corpus):
    run_ingest(db, settings, embedder, tenant, corpus)
    (corpus / "payments.md").write_text(LONG_EN.replace("acl: [staff]", "acl: [staff, finance]"), encoding="utf-8")
    again = CountingEmbedder(embedder.inner)
    report = run_ingest(db, settings, again, tenant, corpus)
    assert report.documents["metadata_updated"] == 1 and report.documents["changed"] == 0
    assert again.calls == 0
    with db.connection() as conn:
        acls = conn.execute(
            "SELECT DISTINCT acl FROM chunks WHERE tenant_id = %s AND doc_id = 'payments.md'", (tenant,)
        ).fetchall()
        doc_acl = conn.execute(
            "SELECT acl FROM documents WHERE tenant_id = %s AND doc_id = 'payments.md'", (tenant,)
        ).fetchone()
    assert acls == [(["finance", "staff"],)] and doc_acl == (["finance", "staff"],)


def test_explicit_acl_command_path(db, settings, embedder, tenant, corpus):
    run_ingest(db, settings, embedder, tenant, corpus)
    with db.connection() as conn:
        assert store.set_acl(conn, tenant, "status.md", ["staff"]) is True
        assert store.set_acl(conn, tenant, "missing.md", ["staff"]) is False
        acl = conn.execute("SELECT DISTINCT acl FROM chunks WHERE tenant_id = %s AND doc_id = 'status.md'", (tenant,)).fetchall()
    assert acl == [(["staff"],)]


def test_prune_deletes_removed_documents_but_not_unreadable_ones(db, settings, embedder, tenant, corpus):
    run_ingest(db, settings, embedder, tenant, corpus)
    (corpus / "status.md").unlink()
    (corpus / "hr/vacation.md").write_bytes("Отпуск".encode("cp1251"))  # now unreadable, must survive
    report = run_ingest(db, settings, embedder, tenant, corpus, prune=True)
    assert report.documents["deleted"] == 1 and report.documents["skipped"] == 1
    assert not report.clean
    with db.connection() as conn:
        docs = [r[0] for r in conn.execute("SELECT doc_id FROM documents WHERE tenant_id = %s ORDER BY 1", (tenant,))]
        orphan_chunks = conn.execute(
            "SELECT count(*) FROM chunks WHERE tenant_id = %s AND doc_id = 'status.md'", (tenant,)
        ).fetchone()[0]
    assert docs == ["hr/vacation.md", "payments.md"] and orphan_chunks == 0


def test_without_prune_removed_files_stay(db, settings, embedder, tenant, corpus):
    run_ingest(db, settings, embedder, tenant, corpus)
    (corpus / "status.md").unlink()
    report = run_ingest(db, settings, embedder, tenant, corpus)
    assert report.documents["deleted"] == 0


def test_delete_command_removes_document_and_chunks(db, settings, embedder, tenant, corpus):
    run_ingest(db, settings, embedder, tenant, corpus)
    with db.connection() as conn:
        assert store.delete_documents(conn, tenant, ["payments.md", "nope.md"])[0] == 1
        left = conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = %s AND doc_id = 'payments.md'", (tenant,)).fetchone()
    assert left == (0,)


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing in the runner catches it."""


class CrashingEmbedder(CountingEmbedder):
    def __init__(self, inner, crash_on_call: int):
        super().__init__(inner)
        self.crash_on_call = crash_on_call

    def embed_documents(self, texts):
        if self.calls + 1 == self.crash_on_call:
            raise Crash()
        return super().embed_documents(texts)


def test_crash_mid_ingest_then_rerun_leaves_no_duplicate_and_no_half_document(
    db, settings, embedder, tenant, tmp_path, monkeypatch
):
    root = tmp_path / "many"
    # every sentence marked with its document, so no chunk text (and no vector) is shared between them
    write_corpus(root, {f"doc{i}.md": LONG_EN.replace(". ", f". Doc {i}. ").replace("Dana", f"Doc {i} Dana") for i in range(6)})
    monkeypatch.setattr(ingest_module, "CHUNKS_PER_GROUP", 3)  # 3 chunks per document: one group each
    with pytest.raises(Crash):
        run_ingest(db, settings, CrashingEmbedder(embedder.inner, crash_on_call=3), tenant, root)
    with db.connection() as conn:
        landed = conn.execute("SELECT count(*) FROM documents WHERE tenant_id = %s", (tenant,)).fetchone()[0]
    assert landed == 2
    report = run_ingest(db, settings, embedder, tenant, root)
    assert report.documents["unchanged"] == 2 and report.documents["added"] == 4
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT doc_id, array_agg(chunk_no ORDER BY chunk_no), count(*) FROM chunks WHERE tenant_id = %s GROUP BY doc_id",
            (tenant,),
        ).fetchall()
    assert len(rows) == 6
    counts = {r[2] for r in rows}
    assert len(counts) == 1  # every document complete, same shape
    assert all(r[1] == list(range(r[2])) for r in rows)  # no gaps, no duplicates


def test_failure_inside_a_document_transaction_keeps_the_old_version(db, settings, embedder, tenant, corpus, monkeypatch):
    run_ingest(db, settings, embedder, tenant, corpus)
    before = snapshot(db, tenant)
    (corpus / "payments.md").write_text(LONG_EN.replace("200 requests", "300 requests"), encoding="utf-8")
    (corpus / "status.md").write_text(SHORT.replace("every minute", "every 30 seconds"), encoding="utf-8")
    real_write = store.write_document

    def write_then_fail(conn, tenant_, plan, vectors, model):
        if plan.doc_id == "payments.md":
            vectors = {}  # the COPY breaks after the DELETE ran, inside the transaction
        return real_write(conn, tenant_, plan, vectors, model)

    monkeypatch.setattr(store, "write_document", write_then_fail)
    report = run_ingest(db, settings, embedder, tenant, corpus)
    assert report.documents["failed"] == 1 and report.errors[0]["doc_id"] == "payments.md"
    assert report.documents["changed"] == 1  # status.md still landed
    after_chunks, _ = snapshot(db, tenant)
    payments_before = [r for r in before[0] if r[0] == "payments.md"]
    assert [r for r in after_chunks if r[0] == "payments.md"] == payments_before


class GroupWatchingEmbedder(CountingEmbedder):
    """Records how many embeddings run at once, and when each call starts; call `wrong_shape_on` returns
    one vector too few (an embedder that broke)."""

    def __init__(self, inner, wrong_shape_on: int | None = None):
        super().__init__(inner)
        self.wrong_shape_on = wrong_shape_on
        self.started = {}  # call number -> threading.Event, set when it begins
        self.running = self.most_at_once = 0
        self.lock = __import__("threading").Lock()

    def embed_documents(self, texts):
        import threading

        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            call = self.calls + 1
            self.started.setdefault(call, threading.Event()).set()
        try:
            vectors = super().embed_documents(texts)
            return vectors[:-1] if call == self.wrong_shape_on else vectors
        finally:
            with self.lock:
                self.running -= 1


def test_a_group_is_embedded_while_the_one_before_it_is_written_one_embedding_at_a_time(
        db, settings, embedder, tenant, tmp_path, monkeypatch):
    import threading

    root = tmp_path / "groups"
    write_corpus(root, {f"doc{i}.md": LONG_EN.replace(". ", f". Doc {i}. ").replace("Dana", f"Doc {i} Dana") for i in range(4)})
    monkeypatch.setattr(ingest_module, "CHUNKS_PER_GROUP", 3)  # one document per group
    watching = GroupWatchingEmbedder(embedder.inner)
    real_write = store.write_document
    overlapped = []

    def write_while_the_next_group_embeds(conn, tenant_, plan, vectors, model):
        if plan.doc_id == "doc0.md":  # a serial runner would embed the second group only after this write
            second = watching.started.setdefault(2, threading.Event())
            overlapped.append(second.wait(timeout=20))
        return real_write(conn, tenant_, plan, vectors, model)

    monkeypatch.setattr(store, "write_document", write_while_the_next_group_embeds)
    report = run_ingest(db, settings, watching, tenant, root)
    assert overlapped == [True] and watching.most_at_once == 1 and watching.calls == 4
    assert report.documents["added"] == 4 and report.embeddings_computed == report.chunks["added"] and report.clean


def test_a_group_whose_embedding_breaks_is_counted_failed_and_the_others_land(db, settings, embedder, tenant, tmp_path,
                                                                             monkeypatch):
    root = tmp_path / "broken"
    write_corpus(root, {f"doc{i}.md": LONG_EN.replace(". ", f". Doc {i}. ").replace("Dana", f"Doc {i} Dana") for i in range(3)})
    monkeypatch.setattr(ingest_module, "CHUNKS_PER_GROUP", 3)
    report = run_ingest(db, settings, GroupWatchingEmbedder(embedder.inner, wrong_shape_on=2), tenant, root)
    assert report.documents["added"] == 2 and report.documents["failed"] == 1 and not report.clean
    assert [e["doc_id"] for e in report.errors] == ["doc1.md"] and "returned shape" in report.errors[0]["error"]
    again = run_ingest(db, settings, embedder, tenant, root)  # retried next time, the others left alone
    assert again.documents["added"] == 1 and again.documents["unchanged"] == 2
