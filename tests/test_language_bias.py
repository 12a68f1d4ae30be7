"""The vector leg across languages (vector/search/language_bias.py): each script's nearest moved onto
the question's scale by the scripts' mean vectors, means of what the reader may read only, kept per
reader for a while; a corpus short of either script is searched by raw cosine."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import ingest_corpus
from vector.search.hybrid import HybridSearcher
from vector.search.language_bias import MIN_SCRIPT_CHUNKS, ScriptMeans, calibrated


def test_the_questions_script_keeps_its_cosines_and_the_other_is_lifted_never_lowered():
    query = np.array([1.0, 0.0], dtype=np.float32)
    means = {False: np.array([0.6, 0.0], dtype=np.float32), True: np.array([0.1, 0.0], dtype=np.float32)}
    nearest = {False: [(1, 0.70), (2, 0.65)], True: [(7, 0.40), (5, 0.40), (9, 0.10)]}
    merged = calibrated(nearest, means, query, asked_cyrillic=False, limit=4)
    # Russian pages + (0.6 - 0.1); ties by id; at most `limit`
    assert merged == [(5, pytest.approx(0.9)), (7, pytest.approx(0.9)), (1, pytest.approx(0.7)),
                      (2, pytest.approx(0.65))]
    # asked in Russian, the question lies nearer the English centre: nothing moves
    assert calibrated(nearest, means, query, asked_cyrillic=True, limit=3) == [
        (1, pytest.approx(0.7)), (2, pytest.approx(0.65)), (5, pytest.approx(0.4))]


def test_means_are_read_once_per_reader_within_the_ttl_and_need_both_scripts():
    calls = []

    def load(conn, *, tenant, groups, model):
        calls.append((tenant, tuple(groups)))
        n = MIN_SCRIPT_CHUNKS if tenant == "mixed" else MIN_SCRIPT_CHUNKS - 1
        return {True: (n, np.ones(2, np.float32)), False: (MIN_SCRIPT_CHUNKS, np.zeros(2, np.float32))}

    means = ScriptMeans(load)
    first = means.get(None, tenant="mixed", groups=["staff", "public"], model="m")
    assert set(first) == {True, False}
    assert means.get(None, tenant="mixed", groups=["public", "staff"], model="m") is first
    assert means.get(None, tenant="mixed", groups=["public"], model="m") is not None  # another reader: its own
    assert means.get(None, tenant="few", groups=["public"], model="m") is None  # too few Russian chunks
    assert means.get(None, tenant="few", groups=["public"], model="m") is None
    assert calls == [("mixed", ("staff", "public")), ("mixed", ("public",)), ("few", ("public",))]
    expired = ScriptMeans(load, ttl_s=0.0)
    expired.get(None, tenant="mixed", groups=["public"], model="m")
    expired.get(None, tenant="mixed", groups=["public"], model="m")
    assert calls[-2:] == [("mixed", ("public",))] * 2


# --- the leg on a real database --------------------------------------------------------------------

TOPICS = ["backup", "billing", "hiring", "parking", "printing", "travel", "security", "lunch", "badges",
          "laptops", "wifi", "plants", "coffee", "meetings", "holidays", "parcels", "tickets", "lockers",
          "training", "mail", "keys", "cleaning", "music", "bikes", "showers"]


class ScriptBiasedEmbedder:
    """A toy model with the bias the real one has: each text is its topic plus a strong direction of
    its script, so by raw cosine every page of the question's script outranks a page of the other
    script on the question's own topic."""
    model_id, dimension = "toy-script-bias", len(TOPICS) + 2

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dimension, np.float32)
        for i, topic in enumerate(TOPICS):
            if topic in text.lower():
                v[i] = 1.0
        cyrillic = sum("а" <= ch <= "я" for ch in text.lower()) > sum("a" <= ch <= "z" for ch in text.lower())
        v[len(TOPICS) + int(cyrillic)] = 1.5
        return v / np.linalg.norm(v)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def embed_documents(self, texts) -> np.ndarray:
        return np.array([self._vector(t) for t in texts])


def _page(title: str, acl: str, body: str) -> str:
    return f"---\ntitle: {title}\nacl: [{acl}]\n---\n{body}\n"


CORPUS = {
    **{f"en/{t}.md": _page(t.title(), "public", f"Notes about {t} in the office, written for every employee to read.")
       for t in TOPICS[1:]},
    **{f"ru/{t}.md": _page(f"Заметка {i}", "public", f"Заметка номер {i} про {t}: её читают все сотрудники офиса.")
       for i, t in enumerate(TOPICS[1:])},
    "ru/answer.md": _page("Резервные копии", "public", "Про backup: копии базы снимаются каждую ночь и хранятся месяц."),
    "ru/secret.md": _page("Закрытая заметка", "hr", "Про backup отдела кадров: закрытые копии хранятся год."),
}


@pytest.fixture(scope="module")
def mixed_tenant(db, settings, tmp_path_factory) -> str:
    return ingest_corpus(db, settings, ScriptBiasedEmbedder(), tmp_path_factory.mktemp("mixed"), CORPUS,
                         "t_script_bias")


def test_a_page_in_the_other_language_that_answers_ranks_first(db, mixed_tenant):
    with HybridSearcher(db, ScriptBiasedEmbedder()) as searcher:
        result = searcher.search(mixed_tenant, ["public"], "How often is the backup taken?", k=5, mode="dense")
        assert result.trace["timings_ms"]["vector_scripts"] == "calibrated"
        assert result.hits[0].doc_id == "ru/answer.md"
        # the reader may not read the hr page: it is neither found nor part of the means
        assert all(h.doc_id != "ru/secret.md" for h in result.candidates)
        with db.connection() as conn:
            public = searcher._script_means.load(conn, tenant=mixed_tenant, groups=["public"], model="toy-script-bias")
            hr = searcher._script_means.load(conn, tenant=mixed_tenant, groups=["hr"], model="toy-script-bias")
        assert public[True][0] == len(TOPICS) and public[False][0] == len(TOPICS) - 1
        assert set(hr) == {True} and hr[True][0] == 1


def test_a_corpus_short_of_one_script_is_searched_by_raw_cosine(db, mixed_tenant):
    with HybridSearcher(db, ScriptBiasedEmbedder()) as searcher:
        # a reader of the hr page only sees one Russian chunk: no means, the plain leg
        result = searcher.search(mixed_tenant, ["hr"], "How often is the backup taken?", k=5, mode="dense")
        assert "vector_scripts" not in result.trace["timings_ms"]
        assert [h.doc_id for h in result.hits] == ["ru/secret.md"]


def test_past_the_bound_on_what_the_reader_may_read_the_leg_stays_raw(db, mixed_tenant, monkeypatch):
    import vector.search.hybrid as hybrid
    monkeypatch.setattr(hybrid, "SCRIPT_MEANS_UP_TO", len(TOPICS))  # the public reader reads about twice that
    with HybridSearcher(db, ScriptBiasedEmbedder()) as searcher:
        result = searcher.search(mixed_tenant, ["public"], "How often is the backup taken?", k=5, mode="dense")
        assert "vector_scripts" not in result.trace["timings_ms"]
        assert result.hits[0].doc_id.startswith("en/")  # the bias the lift would have undone


def test_units_compared_in_meaning_survive_hostile_text(local_embedder):
    """The extractive answer embeds passage units at question time (answers/unit_similarity.py): text
    that aborts the C tokenizer unguarded, lone surrogates and NULs give finite cosines, in order."""
    from answers.unit_similarity import EmbeddingSimilarity

    texts = ["\ufdfa" * 40 + " резервные копии", "a\udc80b\x00c", "Резервные копии снимаются каждую ночь.", ""]
    cosines = EmbeddingSimilarity(local_embedder)("When are backups taken?", texts)
    assert len(cosines) == 4 and all(np.isfinite(cosines)) and all(-1.0 <= c <= 1.0 + 1e-6 for c in cosines)
    assert EmbeddingSimilarity(local_embedder)("When?", []) == []


def test_an_answer_read_in_a_hostile_page_of_the_other_language_is_judged_without_failing(local_embedder):
    """The unit is embedded after its page's heading path (answers/unit_similarity.py `in_its_page`) and
    judged by the gate: a heading that aborts the C tokenizer unguarded, lone surrogates and NULs in the
    page give a finite confidence, shown or withheld by the gate's threshold."""
    from answers.local import local_answer
    from answers.other_language_gate import load_gate
    from answers.question import Question
    from answers.types import Passage
    from answers.unit_similarity import EmbeddingSimilarity

    gate = load_gate(local_embedder.model_id)
    assert gate is not None
    page = Passage(1, "ru/hostile.md", "\ufdfa" * 40, "\ufdfa" * 40 + " > a\udc80b\x00c",
                   "Офис открылся в 2021 г.\n\n" + "\ufdfa" * 30 + " переехал в 2023 г.", relevance=0.01)
    answer = local_answer(Question("When did the office open?"), [page], similarity=EmbeddingSimilarity(local_embedder),
                          gate=gate)
    assert answer.closeness is not None and np.isfinite(answer.closeness) and 0.0 <= answer.confidence <= 1.0
    assert answer.threshold == gate.threshold
