"""Russian entity titles in the nominative (core/text/nominative.py, core/text/names.display_name)."""
from __future__ import annotations

import pytest

from core.text.names import display_name, entity_key, frequent_surface
from core.text.mentions import mentioned_names
from core.text.nominative import nominative


@pytest.mark.parametrize("inflected, title", [
    ("Казани", "Казань"),  # locative: "в Казани"
    ("Новосибирске", "Новосибирск"),
    ("Германии", "Германия"),
    ("Складского терминала", "Складской терминал"),  # the adjective agrees with its noun, masculine
    ("Северной верфи", "Северная верфь"),
    ("Ирине Павловой", "Ирина Павлова"),  # a person: first name and surname together
    ("Олега Смирнова", "Олег Смирнов"),
    ("отдела Логистики", "отдел Логистики"),  # the complement after the head keeps its genitive
])
def test_an_inflected_name_is_titled_in_the_nominative_and_still_merges_with_its_forms(inflected, title):
    assert nominative(inflected) == title
    assert entity_key(title) == entity_key(inflected)


@pytest.mark.parametrize("name", [
    "Казань", "Волжский бульвар",  # "бульвар" reads as an accusative too: already nominative
    "Клэр Дюмон", "Ларкспур Карго Системс",  # foreign names the dictionary guesses at stay as written
    "Альпы",  # only plural
    "Kazan", "ERR_2043", "отдел Logistics", "в Казани",  # not a Russian noun group at the start
])
def test_a_nominative_or_unknown_name_is_left_as_written(name):
    assert nominative(name) == name


def test_the_title_is_nominative_but_text_is_matched_by_the_form_it_uses():
    # a graph's entity title reads "Казань" though the text only ever says "в Казани"...
    assert display_name(["Казани", "Казани", "Казань"]) == "Казань"
    assert display_name(["Казани"]) == "Казань"
    # ...while what the answers search the text for is the form the text holds
    assert frequent_surface(["Казани", "Казани", "Казань"]) == "Казани"
    assert "Казани" in mentioned_names("Склад компании находится в Казани.")
