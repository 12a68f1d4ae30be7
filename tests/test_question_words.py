"""The per-language word classes of questions (answers/words/*.toml): their shape, and that a class is
every language's words."""
from __future__ import annotations

import re
import tomllib

import pytest

from answers.question_text import AUX_START, CONJUNCTIONS, FUNCTION_WORDS
from answers.words import HERE, LANGUAGES, word_class

CYRILLIC = re.compile(r"[А-Яа-яЁё]")


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_file_is_lists_of_lowercase_single_words_of_its_own_script(language):
    table = tomllib.loads((HERE / f"{language}.toml").read_text(encoding="utf-8"))
    assert table and all(isinstance(words, list) and words for words in table.values())
    for name, words in table.items():
        assert len(words) == len(set(words)), f"{language}.{name} repeats a word"
        for word in words:
            assert isinstance(word, str) and word == word.lower() and word.strip() and " " not in word, (name, word)
            assert bool(CYRILLIC.search(word)) == (language == "russian"), (language, name, word)


def test_a_class_is_the_union_of_the_languages_and_an_unknown_one_is_an_error():
    assert {"the", "и", "является", "are"} <= FUNCTION_WORDS | AUX_START
    assert {"or", "или"} <= CONJUNCTIONS
    tables = [tomllib.loads((HERE / f"{lang}.toml").read_text(encoding="utf-8")) for lang in LANGUAGES]
    assert word_class("imperatives") == frozenset(tables[0]["imperatives"]) | frozenset(tables[1]["imperatives"])
    with pytest.raises(KeyError, match="no word class 'nosuch'"):
        word_class("nosuch")
