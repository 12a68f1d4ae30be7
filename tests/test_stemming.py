"""Stemming from many threads at once gives the same stems as from one (a shared Snowball object does not)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from core.text.stemming import stem_word

WORDS = [("running", "english"), ("generously", "english"), ("organizations", "english"),
         ("отпусками", "russian"), ("руководителями", "russian"), ("маршрутов", "russian")] * 400


def test_concurrent_stemming_matches_sequential():
    expected = [stem_word(w, lang) for w, lang in WORDS]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(5):
            assert list(pool.map(lambda item: stem_word(*item), WORDS)) == expected
    assert expected[:6] == ["run", "generous", "organiz", "отпуск", "руководител", "маршрут"]
