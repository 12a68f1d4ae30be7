"""A pytest plugin: the rules named in $NEUTRAL_RULES (comma-separated, as bench/rule_ablation.py names them,
its CHECKS included) neutralised before the tests are collected, to see which question forms a rule's unit
tests guard (a rule no answer set needs may still parse a form no set asks):

    NEUTRAL_RULES=answers.expected_type.PHONE PYTHONPATH=. .venv/bin/pytest -p bench.rule_ablation_pytest -m unit tests/
"""
from __future__ import annotations

import os


def neutralise_named(names: set[str]) -> list[tuple[object, list]]:
    """Each named rule replaced by its neutral form wherever the code holds it (bench.rule_ablation.restore
    takes them back)."""
    from bench.rule_ablation import answer_modules, check_rules, find_rules, neutralise

    rules = {**find_rules(answer_modules()), **check_rules()}
    unknown = names - {rule.name for rule in rules}
    if unknown:
        raise ValueError(f"no such rule: {', '.join(sorted(unknown))} (names as bench/rule_ablation.py reports them)")
    return neutralise((rule, value) for rule, value in rules.items() if rule.name in names)


def pytest_configure(config) -> None:
    names = {name for name in os.environ.get("NEUTRAL_RULES", "").split(",") if name}
    if names:
        neutralise_named(names)
