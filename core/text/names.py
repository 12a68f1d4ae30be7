"""Normalisation for the entity graph (pure): names to merge keys, Markdown to plain sentences, and
the word lists that tell names from common words.

A key is what two mentions must share to be one entity. It absorbs what changes between mentions of
the same thing and keeps everything that tells two things apart:

- typography: Unicode NFKC, quotes of every kind, runs of whitespace, letter case;
- Russian inflection: "команды Маршрутизации" and "команде Маршрутизации", "Анне Кирилловой" and
  "Анна Кириллова" share a key. Each Cyrillic word goes through the Snowball Russian stemmer, with
  two fixes Snowball lacks for names: a capitalised surname in -ов/-ев/-ин/-ын keeps that suffix in
  every case and gender (Snowball gives "сокол" for Соколов but "соколов" for Соколова), and every
  stem loses a fleeting vowel (Павел / Павла) and trailing vowels (Николай / Николая);
- English plurals only ("teams" / "team"); nothing stronger, so distinct names stay distinct;
- codes, identifiers and acronyms (ERR_2043, INC-2025-009, retry_max_attempts, RouteOptimizerClient,
  /v2/shipments, API, США) are kept verbatim apart from case.

The script of each word decides its treatment, not the document's language: a Russian name quoted in
an English document must get the same key as in a Russian one. `lang` is accepted because callers
pass it with every name, and is deliberately not used to switch rules.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache


from core.sentences import split_sentences
from core.text.nominative import nominative
from core.text.stemming import stem_word
from core.text.words import word_class

_QUOTES = re.compile(r"[\"'`«»„“”‘’‚‹›]")
_CYRILLIC_WORD = re.compile(r"[а-яёА-ЯЁ]+(?:-[а-яёА-ЯЁ]+)*")
_LATIN_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_ACRONYM = re.compile(r"[A-ZА-ЯЁ]{2,5}s?")  # API, APIs, США
# A surname in -ов/-ев/-ин/-ын with an optional case/gender ending: the group is the stable base.
_SURNAME = re.compile(r"(.{2,}?(?:ов|ев|ин|ын))(?:а|у|ым|ой|ом|е|ы|ых|ыми)?")
# A fleeting vowel before a final л/к/ц (Павел -> Павла, Марек -> Марка, отец -> отца).
_FLEETING = re.compile(r"(.{2,}[бвгджзклмнпрстфхцчшщ])[еоё]([лкц])")
_TRAILING_VOWELS = re.compile(r"(?<=..)[аеиоуыэюяйь]+$")
# English plural endings that are not plurals (status, analysis, Texas, class, Jonas).
_NOT_PLURAL = ("ss", "us", "is", "as", "os")



def entity_key(name: str, lang: str = "") -> str:
    """The merge key of an entity name (see the module docstring for what is and is not merged)."""
    return _key(name)


@lru_cache(maxsize=200_000)
def _key(name: str) -> str:
    text = _QUOTES.sub("", unicodedata.normalize("NFKC", name))
    return " ".join(_word_key(word) for word in text.split())


def _word_key(word: str) -> str:
    if _ACRONYM.fullmatch(word):
        return word.rstrip("s").casefold()
    if _CYRILLIC_WORD.fullmatch(word):
        return "-".join(_russian_part(part) for part in word.split("-"))
    if _LATIN_WORD.fullmatch(word) and (word.islower() or word[1:].islower()):
        return "-".join(_english_part(part.casefold()) for part in word.split("-"))
    return word.casefold()  # a code, identifier, CamelCase or mixed-script token


def _russian_part(part: str) -> str:
    word = part.casefold().replace("ё", "е")
    if is_russian_surname(part):
        return _SURNAME.fullmatch(word).group(1)
    # Applied to every word, not only to names, so that "Команда" at a sentence start and
    # "команда" inside one still agree.
    stem = _FLEETING.sub(r"\1\2", stem_word(word, "russian"))
    return _TRAILING_VOWELS.sub("", stem)


def _english_part(word: str) -> str:
    if len(word) <= 3 or not word.endswith("s") or word.endswith(_NOT_PLURAL):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-2] if word.endswith("sses") else word[:-1]


def is_russian_surname(word: str) -> bool:
    """Соколов, Кирилловой, Лебедева: a capitalised Cyrillic word in -ов/-ев/-ин/-ын (+ case ending)."""
    return word[:1].isupper() and _SURNAME.fullmatch(word.casefold().replace("ё", "е")) is not None


# Russian word shapes the offline extractor reads names with.
RU_PATRONYMIC = re.compile(r"[А-ЯЁ][а-яё]+(?:вич|вна|ична|инична)\w*")
RU_ADJECTIVE = re.compile(r"[А-ЯЁ][а-яё]{2,}(?:ый|ий|ой|ая|ое|ого|ому|ым|ую|ых|ее)")  # Платёжный (шлюз)
RU_GENITIVE_PLURAL = re.compile(r"[а-яё]{3,}(?:ов|ев|ей|ий)")  # (Оптимизатор) маршрутов, (Сервис) уведомлений
RU_LOCATIVE = re.compile(r"[А-ЯЁ][а-яё]+[еи]")  # (в) Москве
RU_INFINITIVE = re.compile(r"[А-ЯЁ][а-яё]+(?:ть|ться|ти)")  # "Подключить Сервис ..." in a to-do list


def frequent_surface(variants: list[str]) -> str:
    """The most frequent surface form, as the text writes it; ties go to the shortest, then to the
    alphabetically first. What a name is searched and matched by in text ("в Москве" holds "Москве").

    The shortest form drops possessives and plural endings ("Billing teams" / "Billing team").
    """
    if not variants:
        raise ValueError("a name needs at least one variant")
    counts = Counter(variants)
    return min(counts, key=lambda variant: (-counts[variant], len(variant), variant))


def display_name(variants: list[str]) -> str:
    """An entity's title: its most frequent form already in the nominative (ties as in
    `frequent_surface`). When no form is nominative (Russian text names a city mostly as "в Москве"),
    the most frequent one put into it (core/text/nominative.py): the title reads "Москва"."""
    if not variants:
        raise ValueError("a name needs at least one variant")
    counts = Counter(variants)
    ranked = sorted(counts, key=lambda variant: (-counts[variant], len(variant), variant))
    return next((v for v in ranked if nominative(v) == v), None) or _as_nominative(ranked[0])


def _as_nominative(name: str) -> str:
    """`name` in the nominative, unless that form would not merge with it (a dictionary misreading)."""
    form = nominative(name)
    return form if _key(form) == _key(name) else name


# --- Markdown to plain sentences ----------------------------------------------------------------

_LABEL_LINE = re.compile(r"\n[ \t]*(?=\*\*|__)")  # "**Address:** ...\n**Reception:** ..." are two lines
_STRONG = re.compile(r"\*\*|__")
_MD_PREFIX = re.compile(r"^(?:\s*(?:#{1,6}\s+|>\s?|[-*+•]\s+|\d{1,3}[.)]\s+))+")
_MD_NOISE = re.compile(r"<?https?://\S+>?|<[^>\n]{1,80}>|\[[A-Z][A-Z ]*\]")  # URLs, HTML tags, [MUSIC]
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*\)")
# a token holding "_", matched from the token's start only: unanchored, every position of a long run with no
# "_" (a 100,000-character base64 line) scanned to the run's end, quadratic, 14 s for that one line
_UNDERSCORED = re.compile(r"(?<![^\s`])[^\s`_]*_[^\s`]*")
_TABLE_RULE = re.compile(r"\|?[\s:|-]+")


def plain_text(line: str) -> str:
    """Markdown syntax out, words and code in: list/heading/quote markers, bold, links, URLs, tags,
    and file names such as "Behind the Tech_Episode 29_Transcript.txt" (mixed case joined by "_";
    snake_case and UPPER_SNAKE identifiers stay). Table cells stay apart, separated by "|"."""
    text = _MD_NOISE.sub(" ", _MD_LINK.sub(r"\1", _MD_PREFIX.sub("", _STRONG.sub("", line))))
    text = _UNDERSCORED.sub(lambda m: m.group() if m.group().islower() or m.group().isupper() else " ", text)
    return text.strip().strip("|").strip()


def plain_sentences(markdown: str) -> tuple[list[str], list[str]]:
    """(prose sentences as plain text, lines of fenced code blocks): code holds identifiers, not prose."""
    prose, code, fenced = [], [], False
    for line in markdown.split("\n"):
        fence = line.lstrip().startswith(("```", "~~~"))
        if fence:
            fenced = not fenced
        elif fenced:
            code.append(line.strip())
        prose.append("" if fence or fenced else line)
    text = _STRONG.sub("", _LABEL_LINE.sub("\n\n", "\n".join(prose)))
    sentences = [plain_text(s) for s in split_sentences(text) if not _TABLE_RULE.fullmatch(s)]
    return [s for s in sentences if s], [line for line in code if line]


# --- Words that are never names (both languages, no corpus-specific entries) --------------------

STOP_WORDS = word_class("never_names")  # core/text/words: `never_names`
# Acronyms too generic to be an entity alone (inside a name they stay: "Shipments API").
GENERIC_ACRONYMS = frozenset(
    "http https url uri json yaml xml html css id ids ok faq pdf csv utc cet cest gmt msk pst est tbd todo am pm tv "
    "hr pr qa ui ux api sdk eta eur usd rub kb mb gb ооо оао зао пао ао".split()
)
# Common words that open names ("New York City", "New Jersey"): a name's first word, never a name alone
# ("New hires get a laptop").
NAME_OPENERS = frozenset({"new"})
CONTRACTIONS = frozenset("m ve ll d re t".split())  # I'm, we've, don't: function words
NAME_CONNECTORS = frozenset("of de van von der den da du del la le al bin".split())  # "Bank of America"
# Generic geography only (continents, large countries, unions), as keys.
GEOGRAPHY_KEYS = frozenset(
    entity_key(name)
    for name in "Europe|Asia|Africa|America|Americas|Australia|EU|US|USA|UK|United States|United Kingdom|Russia|"
    "Germany|France|China|Japan|India|Canada|Brazil|Kazakhstan|Ukraine|Poland|Italy|Spain|Европа|Азия|Африка|"
    "Америка|ЕС|США|Россия|РФ|Германия|Франция|Китай|Япония|Индия|Казахстан".split("|")
)


# --- Words that say what kind of thing a name is (used by the offline extractor to guess types) ------

TEAM_AFTER = re.compile(r"teams?|squads?|crew|guild")  # "Billing team"
TEAM_BEFORE = re.compile(r"(?:команд|отдел)(?:а|ы|е|у|ой|ою|ам|ами|ах|ов)?")  # "команда Платформы"
HEAD_WORDS = {  # a word of the name that states its type (English: its last or first word)
    "team": re.compile(rf"{TEAM_AFTER.pattern}|{TEAM_BEFORE.pattern}|operations|support|sales|marketing"),
    "service": re.compile(
        r"services?|apis?|gateway|connector|server|platform|engine|app|application|bot|sdk|library|database|queue|"
        r"cache|relay|builder|predictor|optimi[sz]er|scheduler|worker|pipeline|portal|dashboard|tool|cli|client|"
        r"proxy|broker|meter|tracker|monitor|registry|"
        r"сервис\w*|служб\w*|шлюз\w*|платформ\w*|оптимизатор\w*|модул\w*|библиотек\w*|приложени\w*"
    ),
    "organization": re.compile(
        r"inc|ltd|llc|gmbh|ag|plc|corp|corporation|company|co|group|systems|labs|bank|university|institute|"
        r"foundation|association|agency|ministry|express|cargo|freight|logistics|airlines|cloud|holdings|partners|"
        r"technologies|software|media|news|press|research|банк\w*|университет\w*|институт\w*|компани\w*|"
        r"агентств\w*|министерств\w*"
    ),
    "location": re.compile(
        r"street|avenue|road|parkway|boulevard|square|river|lake|mountains?|city|county|island|valley|bay|ocean|"
        r"sea|coast|улиц\w*|бульвар\w*|проспект\w*|площад\w*|област\w*|район\w*|город\w*"
    ),
    "concept": re.compile(
        r"project|programme|program|initiative|policy|plan|process|handbook|guide|report|review|law|act|"
        r"framework|protocol|standard|проект\w*|программ\w*|политик\w*|регламент\w*|закон\w*"
    ),
}
CUE_WORDS = {  # a word next to the name that hints at its type
    "person": re.compile(
        r"lead|leads|head|engineer|manager|director|ceo|cto|cfo|coo|cio|vp|founder|owner|host|guest|author|"
        r"professor|president|chief|officer|analyst|developer|designer|researcher|scientist|commander|advocate|"
        r"senior|junior|principal|executive|editor|producer|reporter|journalist|writer|artist|musician|student|"
        r"said|says|told|asked|he|she|his|her|him|mr|mrs|ms|dr|руководител\w*|директор\w*|инженер\w*|"
        r"разработчик\w*|ведущ\w*|менеджер\w*|глав\w*|основател\w*|сказал\w*|начальник\w*"
    ),
    "organization": re.compile(
        r"vendors?|providers?|suppliers?|carriers?|partners?|acquirers?|compan(?:y|ies)|startup|firm|"
        r"поставщик\w*|провайдер\w*|партн[её]р\w*|компани\w*|перевозчик\w*|эквайер\w*|ооо|оао|зао|пао|ао"
    ),
    "location": re.compile(r"office|offices|headquarters|hq|city|country|based|located|capital|town|"
                           r"офис\w*|город\w*|столиц\w*"),
    "service": re.compile(r"services?|endpoint|\w*сервис\w*"),
}
