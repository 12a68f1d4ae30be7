"""What the question classifier looks for: word classes and weighted cues about a question's FORM.

Pure data plus the regex helpers that build it; router/classify.py reads questions with it. Word
lists are general (relations, entity types, corpus units, question words), never one corpus's topics.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


def _rx(pattern: str) -> re.Pattern:
    """For the lower-cased question: `re` is several times slower with IGNORECASE."""
    return re.compile(pattern)


def _anchored(pattern: str) -> re.Pattern:
    """For a pattern anchored at the start: there IGNORECASE costs nothing, so any case matches."""
    return re.compile(pattern, re.IGNORECASE)


def _words(*alternatives: str) -> str:
    return "(?:" + "|".join(alternatives) + ")"


# --- word classes ----------------------------------------------------------------------------------
# Units a collection is made of, and the people speaking in it: asked about in the plural
# ("which episodes", "guests discuss") they make a question range over the whole corpus.
COLLECTION_UNITS = _words(
    "documents", "docs", "files", "texts", "sources", "articles", "papers", "posts", "pages", "sections",
    "chapters", "reports", "reviews", "records", "notes", "episodes", "interviews", "transcripts",
    "conversations", "discussions", "talks", "meetings", "sessions", "incidents", "cases", "stories",
)
COLLECTION_WHOLE = _words("corpus", "collection", "dataset", "data set", "archive", "knowledge base",
                          "document set", "library")
SINGULAR_UNITS = _words(
    "document", "file", "text", "source", "article", "paper", "post", "page", "section", "chapter", "report",
    "review", "record", "episode", "interview", "transcript", "conversation", "discussion", "talk",
    "meeting", "session", "incident", "case", "story", "guest", "speaker",
)
SPEAKERS = _words(
    "guests", "speakers", "hosts", "interviewees", "participants", "panelists", "experts", "leaders",
    "executives", "founders", "authors", "writers", "contributors", "respondents", "people",
)
DISCOURSE_VERBS = _words(
    "discuss(?:es|ed)?", "mention(?:s|ed)?", "talk(?:s|ed)?", "describe[sd]?", "share[sd]?", "say", "said",
    "cite[sd]?", "believe[sd]?", "think", "view", "see", "give", "use", "highlight(?:s|ed)?",
    "emphasi[sz]e[sd]?", "stress(?:es|ed)?", "suggest(?:s|ed)?", "argue[sd]?", "raise[sd]?",
    "express(?:es|ed)?", "feature[sd]?", "focus(?:es|ed)?", "cover(?:s|ed)?", "address(?:es|ed)?",
    "recommend(?:s|ed)?", "predict(?:s|ed)?", "reflect(?:s|ed)?", "reveal(?:s|ed)?", "explain(?:s|ed)?",
    "agree", "disagree", "report(?:s|ed)?",
)
# Nouns naming an entity by its relation to another one ("the director of", "X's spouse").
RELATIONAL_NOUNS = _words(
    "spouse", "wife", "husband", "partner", "father", "mother", "parent", "son", "daughter", "child",
    "children", "sibling", "brother", "sister", "grandfather", "grandmother", "uncle", "aunt", "nephew",
    "niece", "author", "writer", "director", "producer", "composer", "performer", "singer", "songwriter",
    "lyricist", "creator", "founder", "co-founder", "owner", "designer", "architect", "developer",
    "publisher", "manufacturer", "inventor", "editor", "illustrator", "narrator", "star", "stars", "lead",
    "head", "leader", "chairman", "chair", "ceo", "president", "governor", "mayor", "king", "queen",
    "ruler", "monarch", "emperor", "prime minister", "captain", "coach", "manager", "member", "successor",
    "predecessor", "sponsor", "operator", "distributor", "winner", "recipient", "receiver", "runner-up",
    "birthplace", "place of birth", "hometown", "headquarters", "capital", "drummer", "guitarist",
    "bassist", "vocalist", "frontman", "keyboardist", "pianist", "conductor", "host", "presenter",
    "commander", "minister", "secretary", "ambassador", "chief", "deputy", "heir", "widow", "teacher",
    "student", "mentor", "teammate", "colleague", "employer", "boss", "supervisor", "maintainer",
)
# Places and groups are relational only when their object is itself a description: "the country of
# Izgoy's performer", "Damerjog's country"; "the city of Paris" merely names a city.
CONTAINER_NOUNS = _words(
    "country", "state", "city", "town", "county", "province", "region", "district", "continent", "nation",
    "team", "band", "company", "label", "network", "university", "party", "language", "currency",
    "birth country", "home country", "home town",
)
# Singular entity types: with a relative clause they describe an entity instead of naming it.
ENTITY_TYPES = _words(
    "person", "man", "woman", "individual", "figure", "place", "location", "site", "colony", "city", "town",
    "village", "country", "nation", "state", "county", "province", "region", "district", "continent",
    "island", "river", "lake", "mountain", "range", "film", "movie", "band", "group", "team", "company",
    "corporation", "firm", "organi[sz]ation", "association", "institution", "university", "college",
    "school", "album", "song", "single", "book", "novel", "play", "show", "series", "programm?e?", "game",
    "player", "actor", "actress", "singer", "writer", "author", "director", "artist", "musician",
    "politician", "composer", "rapper", "station", "network", "league", "club", "building", "church",
    "museum", "airport", "stadium", "war", "battle", "character", "magazine", "newspaper", "label", "brand",
    "party", "office", "service", "product", "project", "department", "vendor", "supplier", "customer",
    "employee", "officer", "engineer", "king", "queen", "prince", "princess", "emperor", "president",
    "leader", "ruler", "scientist", "inventor", "explorer", "soldier", "general", "poet", "painter",
    "athlete", "footballer", "coach",
)
RELATIONAL_VERBS = _words(
    "directed", "wrote", "founded", "composed", "produced", "performed", "starred", "married", "leads",
    "led", "owns", "created", "designed", "invented", "published", "coached", "sang", "manages",
    "managed", "heads", "headed", "runs", "ran", "featured", "succeeded", "preceded", "replaced",
)
COMPARATIVES = _words(
    "first", "earlier", "later", "older", "younger", "newer", "larger", "bigger", "smaller", "longer",
    "shorter", "taller", "higher", "lower", "more", "less", "fewer", "better", "worse", "greater",
    "heavier", "lighter", "faster", "slower", "closer", "farther", "further", "wider", "deeper",
    "richer", "earliest", "oldest", "youngest", "largest", "biggest", "smallest", "longest",
    "старше", "моложе", "младше", "раньше", "позже", "позднее", "больше", "меньше", "выше", "ниже",
    "длиннее", "короче", "дороже", "дешевле", "лучше", "хуже", "крупнее", "более", "менее", "первым",
    "первой", "первыми", "ближе", "дальше", "старее", "новее", "быстрее", "медленнее",
)
# Russian relational nouns (stems: the case ending varies) and entity types.
RU_RELATIONAL = _words(
    "супруг", "жен[аыуе](?!\\w)", "женой", "муж(?:а|у|ем|е)?(?!\\w)", "отц", "отец", "матер", "мать", "сын",
    "доч", "брат", "сестр", "родител", "автор", "режисс[её]р", "продюсер", "композитор", "исполнител",
    "создател", "основател", "владел", "руководител", "глав[аеуы](?!\\w)", "лидер", "директор",
    "президент", "председател", "капитан", "тренер", "член", "преемник", "предшественник", "столиц",
    "родин", "издател", "производител", "изобретател", "архитектор", "разработчик", "солист", "вокалист",
)
RU_ENTITY_TYPES = _words(
    "город", "стран", "государств", "штат", "област", "район", "регион", "человек", "мужчин", "женщин",
    "фильм", "сериал", "групп", "команд", "компани", "фирм", "организаци", "университет", "институт",
    "школ", "альбом", "песн", "книг", "роман", "пьес", "клуб", "лиг", "музе", "аэропорт", "войн", "битв",
    "сервис", "служб", "отдел", "офис", "продукт", "проект", "журнал", "газет", "лейбл", "парти",
    "актёр", "актер", "актрис", "певиц", "певц", "писател", "художник", "музыкант", "политик",
    "поставщик", "сотрудник", "инженер", "корол", "королев", "принц", "император", "президент", "лидер",
    "правител", "учён", "учен", "изобретател", "путешественник", "солдат", "генерал", "поэт", "спортсмен",
    "футболист", "тренер",
)
RELATIVE_PRONOUNS = _words(
    "who", "whom", "whose", "that", "which", "where", "when",
    "(?:in|at|on|of|from|for|by|with|under|to) (?:which|whom)",
)
RU_RELATIVE = _words("котор\\w*", "где", "куда", "откуда", "чей", "чья", "чь[её]", "чьи",
                     "(?:в|на|из|с|у|для|при|от|к|по) котор\\w*")
REDUCED_RELATIVE = _words(
    "founded", "directed", "written", "produced", "developed", "created", "released", "headquartered",
    "based", "located", "born", "owned", "published", "formed", "named", "known", "featuring", "starring",
    "sponsored", "shot", "made", "used", "held", "built", "designed", "composed", "performed", "played",
    "won", "broadcast", "hosted", "run", "operated",
)
PARTICIPLES = _words("\\w+ed", "\\w+en", "born", "fought", "held", "built", "made", "won", "lost", "found", "set",
                     "shot", "sold", "kept", "run", "sung", "begun")
PREPOSITIONS = _words("of", "in", "from", "at", "near", "by", "for", "to", "with", "into", "on", "about",
                      "than", "as")
SUPERLATIVE_TAIL = "(?:with|that has|having) the (?:\\w+est|most|least)\\b"
WH_WORDS = _words("who", "whom", "whose", "what", "which", "when", "where", "why", "how")
# Words a real question (not a search-box query) starts with, including openers of a fronted phrase
# ("According to X, what ...") after which a wh-word still stands in its usual place.
QUESTION_OPENERS = _words(
    WH_WORDS, "is", "are", "was", "were", "do", "does", "did", "can", "could", "should", "would", "will",
    "has", "have", "had", "may", "might", "must", "shall", "in", "on", "at", "for", "from", "to", "of",
    "by", "with", "during", "according", "before", "after", "if", "while", "between", "among", "besides",
    "apart", "as", "under", "within", "since", "until", "using", "compare", "name", "list", "tell",
    "describe", "explain", "give", "summari[sz]e",
)
RU_QUESTION_WORDS = _words("кто", "кем", "кого", "кому", "что", "чем", "чего", "где", "когда", "куда",
                           "откуда", "почему", "зачем", "как", "какой", "какая", "какое", "какие",
                           "каков\\w*", "котор\\w+", "сколько", "чей", "чья", "чьё", "чье", "чьи",
                           "ли", "сравни\\w*", "опиши\\w*", "назови\\w*", "перечисли\\w*")

# --- cues --------------------------------------------------------------------------------------------
# The description cues: an entity given by a relation instead of by its name.
RELATIONAL_OF = "relational 'the X of'"
POSSESSIVE = "possessive relation"
RU_RELATIONAL_CHAIN = "Russian relational chain"
RELATIVE_CLAUSE = "entity with relative clause"
CONTACT_CLAUSE = "entity with contact clause"
PARTICIPLE = "entity with participle"
SUPERLATIVE = "entity by superlative"
SAME_AS = "entity as 'the same X as'"
NESTED = "nested description"  # a description inside another phrase: "the population of the state where"


MAX_CHARS = 1000  # cues are read from the start: real questions are far shorter, and it bounds regex work


@dataclass(frozen=True)
class CueText:
    """A question with whitespace and apostrophes normalised, and the copies cues are matched in."""

    text: str
    lower: str  # for most cues
    cased: str  # for cues that look for capitals: only the sentence-initial capital, which marks no name, is lowered

    @classmethod
    def of(cls, question: str) -> "CueText":
        text = re.sub(r"\s+", " ", question[: MAX_CHARS * 2].replace("’", "'")).strip()[:MAX_CHARS]
        return cls(text, text.lower(), text[:1].lower() + text[1:])


@dataclass
class Cue:
    name: str  # shown in the reason and the features
    kind: str  # "global", "comparison" or "bridge" (the last two count for multihop)
    weight: float
    regex: str
    repeat: bool = False  # every match counts (nesting depth), not just the first
    # matched against the question as written, where a capital marks a name (the cue's own words are
    # lowercase); the others against the lower-cased question. Neither uses IGNORECASE, which makes
    # `re` several times slower.
    cased: bool = False
    pattern: re.Pattern = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.pattern = re.compile(self.regex)

    def text(self, q: CueText) -> str:
        return q.cased if self.cased else q.lower


CUES: tuple[Cue, ...] = (
    # corpus-wide scope
    Cue("across all", "global", 2.0,
        rf"\bacross (?:all|every|the (?:whole|entire)|(?:different |many |multiple |the )?(?:\w+ ){{0,2}}?"
        rf"{COLLECTION_UNITS})\b"),
    Cue("the whole collection", "global", 2.0,
        rf"\b(?:across|throughout|over|in|of) (?:the |this |our )?(?:whole |entire )?{COLLECTION_WHOLE}\b|"
        r"\b(?:вс[её]м|всей|весь|всего|всех|целом) (?:\w+ )?(?:корпус|коллекци|архив|баз[еау] знаний)"),
    Cue("all units", "global", 2.0,
        rf"\b(?:in|of|from|throughout|over) (?:all|every|each) (?:of )?(?:the )?(?:\w+ ){{0,2}}?{COLLECTION_UNITS}\b"),
    Cue("overall", "global", 2.0,
        r"^overall\b|[,;:] ?overall\b|\boverall[,?]|\bin general\b|\bon the whole\b|\bas a whole\b|"
        r"\bgenerally speaking\b"),
    Cue("main themes", "global", 1.5,
        r"\b(?:main|key|major|common|recurring|central|dominant|principal|overarching|general|broad) "
        r"(?:\w+ )?(?:themes?|topics?|trends?|patterns?|ideas|issues|lessons|takeaways|concerns|risks|"
        r"problems|challenges|messages|insights|narratives|perspectives|viewpoints)\b"),
    Cue("what are the main", "global", 1.0,
        r"^(?:what|which) (?:are|were) (?:the |some (?:of the )?)?(?:main|key|major|most common|common|"
        r"recurring|biggest|primary|principal|central)\b"),
    Cue("which themes", "global", 1.0,
        r"^(?:which|what) (?:\w+ )?(?:themes|topics|trends|patterns|issues|ideas)\b|"
        r"^(?:какие|каких) (?:\w+ )?(?:темы|тем|тенденции|идеи|проблемы)\b"),
    Cue("how often", "global", 2.0, r"\bhow (?:often|frequently|commonly)\b"),
    Cue("frequency", "global", 1.5,
        r"\b(?:frequently|often|typically|typical|generally|usually|commonly|repeatedly|recurring|"
        r"consistently)\b|\bmost (?:often|common|frequent)\b"),
    Cue("typical unit", "global", 1.0, rf"\b(?:typical|average|usual|each|every) (?:\w+ )?{SINGULAR_UNITS}\b"),
    Cue("speakers as subject", "global", 2.0,
        rf"\b(?:{SPEAKERS}|{COLLECTION_UNITS})(?: \w+){{0,2}}? {DISCOURSE_VERBS}\b"),
    # "which founders of Apple" is a particular group, not the collection's speakers
    Cue("which units", "global", 2.0,
        rf"\b(?:which|what|any|all|most|many|some|several|different) (?:of the )?(?:{SPEAKERS}|{COLLECTION_UNITS})"
        rf"\b(?! of\b)"),
    Cue("according to the collection", "global", 2.0,
        rf"\b(?:according to|mentioned by|cited by|discussed by|described by|raised by|shared by) "
        rf"(?:the |most |many |all )?(?:{SPEAKERS}|{COLLECTION_UNITS})\b"),
    Cue("are there ...", "global", 2.0,
        rf"^(?:are|were) there (?:any )?(?:\w+ )?(?:themes|topics|patterns|trends|mentions|examples|"
        rf"{COLLECTION_UNITS})\b"),
    Cue("в целом / во всех", "global", 2.0,
        r"\bв целом\b|\bв общем\b|\bво всех\b|\bпо всем\b|\bсреди всех\b|\bна протяжении всех\b|"
        r"\bво вс[её]м\b|\bвсех (?:документ|эпизод|выпуск|отч[её]т|стат|интервью|разбор|инцидент)"),
    Cue("основные темы", "global", 1.5,
        r"\b(?:основн|главн|ключев|общ|повторяющ|типичн|распростран[её]нн|частн)\w* "
        r"(?:\w+ )?(?:тем|тенденц|иде|проблем|риск|урок|вывод|закономерност|мотив)"),
    Cue("какие основные", "global", 1.0,
        r"^(?:какие|каковы) (?:основные|главные|ключевые|общие|самые частые|наиболее частые|"
        r"повторяющиеся|типичные)\b"),
    Cue("как часто", "global", 2.0, r"\bкак часто\b|\bчасто ли\b|\bчаще всего\b"),
    Cue("обычно", "global", 1.5, r"\bкак правило\b|\bобычно\b|\bрегулярно\b|\bнеоднократно\b|\bтипичн"),
    Cue("какие гости / в каких документах", "global", 2.0,
        r"\b(?:какие|какой из|кто из|многие|все|большинство) (?:гост|спикер|участник|автор|эксперт|руководител)|"
        r"\bв каких (?:документ|эпизод|выпуск|стать|интервью|отч[её]т|разбор)"),
    Cue("гости обсуждают", "global", 2.0,
        r"\b(?:гости|спикеры|участники|авторы|эксперты|руководители|документы|эпизоды|выпуски|статьи|"
        r"отч[её]ты)(?: \w+)? (?:обсужда|упомина|говор|рассказыва|описыва|отмеча|счита|дел[ия]тся|поднима)"),

    # comparison
    Cue("compare", "comparison", 1.0, r"\bcompar(?:e|ed|es|ing)\b|\bсравн|\bсопостав"),
    Cue("compare (imperative)", "comparison", 1.0,
        r"^(?:compare|contrast|сравни|сравните|сопоставь|сопоставьте)\b"),
    Cue("difference", "comparison", 1.0,
        r"\bdifferences? between\b|\bdiffer(?:s|ed)?\b|\bdistinguish(?:es)? between\b|\bin contrast\b|"
        r"\bотлича|\bразлича|\bразниц|\bв отличие от\b"),
    Cue("versus", "comparison", 1.0, r"\bvs\.? |\bversus\b"),
    # lookaheads, not ".*A.*B": each scans the question once whatever the order of A and B
    Cue("either-or with a comparative", "comparison", 2.0,
        rf"^(?=(?:{WH_WORDS}|{RU_QUESTION_WORDS})\b)(?=.*\b{COMPARATIVES}\b)(?=.*\b(?:or|или)\b)|"
        rf"^(?:between|of|из|между) [^,]+ (?:and|or|и|или) [^,]+, (?:{WH_WORDS}|{RU_QUESTION_WORDS})\b"),
    Cue("both", "comparison", 1.0, r"\bboth\b|\bоб[аеи]\b|\bобоих\b|\bобеих\b"),
    Cue("both ... and", "comparison", 0.5, r"\bboth \S.* and\b|\bкак \S.* так и\b"),
    Cue("same", "comparison", 1.0,
        r"\bthe same\b|\bin common\b|\bsimilarities\b|\brespective(?:ly)?\b|\beach other\b|\bone another\b|"
        r"\bодинаков|\bодин и тот же\b|\bодн(?:ой|ом|у) и т(?:ой|ом|у) же\b|\bтот же\b|\bта же\b|"
        r"\bобщего у\b|\bдруг (?:друга|другу|с другом|от друга)\b"),
    Cue("also (yes/no)", "comparison", 0.5,
        r"\b(?:does|do|did|is|are|was|were|has|have|had)\b(?: [\w'-]+){1,6} also\b|\bтоже\b|\bтакже ли\b"),

    # bridge: an entity given by its relation to another
    Cue(RELATIONAL_OF, "bridge", 1.0,
        rf"\b(?:the|a|an|one of the|its|his|her|their) (?:[\w-]+ ){{0,2}}?{RELATIONAL_NOUNS} of\b|"
        rf"\bthe (?:[\w-]+ )?{CONTAINER_NOUNS} (?:of|that) (?:the|a|an|\w+'s)\b", repeat=True),
    Cue(POSSESSIVE, "bridge", 1.0,
        rf"\b\w+(?:'s|s') (?:[\w-]+ ){{0,2}}?(?:{RELATIONAL_NOUNS}|{CONTAINER_NOUNS})\b(?! of)", repeat=True),
    # a relational noun before a genitive (a name, a title or a genitive ending), lookahead so that
    # "жена основателя компании" counts both links
    Cue(RU_RELATIONAL_CHAIN, "bridge", 1.0,
        rf"\b{RU_RELATIONAL}\w*(?= (?:[«\"“]|[А-ЯЁA-Z]|[а-яё]+(?:ы|и|а|я|ов|ев|ей|ого|его|ой|ых|их)\b))",
        repeat=True, cased=True),
    Cue(RELATIVE_CLAUSE, "bridge", 1.5,
        rf"\b(?:the|a|an|this|that|one) (?:[\w-]+ ){{0,3}}?{ENTITY_TYPES}(?: \w+)?,? {RELATIVE_PRONOUNS}\b|"
        rf"\b{RU_ENTITY_TYPES}\w*,? {RU_RELATIVE}(?= )", repeat=True),
    # "the country Signmark is from": a relative clause without a pronoun, seen by the capital after the
    # type and the participle or stranded preposition closing it ("the director X has an OBE" names)
    Cue(CONTACT_CLAUSE, "bridge", 1.5,
        rf"\bthe (?:[\w-]+ )?{ENTITY_TYPES} (?:the )?[A-Z][\w'-]*(?: [\w'.-]+){{0,5}}? "
        rf"(?:is|was|are|were|has been|had been)(?: \w+ly)? (?:from|in|at|on|{PARTICIPLES})\b",
        cased=True, repeat=True),
    Cue(PARTICIPLE, "bridge", 1.0,
        rf"\b(?:the|a|an|this|that|which|what) (?:[\w-]+ ){{0,3}}?{ENTITY_TYPES},? (?:\w+ly )?{REDUCED_RELATIVE}\b",
        repeat=True),
    Cue(SUPERLATIVE, "bridge", 1.5, rf"\bthe (?:[\w-]+ )?{ENTITY_TYPES} {SUPERLATIVE_TAIL}"),
    Cue(SAME_AS, "bridge", 1.0, rf"\bthe same (?:[\w-]+ )?{ENTITY_TYPES} as\b", repeat=True),
    Cue(NESTED, "bridge", 0.5,
        rf"\b{PREPOSITIONS} (?:the|a|an) (?:[\w-]+ ){{0,3}}?{ENTITY_TYPES},? {RELATIVE_PRONOUNS}\b|"
        rf"\b{PREPOSITIONS} the (?:[\w-]+ )?{ENTITY_TYPES} (?:the )?[A-Z]|"
        rf"\b{PREPOSITIONS} the (?:[\w-]+ )?{ENTITY_TYPES} {SUPERLATIVE_TAIL}", cased=True),
    Cue("relational verb", "bridge", 0.5, rf"\b{RELATIONAL_VERBS}\b"),
    Cue("follow-up about a person", "bridge", 1.0,
        rf"[,;]? and (?:{WH_WORDS}|in which|in what)\b.*\b(?:he|she|him|her|his)\b|"
        r",? и (?:где|когда|кто|что|как|кем|чем|в как\w+|как\w+|сколько)\b.*"
        r"\b(?:он|она|его|её|ее|ему|ей|ней|н[её]м)\b"),
)
CUE_BY_NAME = {cue.name: cue for cue in CUES}

# "What is the X of Y?" asks for the description itself (one hop); any other use of a description
# ("Where was the director of X born?", "When did the city where Y is located fall?") asks something
# about the entity it describes: one more hop.
IDENTITY_START = _anchored(
    r"^(?:which|who|what|one) of (?=the )|"
    r"^(?:какой|какая|какое|какие|каков\w*)(?: \w+)? (?:является|являлся|являлась|являются|был|была|было|были) |"
    r"^(?:кто|какой|какая|какое|какие|который|которая|которое|которые) из |"
    r"^(?:who|what) (?:is|was|are|were) (?=the |a |an )|"
    r"^(?:кто|кем|что|чем)(?: (?:является|являлся|являлась|являются|был|была|было|были))? ")
# "Where is the headquarters of X?" too, but only for a relational noun: "Where is the district that
# X is part of?" asks where the described district lies, a hop past it.
PLACE_TIME_START = _anchored(r"^(?:where|when|which \w+) (?:is|was|are|were) (?=the |a |an )|"
                             r"^(?:где|когда)(?: (?:был|была|было|были|находится|находился|находилась))? ")
# ... unless an event verb follows the description: "Where was the director of X born?"
EVENT_AT_END = _rx(r"\b(?:born|died|buried|founded|formed|established|built|created|released|published|"
                   r"written|composed|recorded|produced|directed|married|elected|made|signed|opened|closed|"
                   r"родил\w*|умер\w*|основан\w*|создан\w*|построен\w*|снят\w*|написан\w*)\W*$")
RELATIONAL_DESCRIPTIONS = (RELATIONAL_OF, POSSESSIVE, RU_RELATIONAL_CHAIN)
ARGUMENT_BONUS = {RELATIONAL_OF: 1.0, POSSESSIVE: 1.0, RU_RELATIONAL_CHAIN: 1.0, RELATIVE_CLAUSE: 0.5,
                  CONTACT_CLAUSE: 0.5, PARTICIPLE: 0.5, SUPERLATIVE: 0.5, SAME_AS: 0.5}
# A clause that only names ("the place that is now called X", "the name of the river that ...")
# identifies by name: no hop.
NAMING = _rx(r"\bthe (?:name|title) of\b|\b(?:called|named|known as)\b|\bназыва|\bназван|"
             r"\bзовут\b|\bзвали\b|\bимя\b")
# An English statement with a wh-word left in place ("X is on a network founded by who?") or a
# statement before the question ("A and B were founded in 1958. Which ...?"): the statement
# describes the entity the question builds on.
IN_SITU_WH = _rx(r"(?<![,:;(]) (?:by |in |from |of |for |on |at |with |to |into )?"
                 r"(?:who|whom|what|which|when|where|how many|how much)\b")
OPENER = _anchored(rf"^(?:{QUESTION_OPENERS})\b")
RU_OPENER = _anchored(rf"^(?:{RU_QUESTION_WORDS})\b")
# a full stop after a lowercase word, a number or an acronym ("... has an OBE. Does ..."), not after
# an initial ("Jon L. Luther", "U.S. state")
SENTENCE_END = re.compile(r"(?:(?<=[a-z0-9)\"”])|(?<=[A-Z]{2}))[.!] +(?=[A-Z])")
ANAPHORA = _rx(r"\b(?:this|that|these|those|it|its|he|she|his|her|they|their|one)\b")
LATIN = re.compile(r"[A-Za-z]")
CYRILLIC = re.compile(r"[А-Яа-яЁё]")

# Named entities: runs of capitalised words (with "of", "de", ... inside), acronyms, quoted titles.
QUOTED = re.compile(r"\"[^\"]{2,}\"|«[^»]{2,}»|“[^”]{2,}”")
NAME = r"[A-ZА-ЯЁ][\w'.&+-]*(?: (?:(?:of|the|de|da|du|von|van|del|la|le|y|&) )?[A-ZА-ЯЁ0-9][\w'.&+-]*)*"
CAPITALISED_RUN = re.compile(rf"(?<![\w'])(?:{NAME})")
NAMED = rf"(?:{NAME}|\"[^\"]+\"|«[^»]+»)"
# Two named things side by side ("Berlin and Moscow", "A or B", "compared with the US region",
# "отличается X от Y"): the comparison is between separately documented entities, one search each.
NAMED_PAIR = re.compile(
    rf"(?<![\w']){NAMED}(?: [a-zа-яё]+)?,? (?:and|or|vs\.?|versus|и|или|против) (?:the |a |an )?{NAMED}|"
    rf"\b(?:compared|comparison) (?:with|to) (?:the )?{NAME}|\bпо сравнению с {NAMED}|"
    rf"\b(?:differs?|differed|отлича\w*)\b.* (?:from|от) (?:the )?(?:[a-zа-яё]+ )?{NAMED}")
# Question words and a request's verb the answer writers' word classes leave out: with those classes, never
# a named entity alone (router/classify.py NEVER_A_NAME_ALONE)
QUESTION_WORDS = frozenset("according define каковы откуда почему чей чье чьё чья чьи".split())

# A question about how named things are related: the graph-local context (graph/query/local_context.py)
# answers it from the relationships between them. Only explicit relation phrasings, so a question
# that merely mentions two names is not one: "how is X related/connected/linked to Y", "what
# connects / the relationship between / the connection between", "кто связан с", "как связан(ы)",
# "что связывает", "связь между".
RELATION_QUESTION = _anchored(
    r"\bhow (?:is|are|was|were) .{1,80}? (?:related|connected|linked|tied) (?:to|with)\b|"
    r"\bwhat (?:connects|links|ties)\b|\b(?:the |a )?(?:relationship|relation|connection|link) between\b|"
    r"\bhow do .{1,80}? relate\b|"
    r"\bкто связан\w*\b|\bкак (?:\S+ ){0,6}?связан\w*\b|\bчто связыва\w*\b|\bсвяз\w* между\b|\bотношени\w* между\b")


def asks_relation(question: str) -> bool:
    return bool(RELATION_QUESTION.search(question[:MAX_CHARS]))
