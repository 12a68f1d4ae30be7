"""The per-language word classes (answers/words/*.toml, the questions'; core/text/words/*.toml, the
text-wide ones): their shape, and that a class is every language's words; and the codes a question spells
(`Question.codes`), hostile text included."""
from __future__ import annotations

import re
import tomllib

import pytest

from answers.question import Question
from answers.question_text import AUX_START, CONJUNCTIONS, FUNCTION_WORDS
from answers.words import HERE, LANGUAGES, word_class
from core.text import words as text_words
from core.text.names import STOP_WORDS
from core.text.terms import CLOSED_CLASS, STOPWORDS

CYRILLIC = re.compile(r"[А-Яа-яЁё]")


@pytest.mark.parametrize("folder", [HERE, text_words.TEXT_WORDS.folder])
@pytest.mark.parametrize("language", LANGUAGES)
def test_each_file_is_lists_of_lowercase_single_words_of_its_own_script(folder, language):
    table = tomllib.loads((folder / f"{language}.toml").read_text(encoding="utf-8"))
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


def test_the_text_wide_classes_hold_both_languages_and_the_closed_class_holds_the_stopwords():
    assert {"the", "и", "which", "который"} <= STOPWORDS < CLOSED_CLASS
    assert {"twelve", "двенадцать", "despite", "вместо"} <= CLOSED_CLASS
    assert {"monday", "january", "после", "которые"} <= STOP_WORDS and "berlin" not in STOP_WORDS
    with pytest.raises(KeyError, match="no word class 'nosuch' in .*core/text/words"):
        text_words.word_class("nosuch")


@pytest.mark.parametrize("text, expected", [
    ("What does ERR_2043 mean?", ("ERR_2043",)),
    ("Кто был ведущим инцидента INC-2023-005?", ("INC-2023-005",)),
    ("the salary band of a Senior Engineer (L4)", ("L4",)),
    ("`notify_batch_size` in v4.3.", ("notify_batch_size", "v4.3")),
    ("ERR_2043, or ERR_2043 again", ("ERR_2043",)),
    ("Ту-154 and U-20", ("Ту-154", "U-20")),
    # a number with a suffix is a number, a path begins with "/", a hyphenated word holds no digit
    ("the 1950s, the 19th century, in 2000", ()),
    ("POST /v2/shipments", ()),
    ("e-mail and read-only", ()),
    ("", ()),
    ("\u0000\ufffd\U0001F600 \u202e L4\u200b", ()),
])
def test_codes_are_the_tokens_written_as_identifiers(text, expected):
    assert Question(text).codes == expected


def test_codes_of_a_huge_question_are_each_kept_once_in_order():
    text = " ".join(f"ERR_{i % 50}" for i in range(100_000))
    assert Question(text).codes == tuple(f"ERR_{i}" for i in range(50))


def _page(text: str):
    from answers.types import Passage
    return Passage(1, "doc1.md", "Page", "", text)


@pytest.mark.parametrize("question, page, name", [
    ("Roughly how many alerts hit the on-call engineer in February?", "About 40 alerts fired, roughly half noise.",
     None),
    ("Вагоны какой модели работают на маршруте №7?", "Вагоны: ЗВ-24 «Ласточка». На маршруте работают 14 вагонов.",
     None),
    ("Rhiwallon was the son of which king?", "Bleddyn and his brother Rhiwallon ruled Gwynedd.", "Rhiwallon"),
    ("Kazan night shift pay", "Ночная смена на складе в Казани оплачивается надбавкой 900 ₽.", "Kazan"),
    ("Anna Kirillova's team owns a service. Roughly how much would a second one cost?",
     "Anna Kirillova leads Routing; a second provider would cost roughly €90,000 a year.", "Anna Kirillova"),
])
def test_a_word_opening_a_sentence_is_no_name_where_the_documents_write_it_as_a_common_word(question, page, name):
    from answers.unit_scoring import Focus

    asked = Question(question)
    names = Focus.of(asked, passages=[_page(page)]).names
    assert "Roughly" not in names and "Вагоны" not in names
    assert name is None or name in names
    # passages that never hold the word leave it a name, as it was read before
    assert set(asked.openers) <= set(Focus.of(asked, passages=[_page("Nothing here.")]).names)


@pytest.mark.parametrize("text", ["", "?", "\u0301" * 50 + "?", "Ünïcödé " * 2000 + "?", "A. B. C. D?", "\x00Abc?"])
def test_openers_of_hostile_questions_are_one_word_names_of_the_question(text):
    asked = Question(text)
    assert all(o in text and " " not in o for o in asked.openers)
