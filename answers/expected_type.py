"""What a question asks for, and where a sentence holds it: the answer type ("date", "number", "money",
"email", "phone", "person", "place"), the thing a "how many" question counts, and the values (years, months,
numbers written in digits or words, counts, amounts, e-mail addresses, phone numbers) a sentence holds. Used
by the offline answers (answers/unit_scoring.py).
"""

from __future__ import annotations

import re
from itertools import islice

from core.text.terms import content_stems
from core.text.tokens import WORD

# "how much does X cost", "сколько стоит X": what is asked is an amount, never which kind of payment ("Which
# allowance do engineers get?" may be answered "a weekly allowance")
_PRICE = (r"\bhow much (does|do|did|will|would|is|was|are|were)\b[^?]{0,60}\b(cost|costs|charged?|paid)\b|"
          r"\bсколько\s+(стои\w*|обош\w*|обойд\w*|заплат\w*)|\bво сколько\s+(обош\w*|обойд\w*)")
ASKS_PRICE = re.compile(_PRICE, re.IGNORECASE)

_KIND_CUES = (  # checked in order; the first that matches decides
    # a way to reach someone, which has a form of its own: asked as "the e-mail address of X", "X's phone",
    # "what extension do I dial", "номер телефона", "телефон у X" (not "which phone was used", "e-mail
    # system"); "what number should I dial" asks a phone, not a count
    ("email", r"\be-?mail\s+(address|of|for)\b|'s\s+e-?mail\b|\bадрес\w*\s+(электронн\w+\s+почт|e-?mail)|"
              r"\bэлектронн\w+\s+почт\w*\s+(у|для)\b"),
    ("phone", r"\b(tele)?phone\s+(number|extension|no\b|of\b|for\b)|'s\s+((mobile|direct|office)\s+)?(tele)?phone\b|"
              r"\b(dial|extension\s+(do|should|can|of|for))\b|\bномер\w*\s+телефон|\bтелефон\w*\s+(у|для)\b|"
              r"\bдобавочн\w+|\bпозвонить\b"),
    # a price asked as "how much": an amount of money, written with its currency
    ("money", _PRICE),
    # a rank ("какое место занимает", "what rank") is an ordinal number, as "12-й", "third"
    ("number", r"\b(how (many|much|long|old|far|big|large|often|tall|high)|what (percentage|percent|number|share|rank)|"
               r"сколько|скольк(их|им|ими)|как долго|какой процент|какая доля|какое количество|"
               r"как(ое|ом) мест[оеа]\b.*\b(занима|заня))"),
    ("date", r"(^|[,;]\s*)(when|когда)\b|\b(what|which|in what|in which) (year|date|day|month|century)\b|"
             r"\b(в каком году|какого года|в какой год|с какого года|какого числа|в каком месяце|в каком веке)\b"),
    # "founded by whom?" asks in place, at the end
    ("person", r"^(who|whom|whose)\b|[,;]\s*(who|whom|whose)\b|\bby (who|whom)\W*$|"
               r"\b(кто|кого|кому|кем|ком|чей|чья)\b|"
               # a noun for a person after the question word: "which engineer", "какой инженер"
               r"\b(which|what) (person|engineer|employee|manager|director|leader|founder)\b|"
               r"\bкак(ой|ая|ого|ую|ому|им|ом)\s+(инженер|руководител|директор|сотрудни|дежурн|разработчик|"
               r"менеджер|ведущ)\w*"),
    ("place", r"(^|[,;]\s*)(where|где|откуда|куда)\b|\b(in |at |from )?(which|what) (city|country|office|state|"
              r"town|region|place|continent|county|province|island|location|site)\b|"
              r"\b(в|из) (каком|какой) (городе|офисе|стране|регионе|области|месте|штате)\b|"
              r"\bкакой (город|офис)\b|\bкакая страна\b"),
    # an amount of money, named by a noun that means one ("how does on-call compensation differ", "what is
    # the salary band"), not by "pay" or "payment", which as often name a thing ("payment provider");
    # "how much" was taken above as a number, which an amount also is
    ("money", r"\b(salary|salaries|wages?|compensation|remuneration|allowances?|bonus(es)?|costs?|prices?|fees?|"
              r"budgets?|per diem|оплат[аеуы]|зарплат\w*|стоимост\w*|цен[аеуы]|компенсаци\w*|суточны\w*|"
              r"бюджет\w*|вознагражден\w*|преми[яиюей])\b"),
)
_KINDS = [(kind, re.compile(p, re.IGNORECASE)) for kind, p in _KIND_CUES]
# the question words' cues follow the forms' and come before the money nouns', the list's last
_FIRST_QUESTION_WORD = next(i for i, (kind, _) in enumerate(_KIND_CUES) if kind == "number")
_MONEY_NOUNS = len(_KIND_CUES) - 1
_KINDS_BY_NAME = dict(_KINDS)
VALUE_KINDS = ("date", "number", "money", "email", "phone")
# a value told by its form alone: a local answer must hold one beside what the question names, as must an
# amount where a price is asked (Question.asks_price; answers/local.py)
CONTACT_KINDS = ("email", "phone")
# "what does X mean": the form asks for what defines X, not for a topic
MEANING = re.compile(r"\b(mean|means|meaning|indicate|indicates|stand for|signify|означает|означают|значит|"
                     r"обозначает|указывает)\b", re.IGNORECASE)
NAME_TYPE = {"person": {"person"}, "place": {"location"}}
YEAR = re.compile(r"(?<![\w.,])(1[0-9]{3}|20[0-9]{2})(?![\w,]|\.\d)")
MONTH = re.compile(r"\b(january|february|march|april|june|july|august|september|october|november|december|"
                   r"январ|феврал|март|апрел|ма[йя]\b|июн|июл|август|сентябр|октябр|ноябр|декабр)", re.IGNORECASE)
# a whole date, where one is written: "8 June 1951", "June 8, 1951", "3 июня 2025 г.", "2026-03-31"
ENGLISH_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                  "october", "november", "december")
RUSSIAN_MONTHS = ("января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа", "сентября", "октября",
                  "ноября", "декабря")  # as a date writes them: "3 июня 2025 г."
FULL_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+)?(?:{'|'.join(ENGLISH_MONTHS)})(?:\s+\d{{1,2}}(?:st|nd|rd|th)?,?)?\s+(?:1[0-9]{{3}}|20[0-9]{{2}})\b|"
    rf"\b\d{{1,2}}\s+(?:{'|'.join(RUSSIAN_MONTHS)})\s+"
    r"(?:1[0-9]{3}|20[0-9]{2})(?:\s?г\.)?|\b(?:1[0-9]{3}|20[0-9]{2})-[01]\d-[0-3]\d\b", re.IGNORECASE)
# a century or a decade is a date too ("в середине XVIII века", "XX в.", "the 18th century", "the 1990s")
ERA = re.compile(r"\b[IVX]{1,5}\s?(?:век\w*|вв?\.)|\b\d{1,2}(?:st|nd|rd|th|-?й|-?го|-?м)?[\s-]+(?:centur(?:y|ies)|век\w*)\b|"
                 r"\b(?:1[0-9]{2}|20[0-9])0(?:s|-[хе])\b")
NUMBER = re.compile(r"(?<![\w])\d[\d.,]*")
EMAIL = re.compile(r"[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,6}")
# a phone number: with its country or area code ("+47 69 21 58 00", "(4852) 60-17-43"), or a number a
# label calls one ("extension 2200", "тел. 60-17-43", "доб. 4121"), or in a phone's own grouping
# ("8 800 555-41-09", "60-17-43")
PHONE = re.compile(r"\+\d{1,3}[\s(.-]{0,2}\d[\d\s().-]{4,16}\d|\(\d{2,5}\)\s?\d[\d\s-]{2,10}\d|"
                   r"\b\d{1,2}[\s-]\d{3}[\s-]\d{3}[\s-]\d{2}[\s-]\d{2}\b|\b\d{2,3}-\d{2}-\d{2}\b|"
                   r"\b(?:ext\.?|extension|tel\.?|phone|fax|доб\.?|добавочн\w*|внутр\w*\.?|тел\.?|телефон\w*)"
                   r"[:\s]{0,3}\+?\d[\d\s()-]{0,18}\d", re.IGNORECASE)
# An amount of money: a currency sign or code beside a number, either side ("€40", "3 000 ₽", "USD 12",
# "NOK 450", "12 dollars", "55 евро", a column's "Berlin (EUR): 78,000")
_CURRENCY = (r"(?:[$€£¥₽₹]|\b(?:USD|EUR|GBP|RUB|CHF|JPY|CNY|NOK|SEK|DKK|PLN|CZK|HUF|TRY|UAH|KZT|INR|AUD|CAD|"
             r"euros?|dollars?|pounds?|kron(?:e|er|or)|руб\w*|евро|доллар\w*|фунт\w*|крон\w*)\b)")
# (an amount's digit group is bounded: an unbounded one backtracks quadratically over a long run of
# digits and spaces, minutes on a hostile 40,000-character line)
MONEY = re.compile(rf"{_CURRENCY}\)?:?\s?\d(?:[\d\s.,]{{0,15}}\d)?(?:\s?(?:k|million|billion|млн|млрд)\b)?|\d(?:[\d\s.,]{{0,15}}\d)?\s?(?:k|тыс\.?|million|billion|млн|млрд)?\s?{_CURRENCY}",
                   re.IGNORECASE)
# the value kinds told by a form of their own: a currency, an address, a phone's digits
FORMS = {"money": MONEY, "email": EMAIL, "phone": PHONE}
# Numbers written as words, whole word forms with their case endings (a stem would catch "семья" as
# "семь"). "One" / "один" is left out: "one of", "no one", "одним из" are rarely a count.
NUMERAL = re.compile(
    r"\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(thir|four|fif|six|seven|eigh|nine)teen|"
    r"(twen|thir|for|fif|six|seven|eigh|nine)ty|hundreds?|thousands?|millions?|billions?|dozens?|half|thirds?|"
    r"quarters?|"
    r"два|две|двух|двум|двумя|три|тр[её]х|тр[её]м|тремя|четыре|четыр[её]х|четыр[её]м|четырьмя|"
    r"(пят|шест|сем|восем|восьм|девят|десят)(ь|и|ью)|"
    r"(одинн|двен|трин|четырн|пятн|шестн|семн|восемн|девятн)адцат(ь|и|ью)|(двадц|тридц)ат(ь|и|ью)|сорока?|"
    r"(пят|шест|сем|восем)ьдесят|(пят|шест|сем|восьм)идесяти|девяност[оа]|сто|ста|двести|двухсот|триста|"
    r"тысяч[аиуе]?|тысячами|миллион(а|ов|ы)?|миллиард(а|ов|ы)?|полтора|полторы|половин[аыуе]|трет(ь|и|ей)|"
    r"четверт(ь|и))\b", re.IGNORECASE)
_COUNTING = re.compile(r"\b(how many|how much|what number of|сколько|скольк(их|им|ими)|какое количество)\s+(.*)",
                       re.IGNORECASE)
COUNTED_WITHIN = 2  # a count stands just before what it counts: "девяти странам", "160 000 кв. миль"


# the noun phrase a "what" / "какой" asks about: at most three words after it, up to a verb or a preposition
_ASKED_PHRASE = re.compile(r"\b(what|which|какой|какая|какое|какие|каков\w*)\s+((?:\w+\s+){0,2}\w+)", re.IGNORECASE)
_NOT_A_NOUN_PHRASE = re.compile(r"^(?:is|are|was|were|does|do|did|has|have|had|can|will|would|should|kind|type|"
                                r"является|являются|был\w*)\b", re.IGNORECASE)


def question_kind(question: str) -> str | None:
    """"date", "number", "money", "email", "phone", "person", "place" or None (a "what does X mean" question:
    any sentence about X)."""
    q = " ".join(question.split())
    found = [(m.start(), i, kind) for i, (kind, cue) in enumerate(_KINDS) if (m := cue.search(q))]
    # a form (an e-mail, a phone, a price) decides first and a money noun last, in the list's order; among
    # the question words the first in the question decides: one after a comma opens a clause of what is
    # asked about ("На ком женился Тэмуджин, когда ему было около 16 лет?" asks a person, not a date)
    formed = [f for f in found if f[1] < _FIRST_QUESTION_WORD]
    asked = [f for f in found if _FIRST_QUESTION_WORD <= f[1] < _MONEY_NOUNS]
    kind = (formed[0] if formed else min(asked) if asked else found[0])[2] if found else None
    if kind == "money" and not _asks_money(q):
        return None
    return kind


def asked_kind_words(question: str) -> frozenset[str]:
    """The stems of the noun a "what X" question asks for, its lexical answer type (Watson's LAT):
    "range" and "mountain" of "what mountain range", "district" of "What district is LaHave in?". An
    answer whose name holds it ("Sangre de Cristo Range", "Lunenburg Municipal District") is of that
    type. Empty when the question asks a person, place, date or amount, or no "what X" at all."""
    if question_kind(question) is not None:
        return frozenset()
    # English only: a Russian question names its kind in a case form a name does not repeat
    m = _ASKED_PHRASE.search(" ".join(question.split()))
    if m is None or m.group(1).casefold() not in ("what", "which"):
        return frozenset()
    words = []
    for w in m.group(2).split()[:2]:
        stems = content_stems(w)
        if not stems:
            break  # "what is ...": no noun follows
        words += stems
    return frozenset(words)


def _asks_money(question: str) -> bool:
    """Whether a money word the question holds is what it asks for: where "what" or "какой" asks about a
    noun phrase, that phrase must hold it ("what standby allowance"); a money word elsewhere only says
    what the asked thing applies to ("Какой коэффициент применяется к оплате дежурств?": a coefficient)."""
    asked = _ASKED_PHRASE.search(question)
    if asked is None or _NOT_A_NOUN_PHRASE.match(asked.group(2)):
        return True
    return bool(_KINDS_BY_NAME["money"].search(asked.group(2)))


def holds_value(kind: str, text: str) -> bool:
    """Whether `text` holds a value of a value kind ("date", "number", "money", "email", "phone") at all."""
    if kind == "date":
        return bool(YEAR.search(text) or MONTH.search(text) or ERA.search(text))
    if kind in FORMS:
        return bool(FORMS[kind].search(text))
    return bool(NUMBER.search(text) or NUMERAL.search(text))


def counted(question: str) -> frozenset[str]:
    """The stems of what a "how many" question counts: the words right after its cue, at most two, up to
    the first stop word or punctuation, which end the noun phrase ("How many square miles did" -> squar,
    mile; "Сколько складов у компании" -> склад)."""
    found = _COUNTING.search(" ".join(question.split()))
    if not found:
        return frozenset()
    phrase = []
    for token in re.findall(r"\w+|[^\w\s]", found.group(3))[:COUNTED_WITHIN]:
        stems = content_stems(_singular_acronym(token))
        if not stems:
            break
        phrase += stems
    return frozenset(phrase)


def _singular_acronym(word: str) -> str:
    """An acronym's plural as the acronym ("SREs" -> "SRE"), which no stemmer folds: "how many SREs"
    counts what "4 SRE" says."""
    return word[:-1] if len(word) > 2 and word.endswith("s") and word[:-1].isupper() else word


# A day of a month, its year written or not ("9 ноября", "30 Jun 2026", "March 14th"): its numbers are a date's, no count
_MONTH_NAMES = "|".join((*ENGLISH_MONTHS, *(m[:3] for m in ENGLISH_MONTHS), "sept", *RUSSIAN_MONTHS))
_OF_YEAR = r"(?:,?\s+(?:1[0-9]{3}|20[0-9]{2})\b)?"
DAY_OF_MONTH = re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTH_NAMES})\b\.?{_OF_YEAR}|"
                          rf"\b(?:{_MONTH_NAMES})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?![\d:]){_OF_YEAR}", re.IGNORECASE)
# A number that names rather than counts: after a number sign ("маршрутов №3", "No. 14", "#2") or inside a
# code that opens with letters ("INC-2024-0317", "A-118", "ИНЦ-2025-017")
_NUMBER_SIGN = re.compile(r"(?:№|#|\bNo\.?|\bN°)\s*$", re.IGNORECASE)
_CODE_BEFORE = re.compile(r"[^\W\d_][\w]*[-/](?:[\w]+[-/])*$")


def values(text: str) -> list[re.Match]:
    """The numbers the text holds, in digits or in words, in order."""
    return sorted([*NUMBER.finditer(text), *NUMERAL.finditer(text)], key=lambda m: m.start())


def quantities(text: str) -> list[re.Match]:
    """The numbers of `values` that can be an amount: not a part of a date ("9" of "9 ноября 2025 г.") and
    not a number that names something ("3" of "маршрут №3", "2024" of "INC-2024-0317"). A "how many"
    question is answered by one of these."""
    dates = [m.span() for pattern in (FULL_DATE, DAY_OF_MONTH) for m in pattern.finditer(text)]
    return [m for m in values(text)
            if not any(start <= m.start() and m.end() <= end for start, end in dates)
            and not _NUMBER_SIGN.search(text[max(0, m.start() - 4):m.start()])
            and not _CODE_BEFORE.search(text[max(0, m.start() - 40):m.start()])]


def counts(text: str, things: frozenset[str], asked: frozenset[str]) -> bool:
    """Whether a number the question does not hold (`asked`: its lower-cased words) stands at most
    COUNTED_WITHIN words before one of the counted `things` (stems)."""
    return counting(text, things, asked) is not None


def counting(text: str, things: frozenset[str], asked: frozenset[str]) -> re.Match | None:
    """The first number `counts` finds: "4" of "12 человек, в т.ч. 4 SRE" for "how many SREs"."""
    if not things:
        return None
    for m in quantities(text):
        if m.group().lower().strip(".,") in asked:
            continue
        # the next words only, read as far as they go: the rest of the text once per number is quadratic (a
        # page of 20,000 numbers took 17 s)
        following = (w.group() for w in islice(WORD.finditer(text, m.end()), COUNTED_WITHIN + 1))
        after = content_stems(" ".join(map(_singular_acronym, following)))
        if things & set(after[:COUNTED_WITHIN]):
            return m
    return None
