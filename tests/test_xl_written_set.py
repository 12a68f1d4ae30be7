"""bench/answer_xl_written holds what its README says: every answer is in its unit and its unit in its one
gold document; qids are unique over every file; a negative names no gold and no answer."""
import json
from pathlib import Path

from evaluation.datasets import load_dataset

SET = Path(__file__).resolve().parent.parent / "bench" / "answer_xl_written"


def _lines(pattern: str) -> list[dict]:
    return [json.loads(line) for path in sorted(SET.glob(pattern)) for line in path.open(encoding="utf-8")
            if line.strip()]


def test_the_cross_language_set_is_consistent():
    documents = {d["_id"]: d["text"] for d in _lines("corpus.jsonl")}
    asked = _lines("queries.jsonl") + _lines("same_language_*.jsonl")
    negatives = _lines("negatives_*.jsonl") + [q for q in asked if not q["answers"]]
    answerable = [q for q in asked if q["answers"]]
    qids = [q["qid"] for q in _lines("queries.jsonl") + _lines("same_language_*.jsonl") + _lines("negatives_*.jsonl")]
    assert len(documents) == 48 and len(qids) == len(set(qids))
    for q in answerable:
        (gold,) = q["gold"]
        assert q["answers"][0] in q["answer_unit"] and q["answer_unit"] in documents[gold], q["qid"]
    assert all(not q.get("answers") and not q.get("gold") and q["about"] in documents for q in negatives)
    assert len(load_dataset(SET).queries) == 384  # the dataset's own questions: all answerable
