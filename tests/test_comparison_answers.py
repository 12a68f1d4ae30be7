"""Offline comparison answers (answers/comparison.py): pure units over invented passages."""
from __future__ import annotations

from answers.comparison import comparison_answer
from answers.comparison_form import same_what
from answers.extractive import offline_answer
from answers.types import Passage
from answers.question import Question


def p(n: int, title: str, text: str) -> Passage:
    return Passage(n, f"doc{n}.md", title, title, text)


ACQUIRERS = [
    p(1, "Ferrocard", "Ferrocard is a payment acquirer based in Lyon. It settles card payments within two days. "
                      "Unlike Paymora, it charges no monthly fee."),
    p(2, "Paymora", "Paymora is a payment acquirer founded in 2009. It settles card payments the next day."),
]


def test_each_side_is_answered_from_the_passages_about_it_with_its_own_citation():
    question = Question("How does Ferrocard differ from Paymora on settlement?")
    assert question.comparison.a == "Ferrocard" and question.comparison.b == "Paymora"
    got = offline_answer(question, ACQUIRERS, multihop=True)
    ferrocard, paymora = got.text.split("Paymora: ", 1)
    assert ferrocard.startswith("Ferrocard: ") and "[1]" in ferrocard and "[2]" not in ferrocard, got.text
    # the Ferrocard page names Paymora too, but it is not about Paymora
    assert "next day" in paymora and "[2]" in paymora and "[1]" not in paymora, got.text
    assert {c.passage for c in got.picked} == {1, 2}


def test_a_yes_no_question_is_yes_only_when_every_side_states_the_attribute():
    sides = [("Ferrocard", "Ferrocard payment acquirer"), ("Paymora", "Paymora payment acquirer")]
    yes = comparison_answer(Question("Are Ferrocard and Paymora both payment acquirers?"), ACQUIRERS, sides,
                            "payment acquirers")
    assert yes.text.startswith("Yes"), yes.text
    other = [ACQUIRERS[0], p(2, "Paymora", "Paymora is a bank founded in 2009. It settles card payments.")]
    unsure = comparison_answer(Question("Are Ferrocard and Paymora both payment acquirers?"), other, sides,
                               "payment acquirers")
    assert not unsure.text.startswith("Yes") and "Paymora: " in unsure.text, unsure.text  # no verdict, the facts


def test_a_side_no_passage_is_about_says_so_instead_of_borrowing_the_others():
    got = comparison_answer(Question("Сравни Ferrocard и Nordpay по срокам расчётов"), ACQUIRERS[:1],
                            [("Ferrocard", "Ferrocard сроки расчётов"), ("Nordpay", "Nordpay сроки расчётов")],
                            "сроки расчётов")
    assert "Nordpay: в найденных фрагментах об этом не сказано." in got.text, got.text
    # half an answer is still read: the side found counts half, the side not said nothing
    alone = comparison_answer(Question("Ferrocard сроки расчётов"), ACQUIRERS[:1], [("Ferrocard", "Ferrocard сроки расчётов")],
                              "сроки расчётов")
    assert alone.confidence > 0 and got.confidence == alone.confidence / 2


def test_a_russian_yes_no_question_is_answered_in_russian():
    ru = [p(1, "Феррокард", "Феррокард — платёжный эквайер из Лиона."),
          p(2, "Пэймора", "Пэймора — платёжный эквайер, основанный в 2009 году.")]
    got = comparison_answer(Question("Являются ли Феррокард и Пэймора платёжными эквайерами?"), ru,
                            [("Феррокард", "Феррокард платёжный эквайер"), ("Пэймора", "Пэймора платёжный эквайер")],
                            "платёжными эквайерами")
    assert got.text.startswith("Да"), got.text


def test_a_comparison_written_with_compared_with_is_parsed_and_abbreviations_are_names():
    from answers.comparison_form import parse_comparison

    got = parse_comparison("How long are invoices kept in the EU region compared with the US region?")
    assert (got.a, got.b) == ("EU region", "US region"), got
    ru = parse_comparison("Сколько хранятся счета в регионе ЕС по сравнению с регионом США?")
    assert (ru.a, ru.b) == ("регионе ЕС", "регионом США"), ru
    # a long clause before "compared to" is no side
    assert parse_comparison("What are two ways that the Sheets add-on can improve prompt engineering workflows "
                            "compared to chained prompts?") is None
    regions = [Passage(1, "r.md", "Retention", "Retention > EU region", "Invoices are kept for 10 years."),
               Passage(2, "r.md", "Retention", "Retention > US region", "Invoices are kept for 7 years.")]
    answer = comparison_answer(Question("How long are invoices kept in the EU region compared with the US region?"), regions,
                               [("EU region", "EU region invoices kept"), ("US region", "US region invoices kept")])
    assert "EU region: Invoices are kept for 10 years. [1]" in answer.text, answer.text
    assert "US region: Invoices are kept for 7 years. [2]" in answer.text, answer.text


ON_CALL = [
    Passage(1, "policies/on-call-lisbon.md", "On-call policy — Lisbon office", "On-call policy — Lisbon office",
            "This policy applies to employees of the Lisbon office who take part in an on-call rotation."),
    Passage(2, "policies/on-call-lisbon.md", "On-call policy — Lisbon office",
            "On-call policy — Lisbon office > Standby allowance",
            "- **Weekday standby**: €35 per night.\n- **Weekend standby**: €80 per day."),
    Passage(3, "handbook/overview.md", "About the company", "About the company > Offices",
            "We work in two offices: Lisbon and Kazan. Both take part in on-call rotations."),
    Passage(4, "policies/on-call-ru.md", "Политика дежурств — офисы в России", "Политика дежурств — офисы в России",
            "Политика распространяется на сотрудников в Казани, участвующих в дежурствах."),
    Passage(5, "policies/on-call-ru.md", "Политика дежурств — офисы в России",
            "Политика дежурств — офисы в России > Оплата дежурства",
            "- **Будний день**: 2 500 ₽ за сутки дежурства.\n- **Выходной день**: 5 000 ₽ за сутки."),
]
SIDES = [("Lisbon", "Lisbon on-call compensation"), ("Kazan", "Kazan on-call compensation")]


def test_pay_is_answered_with_an_amount_not_with_the_sentence_repeating_the_question():
    from answers.expected_type import question_kind
    assert question_kind("How does on-call compensation differ between the offices?") == "money"
    assert question_kind("Какие суточные положены в командировке?") == "money"
    assert question_kind("How much is the weekend standby allowance?") == "number"  # an amount is a number too
    got = comparison_answer(Question("How does on-call compensation differ between the Lisbon and Kazan offices?"),
                            ON_CALL, SIDES, "on-call compensation")
    lisbon, kazan = got.text.split("Kazan: ", 1)
    assert "€35" in lisbon and "[2]" in lisbon, got.text
    # the Russian page is about Kazan: it names Kazan ("Казани") and not Lisbon, so its pay section
    # counts though it never repeats the city; the overview names both and is about neither
    assert "2 500 ₽" in kazan and "[5]" in kazan and "[3]" not in kazan, got.text


def test_a_side_whose_passages_hold_no_amount_is_not_said_rather_than_answered_with_any_sentence():
    got = comparison_answer(Question("How does on-call compensation differ between the Lisbon and Kazan offices?"),
                            ON_CALL[:4], SIDES, "on-call compensation")
    assert "€35" in got.text and "Kazan: the passages do not say." in got.text, got.text


def test_the_planner_searches_a_side_that_only_an_overview_naming_both_mentions():
    from router.planner_offline import OfflinePlanner
    question = "How does on-call compensation differ between the Lisbon and Kazan offices?"
    decision = OfflinePlanner().plan(Question(question), ON_CALL[:3], [question])
    assert not decision.enough and any("Kazan" in q for q in decision.queries), decision
    assert not any("Lisbon" in q for q in decision.queries), decision
    done = OfflinePlanner().plan(Question(question), ON_CALL, [question])
    assert done.enough, done


def test_a_side_whose_page_is_in_the_other_language_is_answered_by_meaning():
    passages = [p(1, "Склад в Казани", "Парковка для грузовиков у склада стоит 200 ₽ в час.\n\n"
                                       "Ночная смена оплачивается надбавкой 900 ₽."),
                p(2, "Lyon depot", "The Lyon depot is open from 6:00; a night shift is paid €30 extra.")]

    def similarity(question, texts):
        return [0.9 if "Ночная смена" in t else 0.7 for t in texts]

    sides = [("Lyon", "Lyon night shift pay"), ("Kazan", "Kazan night shift pay")]
    question = "How does night shift pay differ between the Lyon and Kazan depots?"
    got = comparison_answer(Question(question), passages, sides, "night shift pay", similarity=similarity)
    assert "€30" in got.text and "900 ₽" in got.text and "200 ₽" not in got.text, got.text
    # without the model the Kazan side shares no word with the question but its name: the first amount
    assert "200 ₽" in comparison_answer(Question(question), passages, sides, "night shift pay").text


def test_a_same_what_question_is_answered_by_the_names_each_side_gives_it():
    towns = [p(1, "Tern Harbour", "Tern Harbour is a fishing town in Varro province, on the north coast."),
             p(2, "Coldwater", "Coldwater is a mill town in Essa province, inland."),
             p(3, "Orrin", "Orrin is a market town in Varro province.")]
    sides = [("Tern Harbour", "Tern Harbour province"), ("Coldwater", "Coldwater province")]
    no = comparison_answer(Question("Are Tern Harbour and Coldwater in the same province?"), towns, sides, "province")
    assert no.text.startswith("No: Tern Harbour — Varro province; Coldwater — Essa province."), no.text
    sides = [("Tern Harbour", "Tern Harbour province"), ("Orrin", "Orrin province")]
    yes = comparison_answer(Question("Are Tern Harbour and Orrin in the same province?"), towns, sides, "province")
    assert yes.text.startswith("Yes: Tern Harbour — Varro province; Orrin — Varro province."), yes.text
    # a side whose passages name none gives no verdict: not naming one is no evidence of another
    unsaid = [towns[0], p(2, "Coldwater", "Coldwater is a mill town known for its bridges.")]
    sides = [("Tern Harbour", "Tern Harbour province"), ("Coldwater", "Coldwater province")]
    got = comparison_answer(Question("Are Tern Harbour and Coldwater in the same province?"), unsaid, sides, "province")
    assert not got.text.startswith(("Yes", "No")), got.text


def test_a_same_band_question_reads_the_name_written_after_another_word_for_the_kind():
    singers = [p(1, "Ivo Marsh", "Ivo Marsh is the lead singer of the Dutch synthpop group Harbour Lights."),
               p(2, "Ines Moreau", "Ines Moreau is best known as the main vocalist of the girl group Quayside.")]
    sides = [("Ivo Marsh", "Ivo Marsh band"), ("Ines Moreau", "Ines Moreau band")]
    got = comparison_answer(Question("Are Ivo Marsh and Ines Moreau members of the same band?"), singers, sides, "band")
    assert got.text.startswith("No: Ivo Marsh — Harbour Lights band; Ines Moreau — Quayside band."), got.text


def test_a_russian_same_what_question_reads_what_is_shared_past_its_long_form():
    assert same_what("Находятся ли Казань и Самара в одном и том же регионе?") == "регионе"
    assert same_what("Находятся ли Казань и Самара в одной области?") == "области"
    assert same_what("Are Kazan and Samara both river ports?") is None


# --- sides described by a clause ("the office where Ana Lima works"): the clause finds the entity compared

OFFICES = [
    p(1, "Lisbon office", "The Lisbon office is home to the payments engineers, among them Ana Lima."),
    p(2, "Kazan office", "В офисе в Казани работают инженеры маршрутизации, в том числе Олег Сафин."),
    p(3, "On-call policy — Lisbon office", "A SEV1 page must be acknowledged within 10 minutes in Lisbon."),
    p(4, "Политика дежурств — офис в Казани", "Страницу SEV1 в Казани нужно подтвердить в течение 15 минут."),
]


def test_a_side_described_by_a_clause_is_parsed_as_the_question_of_its_clause():
    english = Question("Which office is larger: the one where Ana Lima works or the one where Oleg Safin works?")
    assert english.comparison.described == ("In which office Ana Lima works?", "In which office Oleg Safin works?")
    assert english.comparison.attribute == "office larger"  # the clauses' words describe the sides, not it
    russian = Question("Где быстрее подтверждают страницу SEV1: в офисе, где работает Ana Lima, или в офисе, "
                       "где работает Олег Сафин?")
    assert russian.comparison.described == ("Где работает Ana Lima?", "Где работает Олег Сафин?")
    teams = Question("Which team is bigger: the one that owns Carrier Connector or the one that owns Billing?")
    assert teams.comparison.described == ("Which team owns Carrier Connector?", "Which team owns Billing?")
    # named sides, and a title's capitalised "Who", describe nothing
    for named in ("How does Ferrocard differ from Paymora on settlement?",
                  "Which film came out first, The Man Who Knew Too Much or Vertigo?"):
        assert Question(named).comparison.described == ("", ""), named
    # hostile: clause words by the thousand, empty sides
    for hostile in ("Which office is larger: the one where " + "x where " * 3000 + "or the one where y works?",
                    "Где быстрее: в офисе, где " + "работает, где " * 2000 + "или в офисе, где Z?",
                    "Which: , or ,?", "which x is y: the one or the one?"):
        compared = Question(hostile).comparison
        assert compared is None or all(isinstance(d, str) for d in compared.described)


def test_a_described_side_is_answered_for_the_entity_its_clause_finds_and_cites_how():
    question = Question("Where must a SEV1 page be acknowledged faster: in the office where Ana Lima works or "
                        "in the office where Oleg Safin works?")
    got = offline_answer(question, OFFICES, multihop=True)
    lisbon, kazan = got.text.split("Oleg Safin -> ", 1)
    assert lisbon.startswith("Ana Lima -> Lisbon") and "10 minutes" in lisbon and "[3]" in lisbon, got.text
    assert kazan.startswith("Казани") and "15 минут" in kazan and "[4]" in kazan, got.text
    # the units that found each office are cited too
    assert {c.passage for c in got.picked} == {1, 2, 3, 4}, got.picked


def test_a_described_side_whose_clause_finds_nothing_stays_as_the_question_names_it():
    question = Question("Where must a SEV1 page be acknowledged faster: in the office where Ana Lima works or "
                        "in the office where Rui Costa works?")
    got = offline_answer(question, OFFICES, multihop=True)
    assert got.text.startswith("Ana Lima -> Lisbon") and "Rui Costa: " in got.text, got.text


def test_the_planner_asks_a_described_sides_clause_then_the_attribute_of_what_it_found():
    from router.planner_offline import OfflinePlanner
    text = ("Where must a SEV1 page be acknowledged faster: in the office where Ana Lima works or in the office "
            "where Oleg Safin works?")
    question = Question(text)
    first = OfflinePlanner().plan(question, [], [text])
    assert first.queries == list(question.comparison.described), first
    # the clauses found both offices: each is searched once with what is compared
    then = OfflinePlanner().plan(question, OFFICES[:2], [text, *first.queries])
    assert not then.enough and len(then.queries) == 2, then
    assert then.queries[0].startswith("Lisbon") and then.queries[1].startswith("Казани"), then
    done = OfflinePlanner().plan(question, OFFICES, [text, *first.queries, *then.queries])
    assert done.enough, done


def test_which_side_has_more_is_answered_with_each_sides_number_where_its_passages_give_one():
    passages = OFFICES + [
        p(5, "Lisbon office", "The Lisbon office opened in 2019 and employs about 60 people."),
        p(6, "Kazan office", "Офис в Казани открылся в 2016 году; сейчас в нём работает около 90 человек."),
    ]
    question = Question("Which office is larger: the one where Ana Lima works or the one where Oleg Safin works?")
    got = offline_answer(question, passages, multihop=True)
    assert "about 60 people" in got.text and "около 90 человек" in got.text, got.text
    # a side that gives no number is still answered with what its passages say
    got = offline_answer(Question("Which office is larger: Lisbon or Kazan?"), OFFICES, multihop=True)
    assert "Lisbon: " in got.text and "the passages do not say" not in got.text.split("Kazan")[0], got.text
