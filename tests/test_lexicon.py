"""The English-Russian stem lexicon (core/text/lexicon) and how bench/build_lexicon.py makes it."""
import gzip

from bench.build_lexicon import mueller_pairs, mueller_senses, pairs, read_dictd
from core.text.lexicon import search_translations, translations
from core.text.terms import stem


def test_words_translate_both_ways_as_stems():
    assert stem("зарплата") in translations(stem("salary"))
    assert stem("salaries") in translations(stem("зарплаты"))  # any form: both sides are stems
    assert stem("поставщик") in translations(stem("supplier"))
    assert translations(stem("warehouse")) == {stem("склад")}


def test_unknown_words_names_numbers_and_hostile_input_translate_to_nothing():
    for token in ("", "x", "2025", "err_2043", "lavrentyev", "\u0000", "\ufdfa" * 30, "z" * 100_000):
        assert translations(token) == frozenset() == search_translations(token)


def test_the_search_table_holds_every_plain_sense_and_the_one_sense_table_too():
    assert stem("руководство") not in translations(stem("lead")) and stem("свинец") in translations(stem("lead"))
    assert {stem("руководство"), stem("свинец")} <= search_translations(stem("lead"))
    for word in ("salary", "supplier", "warehouse", "зарплата"):
        assert translations(stem(word)) <= search_translations(stem(word))


MUELLER_LEAD = """lead
   _I  [lɛd]
      1. _n.
         1) свинец; as heavy as lead очень тяжёлый
         2) грифель
         3) _мор. лот; to heave the lead бросать лот
         4) грузило, отвес, пломба
   _II [li:d]
      1. _n.
         1) руководство; инициатива; to take the lead взять на себя инициативу
         2) (первое) место в состязании
"""


def test_mueller_senses_keep_plain_senses_and_cut_examples_and_marked_fields():
    senses = list(mueller_senses(MUELLER_LEAD))
    assert senses == [["свинец"], ["грифель"], ["грузило", "отвес", "пломба"], ["руководство", "инициатива"],
                      ["место в состязании"]]  # "_мор." (nautical) left out; the examples end a sense
    found = mueller_pairs([("lead", MUELLER_LEAD)])
    assert (stem("lead"), stem("отвес")) in found and (stem("lead"), stem("пломба")) not in found  # two a sense
    assert not any(r == stem("лот") for _, r in found) and len(found) == 6  # several words: left out
    assert list(mueller_senses("")) == [] and list(mueller_senses("x\n\ufdfa" * 100)) == []


def test_a_dictd_dictionary_is_read_by_its_index(tmp_path):
    text = "00-database-short\n Test\nsalary\n   [x] _n. жалованье; оклад\n".encode()
    (tmp_path / "t.dict.dz").write_bytes(gzip.compress(text))
    start = text.index(b"salary")
    # dictd writes offsets and lengths in its base64 digits: 24 is "Y", 49 is "Ax" (0 * 64 + 49)
    assert start == 24 and len(text) - start == 49
    (tmp_path / "t.index").write_text("00-database-short\tA\tY\nsalary\tY\tAx\n", encoding="utf-8")
    articles = read_dictd(tmp_path / "t.dict.dz", tmp_path / "t.index")
    assert [h for h, _ in articles] == ["salary"]
    assert mueller_pairs(articles) == {(stem("salary"), stem("жалованье")), (stem("salary"), stem("оклад"))}


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


def test_a_server_loads_both_tables_at_start_up():
    from core.text.lexicon import LEXICON_PATH, SENSES_PATH, _table, load_lexicons

    load_lexicons()  # api/http/services.py `warm_up`: the first question does not pay for reading them
    assert _table(LEXICON_PATH) and _table(SENSES_PATH) and _table.cache_info().currsize == 2
