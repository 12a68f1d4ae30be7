"""bench/answer_diff.py: two answer dumps compared question by question, verdicts only. Pure, no database."""
from __future__ import annotations

import json

from bench.answer_diff import compare, main


def _dataset(qid, right, head, answer="a"):
    return {"set": "multihop", "qid": qid, "route": "multihop", "right": right, "head_right": head, "answer": answer}


def _golden(qid, score, head, answer="a"):
    return {"set": "blind", "qid": qid, "route": "local", "score": score, "head": head, "answer": answer}


def test_each_set_and_route_reports_changes_and_both_scores_moved_each_way():
    before = [_dataset("1", True, False), _dataset("2", False, False), _dataset("3", True, True),
              _golden("n1", 0.0, None), _golden("g1", 1.0, 1.0)]
    after = [_dataset("1", True, True, "b"), _dataset("2", True, False, "c"), _dataset("3", False, False, "d"),
             _golden("n1", 1.0, None, "withheld"), _golden("g1", 1.0, 0.0, "e"), _golden("only-after", 1.0, 1.0)]
    blind, multihop = compare(before, after)
    assert (multihop.questions, multihop.changed) == (3, 3)
    assert (multihop.lenient.before, multihop.lenient.after) == (2 / 3, 2 / 3)
    assert (multihop.lenient.paired.better, multihop.lenient.paired.worse) == (1, 1)
    assert (multihop.head.paired.better, multihop.head.paired.worse) == (1, 1)
    # a negative has no gold line: its head is its score, as bench.answer_eval counts it
    assert (blind.questions, blind.changed) == (2, 2)
    assert (blind.head.before, blind.head.after) == (0.5, 0.5)
    assert (blind.lenient.paired.better, blind.head.paired.worse) == (1, 1)


def test_the_report_names_no_answer_text_and_an_unreadable_dump_is_a_clear_error(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([_golden("1", 0.0, 0.0, "SECRET BEFORE")]), encoding="utf-8")
    b.write_text(json.dumps([_golden("1", 1.0, 1.0, "SECRET AFTER")]), encoding="utf-8")
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "SECRET" not in out and "1 of   1 changed" in out
    (tmp_path / "bad.json").write_bytes(b"\xff{not json")
    assert main([str(a), str(tmp_path / "bad.json")]) == 2
    assert "bench.answer_eval --dump" in capsys.readouterr().err
    for wrong in ({"set": "x"}, [1, 2], [{"qid": "1"}], "text", [_golden("1", "high", {"a": 1})]):
        (tmp_path / "wrong.json").write_text(json.dumps(wrong), encoding="utf-8")
        assert main([str(a), str(tmp_path / "wrong.json")]) == 2
    assert main([str(a), str(tmp_path / "missing.json")]) == 2
