"""bench/rule_count.py: what it counts as a rule (issue 39's "net rule code must go down"). Pure, no git."""
from __future__ import annotations

from bench.rule_count import RuleCount, count_python, count_toml, main, total


def test_regexes_and_literal_word_lists_are_counted_with_their_lines():
    source = '''
import re
WORD = re.compile(r"\\w+")
ASKS = re.compile(
    r"(?:when|what year)",
)
MONTHS = frozenset({"january", "february", "march"})
PAIR = "and or versus".split()
NESTED = [("a", "b", "c"), ("d", "e", "f")]
TWO = ("only", "two")  # too short to be a word list
NUMBERS = (1, 2, 3)
'''
    assert count_python(source) == RuleCount(regexes=2, word_lists=4, entries=12, rule_lines=8)


def test_a_word_file_counts_each_list_and_word():
    toml = 'function_words = ["the", "a", "of"]\n[ordering]\nolder = ["older", "earlier"]\n'
    assert count_toml(toml) == RuleCount(word_lists=2, entries=5)


def test_total_adds_every_field():
    assert total({"a": RuleCount(1, 2, 3, 4), "b": RuleCount(10, 20, 30, 40)}) == RuleCount(11, 22, 33, 44)


def test_a_commit_git_cannot_read_is_a_clear_error(capsys):
    assert main(["--at", "no-such-commit-\u00e9"]) == 2
    assert "give a commit of this repository" in capsys.readouterr().err
