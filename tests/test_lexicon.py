"""The English-Russian stem lexicon (core/text/lexicon) and how bench/build_lexicon.py makes it."""
from bench.build_lexicon import pairs
from core.text.lexicon import translations
from core.text.terms import stem


def test_words_translate_both_ways_as_stems():
    assert stem("зарплата") in translations(stem("salary"))
    assert stem("salaries") in translations(stem("зарплаты"))  # any form: both sides are stems
    assert stem("поставщик") in translations(stem("supplier"))
    assert translations(stem("warehouse")) == {stem("склад")}


def test_unknown_words_names_numbers_and_hostile_input_translate_to_nothing():
    for token in ("", "x", "2025", "err_2043", "lavrentyev", "\u0000", "\ufdfa" * 30, "z" * 100_000):
        assert translations(token) == frozenset()


def test_only_one_word_translations_between_the_two_scripts_become_pairs():
    english_russian = {"Salary": "Зарплата", "agnosias": "приводят к агнозиям", "allantoises": "allantoises",
                       "the": "этот", "ox": "бык"}
    russian_english = {"склад": "warehouse", "и": "and", "Поставщик": "supplier"}
    assert pairs(english_russian, russian_english) == {
        (stem("salary"), stem("зарплата")), (stem("warehouse"), stem("склад")), (stem("supplier"), stem("поставщик"))}


def test_a_hop_states_a_relation_in_the_other_language():
    # the chain's relation words (answers/chain/links.py): "owner" is stated by "владелец", not by "склад"
    from answers.chain.links import related
    from core.text.terms import content_stems
    relation = [stem("owner"), stem("budget")]
    assert related(relation, frozenset(content_stems("Владелец сервиса — команда Платформы"))) == {stem("owner")}
    assert related(relation, frozenset(content_stems("Склад работает круглосуточно"))) == set()


def test_a_missing_or_damaged_file_says_how_to_mend_it(tmp_path, monkeypatch):
    import pytest
    import core.text.lexicon as lexicon
    for content in (None, b"not gzip", b"\x1f\x8b\x08\x00garbage"):
        path = tmp_path / "en_ru_stems.tsv.gz"
        if content is not None:
            path.write_bytes(content)
        monkeypatch.setattr(lexicon, "LEXICON_PATH", path)
        lexicon._table.cache_clear()
        with pytest.raises(RuntimeError, match="bench.build_lexicon"):
            lexicon.translations("salari")
    lexicon._table.cache_clear()
