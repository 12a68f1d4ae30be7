"""The rule ablation harness (bench/rule_ablation.py) neutralises a rule wherever the answer code reaches it."""
import pytest

from answers import expected_type
from answers.chain import targets
from bench.rule_ablation import NEVER, _replace, _restore, answer_modules, find_rules

pytestmark = pytest.mark.unit


def test_a_rule_held_in_a_dict_is_neutralised_there_too_and_restored():
    email = expected_type.EMAIL
    places = _replace(email, NEVER)
    try:
        assert expected_type.EMAIL is NEVER
        assert expected_type.FORMS["email"] is NEVER  # the answer writers reach it only through FORMS
        assert targets.FORMS["email"] is NEVER
        assert not expected_type.FORMS["email"].search("ops@example.org")
    finally:
        _restore(places, email)
    assert expected_type.EMAIL is email and expected_type.FORMS["email"] is email
    assert expected_type.FORMS["email"].search("ops@example.org")


def test_rules_are_found_once_by_the_module_that_defines_them():
    names = [rule.name for rule in find_rules(answer_modules())]
    assert "answers.expected_type.EMAIL" in names
    assert len(names) == len(set(names))
    assert not any(name.startswith("answers.chain.targets.FORMS") for name in names)


def test_a_check_written_as_code_is_switched_off_where_the_writer_calls_it():
    from answers import premise, writer
    from answers.unit_scoring import Scorer
    from bench.rule_ablation import check_rules, neutralise, restore

    checks = {rule.name: (rule, value) for rule, value in check_rules().items()}
    assert set(checks) == {"answers.unit_scoring.Scorer.unsaid", "answers.premise.unstated_numbers"}
    numbers = checks["answers.premise.unstated_numbers"][1]
    unsaid = checks["answers.unit_scoring.Scorer.unsaid"][1]
    held = neutralise(checks.values())
    try:
        assert writer.unstated_numbers(None, [], []) == ()  # the name the writer calls, not only the module's
        assert Scorer.unsaid(None, None) == ()
    finally:
        restore(held)
    assert writer.unstated_numbers is premise.unstated_numbers is numbers and vars(Scorer)["unsaid"] is unsaid


def test_the_pytest_plugin_neutralises_the_named_rules_and_refuses_unknown_names():
    from bench.rule_ablation import restore
    from bench.rule_ablation_pytest import neutralise_named

    held = neutralise_named({"answers.expected_type.PHONE", "answers.premise.unstated_numbers"})
    try:
        assert expected_type.FORMS["phone"] is NEVER
        assert expected_type.FORMS["email"] is not NEVER
        from answers import writer
        assert writer.unstated_numbers(None, [], []) == ()
    finally:
        restore(held)
    assert expected_type.FORMS["phone"] is expected_type.PHONE is not NEVER
    with pytest.raises(ValueError, match="no such rule"):
        neutralise_named({"answers.no_such_rule"})
