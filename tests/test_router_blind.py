"""The blind router check set (bench/router_blind): well-formed, balanced as its README says, and still
blind, i.e. no question of it has been copied into the router's training set or the fixtures. Pure: the
measurement itself (`make eval-router-blind`) embeds every question and is not run here."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from bench.router_blind import BLIND_SET, copies_in_training, load_blind
from answers.types import ROUTES


def test_blind_set_is_balanced_and_labelled():
    rows = load_blind(BLIND_SET)
    assert Counter(r["route"] for r in rows) == {route: 80 for route in ROUTES}
    assert Counter(r["language"] for r in rows) == {"en": 144, "ru": 96}
    assert len({r["domain"] for r in rows}) >= 10
    assert len({r["question"].lower() for r in rows}) == len(rows)


def test_blind_set_shares_no_question_with_the_training_set_or_fixtures():
    assert copies_in_training(load_blind(BLIND_SET)) == []


@pytest.mark.parametrize("row, message", [
    ({"question": "Who?", "route": "agentic", "language": "en", "domain": "legal", "kind": "factual"}, "route"),
    ({"question": " ", "route": "local", "language": "en", "domain": "legal", "kind": "factual"}, "question"),
    ({"question": "Who?", "route": "local", "language": "en", "domain": "legal"}, "kind"),
])
def test_a_malformed_row_is_refused_with_its_line(tmp_path, row, message):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"set.jsonl:1: .*{message}"):
        load_blind(path)
