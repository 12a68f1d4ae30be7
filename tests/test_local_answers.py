"""Offline local answers chosen by answer type and focus: a "how many X" question takes the number
that counts X (in digits or words), a rank is a number, a sentence ending on a pronoun brings the
one it refers to, and a whole sentence beats a fragment the chunk cut. Invented examples, no database."""
from __future__ import annotations

import pytest

from answers.expected_type import asked_kind_words, counted, counts, question_kind
from answers.units import units
from answers.local import local_answer
from answers.no_answer import unstated_note
from answers.types import Passage
from answers.question import Question


def p(n: int, title: str, text: str) -> Passage:
    return Passage(n, f"doc{n}.md", title, title, text)


@pytest.mark.parametrize("question, kind", [
    ("Какое место по выручке занимает Нордпорт среди портов Балтики?", "number"),
    ("What rank does Nordport hold among Baltic ports?", "number"),
    ("Какое место посетил инспектор первым?", None),  # a place visited, not a rank
    ("В течение скольких дней хранится журнал?", "number"),
])
def test_a_rank_and_an_inflected_how_many_ask_for_a_number(question, kind):
    assert question_kind(question) == kind


@pytest.mark.parametrize("question, kind", [
    ("What standby allowance does a Lisbon engineer get for a weekend day?", "money"),
    ("How does on-call compensation differ between Lisbon and Porto?", "money"),  # no phrase "what" asks
    ("What is the salary band for L5?", "money"),
    ("Какова цена тарифа Бизнес?", "money"),
    # the money word says what the asked thing applies to; the asked phrase names no amount
    ("Какой повышающий коэффициент применяется к оплате дежурств?", None),
    ("Which vendor has the biggest annual contract cost?", None),
])
def test_an_amount_is_asked_when_the_phrase_a_question_word_asks_about_names_one(question, kind):
    assert question_kind(question) == kind


@pytest.mark.parametrize("question, kind", [
    ("Quayside Freight runs on a network founded by whom?", "person"),  # asked in place, at the end
    ("Who founded Quayside Freight?", "person"),
    ("What was founded by Ines Moreau and her brother?", None),  # "by" a named person asks no person
    ("Which engineer led the Quayside outage?", "person"),  # a noun for a person after the question word
    ("Какой инженер вёл инцидент в августе?", "person"),
    ("Какого руководителя назначили в Казани?", "person"),
])
def test_who_asked_in_place_or_a_noun_for_a_person_asks_for_a_person(question, kind):
    assert question_kind(question) == kind


def test_a_count_stands_just_before_what_it_counts_in_digits_or_words():
    things = counted("Сколько складов у компании в Казани?")
    asked = frozenset({"сколько", "складов", "у", "компании", "в", "казани"})
    assert counts("Компании принадлежат девяти складам в регионе.", things, asked)
    assert counts("В Казани работают 14 складов.", things, asked)
    assert not counts("В 2019 году компания открыла офис, а склады переехали.", things, asked)
    assert not counts("Семья владельцев держит склады с 1990-х.", things, asked)  # "семья" is no "семь"
    assert counted("How many square miles did the flood cover?") == frozenset({"squar", "mile"})


@pytest.mark.parametrize("question, text, count", [
    ("How many counties does the Orvel river basin cover?",
     "The Orvel river basin covers 4 200 square kilometres.\n\nThe Orvel basin spans seven counties.", "seven"),
    ("Сколько округов охватывает бассейн реки Орвель?",
     "Бассейн реки Орвель охватывает 4 200 квадратных километров.\n\nБассейн Орвеля лежит на территории семи округов.",
     "семи"),
])
def test_how_many_ranks_the_number_of_the_counted_thing_first(question, text, count):
    got = local_answer(Question(question), [p(1, "Orvel", text)])
    best = max(got.picked, key=lambda pick: pick.score)  # the area is a number too, of something else
    assert f"{count} " in best.text and "4 200" not in best.text


def test_a_rank_question_takes_the_sentence_with_the_rank():
    text = ("Нордпорт — крупнейший по грузообороту порт на южном побережье Балтики.\n\n"
            "Обработав 41 млн тонн в 2024 году, Нордпорт стал 3-м портом региона по грузообороту.")
    got = local_answer(Question("Какое место по грузообороту занимает Нордпорт среди портов Балтики?"), [p(1, "Нордпорт", text)])
    assert "3-м" in got.text and "крупнейший" not in got.text


def test_a_sentence_ending_on_a_pronoun_brings_the_one_it_refers_to():
    text = ("Engineers kept trying to build one shared cache for every region. "
            "The Orion team was among those who failed to do this.")
    got = local_answer(Question("What did the Orion team fail to build?"), [p(1, "Caching", text)])
    assert "one shared cache for every region" in got.text
    assert [u.anaphoric for u in units([p(1, "Caching", text)])] == [False, True]


def test_a_whole_sentence_beats_an_equal_fragment_the_chunk_cut():
    text = ("where the quota of the workspace is counted per hour. "
            "Exports draw on the quota of the workspace, and the quota resets at midnight UTC.")
    got = local_answer(Question("What draws on the quota of the workspace?"), [p(1, "Quotas", text)])
    assert got.text.startswith("Exports draw on the quota")
    assert [u.cut for u in units([p(1, "Quotas", text)])] == [True, False]


@pytest.mark.timeout(60)  # a hang guard, not a speed target: the unbounded pattern took minutes on 40,000 characters
def test_an_amount_question_over_a_hostile_run_of_digits_answers_without_hanging():
    hostile = p(1, "Tariffs", "The standby allowance is " + "1 " * 100_000 + "and nothing else.")
    fair = p(2, "Tariffs", "The standby allowance is €35 per night.")
    got = local_answer(Question("What is the standby allowance?"), [hostile, fair])
    assert "€35" in got.text, got.text


# --- passages in the other language ---------------------------------------------------------------

class Similarity:
    """A stand-in for the embedding model: cosines by shared marker words, and a record of the calls."""

    def __init__(self, close: dict[str, float]):
        self.close, self.calls = close, []

    def __call__(self, question, texts):
        self.calls.append(list(texts))
        return [max((v for k, v in self.close.items() if k in t), default=0.5) for t in texts]


RUSSIAN_PAGE = ("Склад в Казани открылся в 2016 г.\n\n- **Руководитель смены:** Пётр Лаврентьев\n"
                "- **Дежурный механик:** Анна Орлова\n\nСклад работает круглосуточно.")


def test_a_passage_in_the_other_language_answers_by_meaning_with_the_asked_type():
    question = "Who runs the shift at the warehouse?"
    passages = [Passage(1, "kazan.md", "Склад в Казани", "", RUSSIAN_PAGE, relevance=0.7),
                Passage(2, "shifts.md", "Shift rules", "", "A shift lead at the Berlin site runs the morning shift.")]
    similarity = Similarity({"Руководитель смены": 0.85, "Дежурный механик": 0.8})
    answer = local_answer(Question(question), passages, similarity=similarity)
    assert "Пётр Лаврентьев" in answer.text and "[1]" in answer.text
    assert all("Склад работает" not in t for t in similarity.calls[0])  # only units holding a person
    assert answer.confidence == pytest.approx(0.7)  # as sure as the search is of the passage (no name to share)
    # without the model the words decide, and the Russian units share none of them
    assert "Лаврентьев" not in local_answer(Question(question), passages).text


def test_other_language_units_are_read_in_their_page_and_chosen_by_meaning_over_the_search_rank():
    # the second passage's unit is closest in meaning; the first passage's rank, which is all the words
    # of the other language can show, does not outweigh it
    question = "How many engineers does the warehouse team have?"
    passages = [Passage(1, "kazan.md", "Склад в Казани", "Склад в Казани > Смены", "Смены длятся 12 часов.", relevance=0.7),
                Passage(2, "kazan.md", "Склад в Казани", "Склад в Казани > Состав", "В команде 9 инженеров.", relevance=0.6)]
    similarity = Similarity({"9 инженеров": 0.81, "12 часов": 0.8})
    answer = local_answer(Question(question), passages, similarity=similarity)
    assert answer.text.startswith("В команде 9 инженеров."), answer.text
    assert sorted(similarity.calls[0]) == ["Склад в Казани > Смены\nСмены длятся 12 часов.",
                                           "Склад в Казани > Состав\nВ команде 9 инженеров."]


def test_a_gate_shows_an_answer_from_the_other_language_only_when_its_sentence_is_close_enough():
    from answers.other_language_gate import OtherLanguageGate
    question = "Who runs the shift at the warehouse?"
    passages = [Passage(1, "kazan.md", "Склад в Казани", "", RUSSIAN_PAGE, relevance=0.05)]
    gate = OtherLanguageGate("toy", slope=50.0, word_slope=0.0, intercept=-40.0, threshold=0.5)  # shown from a cosine of 0.8
    close = local_answer(Question(question), passages, similarity=Similarity({"Руководитель смены": 0.85}), gate=gate)
    far = local_answer(Question(question), passages, similarity=Similarity({"Руководитель смены": 0.75}), gate=gate)
    assert close.answered and "Пётр Лаврентьев" in close.text and close.closeness == 0.85
    assert close.confidence == pytest.approx(gate.confidence(0.85, close.worded), abs=1e-4) and close.threshold == 0.5
    assert not far.answered and far.closeness == 0.75  # withheld, though the search found the page
    # without a gate, as sure as the search is of its page (here too little)
    assert not local_answer(Question(question), passages, similarity=Similarity({"Руководитель смены": 0.85})).answered
    # a name of the question the answer's units hold (across scripts) shows it whatever the gate says
    named = local_answer(Question("Who runs the shift at the Kazan warehouse?"), passages,
                         similarity=Similarity({"Руководитель смены": 0.75}), gate=gate)
    assert named.answered and "Пётр Лаврентьев" in named.text and named.named >= 0.2


def test_the_questions_words_found_in_translation_choose_the_unit_and_are_weighed_by_the_gate():
    # "salary" and "зарплата", "warehouse" and "склад": the words cross through the dictionary
    # (core/text/lexicon), not through the names; they rank the other language's units before meaning
    # chooses among the best of them, and the gate weighs how many the answer holds
    from answers.other_language_gate import OtherLanguageGate
    from answers.local import MAX_EMBEDDED_UNITS
    page = "\n\n".join([f"Смена {i} длится 12 часов." for i in range(MAX_EMBEDDED_UNITS + 2)]
                       + ["Зарплата кладовщика на складе составляет 52 000 рублей."])
    passages = [Passage(1, "kazan.md", "Склад в Казани", "", page, relevance=0.4)]
    similarity = Similarity({"Зарплата": 0.8})
    question = Question("What is the salary of a storekeeper at the warehouse?")
    answer = local_answer(question, passages, similarity=similarity)
    assert answer.text.startswith("Зарплата кладовщика"), answer.text  # beyond the units embedded by rank
    assert answer.worded > answer.named == 0.0  # no name of the question, but its words in translation
    by_words = OtherLanguageGate("toy", slope=0.0, word_slope=10.0, intercept=-4.0, threshold=0.5)
    assert local_answer(question, passages, similarity=similarity, gate=by_words).answered
    # the confidence an answer is shown with without a gate counts the question's own words only
    far = local_answer(Question("What is the salary of a storekeeper?"), passages, similarity=similarity)
    assert far.confidence < far.worded


def test_the_learned_reader_leaves_an_answer_from_the_other_language_to_the_gate():
    # the reader was fitted on answers in the question's language; with a gate the search no longer holds
    # such pages to its cut, so the gate, not the reader, says whether the answer is shown
    from answers.other_language_gate import OtherLanguageGate
    from answers.reader import load_reader
    reader = load_reader()
    question = Question("Who runs the shift at the warehouse?")
    passages = [Passage(1, "kazan.md", "Склад в Казани", "", RUSSIAN_PAGE, relevance=0.05)]
    gate = OtherLanguageGate("toy", slope=50.0, word_slope=0.0, intercept=-40.0, threshold=0.5)
    both = local_answer(question, passages, similarity=Similarity({"Руководитель смены": 0.85}), gate=gate,
                        reader=reader)
    assert both.answered and both.threshold == 0.5
    assert both.confidence == pytest.approx(gate.confidence(0.85, both.worded), abs=1e-4) and both.logit is None
    # without a gate the reader judges it, as it did before the gate
    alone = local_answer(question, passages, similarity=Similarity({"Руководитель смены": 0.85}), reader=reader)
    assert alone.threshold == reader.threshold and alone.logit is not None


def test_the_other_language_is_not_asked_when_the_best_passage_is_in_the_questions_own():
    question = "Who runs the shift at the Kazan warehouse?"
    passages = [Passage(1, "shifts.md", "Shift rules", "", "At the Kazan warehouse Petr Lavrentyev runs the shift."),
                Passage(2, "kazan.md", "Склад в Казани", "", RUSSIAN_PAGE, relevance=0.7)]
    similarity = Similarity({})
    assert "Lavrentyev" in local_answer(Question(question), passages, similarity=similarity).text
    assert similarity.calls == []


def test_other_language_passages_without_a_value_of_the_asked_type_do_not_answer_it():
    question = "When did the warehouse switch to night shifts?"
    passages = [Passage(1, "kazan.md", "Склад в Казани", "", "Склад работает круглосуточно и без выходных.",
                        relevance=0.4)]
    similarity = Similarity({})
    answer = local_answer(Question(question), passages, similarity=similarity)
    assert similarity.calls == [] and answer.confidence < 0.2


def test_at_most_so_many_units_of_the_other_language_are_compared_in_meaning():
    from answers.local import MAX_EMBEDDED_UNITS
    page = "\n\n".join(f"- Смена {i} началась в 20{i % 90 + 10:02d} г." for i in range(3 * MAX_EMBEDDED_UNITS))
    similarity = Similarity({})
    local_answer(Question("When did the shift start?"), [Passage(1, "ru.md", "Смены", "", page, relevance=0.5)],
                 similarity=similarity)
    assert len(similarity.calls) == 1 and len(similarity.calls[0]) == MAX_EMBEDDED_UNITS


def test_a_numbered_lists_marker_is_no_answer_to_how_many():
    passages = [Passage(1, "relay.md", "Webhook Relay", "", "1. The Integrations team owns Webhook Relay and its queue."),
                Passage(2, "team.md", "Integrations", "", "Integrations engineers: eleven, in Berlin and Austin.")]
    answer = local_answer(Question("How many engineers does the team that owns Webhook Relay have?"), passages)
    assert "eleven" in answer.text and "[2]" in answer.text, answer.text


@pytest.mark.parametrize("text, era", [
    ("Движение возникло в середине XVIII века.", True), ("Собор перестроили в XIX в.", True),
    ("The guild flourished in the 18th century.", True), ("Demand grew in the 1990s.", True),
    ("Спрос вырос в 1990-х.", True), ("Version XV of the protocol", False), ("An X-ray of the hull", False),
])
def test_a_century_or_a_decade_is_a_date(text, era):
    from answers.expected_type import holds_value
    assert holds_value("date", text) is era


def test_when_is_answered_by_the_sentence_with_the_century():
    when = local_answer(Question("When did the guild movement begin?"),
                        [p(1, "Guild", "The guild movement is described in many books."),
                         p(2, "Guild history", "The guild movement began in the 12th century.")])
    assert when.text.startswith("The guild movement began") and "[2]" in when.text, when.text


def test_a_russian_page_full_of_english_setting_names_is_read_as_russian():
    """As the index and the reranker read it: a third of its letters Cyrillic is a Russian page, whose
    words an English question cannot match however many setting names it spells in Latin."""
    page = "Параметр `solver_time_limit_ms` (default 5000, max 30000) задаёт бюджет solver-а на задачу."
    similarity = Similarity({})
    local_answer(Question("What is the longest time a solver may run on one job?"),
                 [Passage(1, "ru.md", "Оптимизатор", "", page, relevance=0.5)], similarity=similarity)
    assert len(similarity.calls) == 1


@pytest.mark.parametrize("question, words", [
    ("Humboldt Peak is part of what mountain range?", {"mountain", "rang"}),
    ("Of what church is the Diocese of Huron a part?", {"church"}),
    ("What is the population of Kansas?", set()),  # no noun follows "what"
    ("Which city hosts the games?", set()),  # a place: the kind says it
])
def test_a_what_x_question_asks_for_a_thing_of_kind_x(question, words):
    assert asked_kind_words(question) == words


KUZMIN = [p(1, "Павел Кузьмин", "Павел Кузьмин — главный инженер по медицинскому оборудованию вологодского филиала. "
                                "Он отвечает за закупку и обслуживание томографов."),
          p(2, "Вологодский филиал", "В вологодском филиале работают 140 человек.")]


def test_an_answer_whose_page_says_nothing_the_question_asks_is_no_answer():
    # his page names him, but no page of the answer says anything of pay: the documents do not answer
    pay = Question("Какая зарплата у Павла Кузьмина?")
    withheld = local_answer(pay, KUZMIN, whole=True)
    assert not withheld.answered and withheld.unsaid == ("зарплата",)  # what the no-answer says the pages lack
    assert unstated_note("russian", withheld.unsaid).endswith("нигде не упоминают: зарплата.")
    # the learned reader, where it is on, does not make the page say it
    from dataclasses import replace
    from answers.reader import load_reader
    lenient = replace(load_reader(), threshold=0.0)  # a reader that would show anything
    assert not local_answer(pay, KUZMIN, whole=True, reader=lenient).answered
    # what the page does say is answered
    duty = Question("За что отвечает Павел Кузьмин?")
    got = local_answer(duty, KUZMIN, whole=True)
    assert got.answered and "закупку" in got.text, got.text
    # a question of names alone asks nothing besides them
    who = Question("Кто такой Павел Кузьмин?")
    assert local_answer(who, KUZMIN, whole=True).answered


def _first_paragraph(question: Question, title: str, first: str, sibling_title: str, sibling: str):
    """The scorer over two documents (an article's paragraphs when the titles match) and the first's unit."""
    from answers.unit_scoring import Focus, Scorer
    from answers.units import units
    pages = [p(1, title, first), p(2, sibling_title, sibling)]
    every = units(pages)
    return Scorer(Focus.of(question, passages=pages), pages, every), every[0]


def test_a_page_cut_into_documents_per_paragraph_is_one_page_to_what_it_says():
    # an encyclopaedia article stored a document per paragraph: its title is the page
    question = Question("На что вырос спрос в Нордпорте в годы войны?")
    for sibling, said in (("Нордпорт", True), ("Зерновая биржа", False)):
        scorer, first = _first_paragraph(question, "Нордпорт", "Нордпорт принадлежит городу и служит базой флота.",
                                         sibling, "В годы войны резко вырос спрос на зерно из Нордпорта.")
        assert (scorer.unsaid(first) == ()) is said


def test_an_identifier_the_question_spells_is_found_in_any_case_and_anywhere_on_its_page():
    from answers.unit_scoring import Focus
    # a Russian word opening an identifier inflects: "Аполлона-1" is "Аполлон-1"
    patterns = Focus.of(Question("Когда погиб экипаж «Аполлона-1», по ERR_2043?")).identifiers
    assert [bool(x.search("экипаж аполлон-1 погиб")) for x in patterns if "2043" not in x.pattern] == [True]
    assert [bool(x.search("err_2044")) for x in patterns if "2043" in x.pattern] == [False]
    # the identifier stands in another paragraph of the page: the answer is on its page, not about another
    question = Question("Какого числа начались испытания экипажа «Аполлона-1»?")
    for sibling, sure in (("Программа Аполлон", True), ("Другая программа", False)):
        scorer, first = _first_paragraph(question, "Программа Аполлон", "Испытания экипажа начались утром 27 января "
                                         "1967 года.", sibling, "Экипаж назвал свою миссию «Аполлон-1».")
        assert (scorer.confidence([first]) > 0) is sure


def test_only_the_local_routes_own_question_is_held_to_its_words():
    # a comparison's side or a chain's step asks "older" of a page that writes a birth date: it is not whole
    pages = [p(1, "James Hetfield", "James Alan Hetfield (born August 3, 1963) is an American musician.")]
    side = Question("James Hetfield older")
    assert local_answer(side, pages).answered
    assert not local_answer(side, pages, whole=True).answered
    # a page in the other script is left to its names: the dictionary misses too many of its words
    ru = [p(1, "Индексация зарплат", "С 1 апреля 2025 г. зарплаты сотрудников в Москве индексируются на 8.5%.")]
    raise_question = Question("From what date did the 2025 pay raise for the Moscow staff take effect?")
    assert local_answer(raise_question, ru, whole=True).confidence == local_answer(raise_question, ru).confidence


def test_the_share_of_the_question_does_not_depend_on_the_order_its_words_are_summed_in():
    # a set's order follows the interpreter's hash seed: a rounding that followed it broke ties between
    # equal bridges differently from one run to the next
    from answers.unit_scoring import Focus, Scorer
    from answers.units import units
    pages = [p(1, "Нордпорт", "Нордпорт принадлежит городу.")]
    scorer = Scorer(Focus.of(Question("Кому принадлежит порт Нордпорт?"), passages=pages), pages, units(pages))
    scorer.idf = {"a": 0.1, "b": 0.2, "c": 0.3}
    assert 0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1  # the float sums differ by order
    assert scorer.coverage(["a", "b", "c"]) == scorer.coverage(["c", "b", "a"])


def test_the_language_of_each_passage_is_read_once_per_answer_not_once_per_unit(monkeypatch):
    """A 1,000-row table is one chunk of 1,000 units: reading every passage's language again for each unit
    took 2.5 s for one answer."""
    import answers.local as local_module

    calls = []
    real = local_module.detect_language
    monkeypatch.setattr(local_module, "detect_language", lambda text: calls.append(len(text)) or real(text))
    table = "| Code | Service | Price, ₽ |\n|---|---|---|\n" + "".join(
        f"| L-{i} | Analysis number {i} | {500 + i} |\n" for i in range(300))
    passages = [p(1, "Price list", table), p(2, "Прейскурант", "Анализ L-17 стоит 517 ₽.")]
    answer = local_answer(Question("How much does analysis L-17 cost?"), passages)
    assert "517" in answer.text
    assert len(calls) <= len(passages), len(calls)
