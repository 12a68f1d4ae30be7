"""Structure features of chained questions, read by the learned router alone (router/route_features.py).

Generic grammar of chained questions, with no word list of relations or entity types: the cue table
(router/question_cues.py) fires on known relational nouns and entity types, and a chain through any
other noun ("the dosage of the drug prescribed for ...", "the award the novel's author received")
passes it by. These are counted, never scored by the heuristic: one of them alone is as common in a
one-hop question ("the timeout that the client uses"), so only the model, beside the embedding, may
weigh them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from router.question_cues import PREPOSITIONS, CueText, _words

# Matched in the lower-cased question unless `cased`.
PAST = _words("\\w+ed", "won", "wrote", "written", "made", "took", "taken", "gave", "given", "held", "built",
              "sold", "led", "ran", "began", "became", "found", "fought", "lost", "met", "left", "bought",
              "brought", "taught", "sang", "drew", "grew", "chose", "chosen", "rose", "struck", "beat", "shot",
              "spoke", "knew", "known", "went", "born", "set", "kept", "paid", "sent", "spent", "saw",
              "seen", "told", "had", "was", "were", "sank", "sunk", "hit", "put", "came", "drove", "driven", "flew",
              "stood", "ate", "swore", "wore", "threw", "thrown", "broke", "broken", "froze", "hid")
DETERMINER = _words("the", "a", "an", "this", "that", "these", "those")
POSSESSOR = _words("the", "a", "an", "his", "her", "its", "their")
EN_RELATIVE = _words("that", "which", "who", "whom", "whose", "where")
RU_RELATIVE_ANY = _words("котор\\w+", "чей", "чья", "чь[её]", "чьи", "чьего", "чьей", "чьему", "чьим", "чьих",
                         "где", "куда", "откуда")
RU_PREPOSITIONS = _words("в", "во", "на", "из", "с", "со", "у", "для", "при", "от", "к", "по", "за", "под",
                         "над", "о", "об", "через", "перед", "между", "среди", "после", "до")
# Russian participles: active (-вш-, -ющ-, -ущ-, -ащ-, -ящ-) and past passive (-енн-, -анн-), any case;
# the common adjectives built the same way ("следующий", "текущий", "настоящий") are not clauses.
RU_PARTICIPLE = (r"(?!следу|будущ|настоящ|текущ|подходящ|блестящ|входящ|исходящ|предыдущ|определ[её]нн|"
                 r"обязанн|согласованн)[а-яё]+(?:вш|ющ|ущ|ащ|ящ|енн|ённ|анн)"
                 r"(?:ий|ый|ая|ое|ее|ие|ые|его|ого|ей|ой|ему|ому|им|ым|ую|их|ых|ими|ыми|ем|ом)\b")
NAME_WORD = r"(?:[A-ZА-ЯЁ][\w'-]+|«[^»]+»|\"[^\"]+\")"
MID = r"(?<=[\w,] )"  # a relative pronoun inside the question, not the wh-word opening it
# a word of a noun phrase: not a preposition, conjunction, pronoun or auxiliary that would carry the
# match into another phrase or clause
NOT_NOUN = _words(PREPOSITIONS, EN_RELATIVE, "and", "or", "but", "through", "across", "over", "under", "after",
                  "before", "without", "within", "between", "against", "during", "via", "per", "like", "when",
                  "if", "while", "because", "is", "are", "was", "were", "be", "been", "being", "has", "have",
                  "had", "do", "does", "did")
NOUNISH = rf"(?!{NOT_NOUN}\b)[\w'-]+"


@dataclass
class Structure:
    name: str
    regex: str
    cased: bool = False
    anchored: bool = False  # matched once at the start (any case) instead of counted over the question
    # plain substrings of the lower-cased question one of which any match contains: a question with none
    # skips the regex, which keeps the features cheap (the router must route thousands of questions/s)
    needs: tuple[str, ...] = ()
    pattern: re.Pattern = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.pattern = re.compile(self.regex, re.IGNORECASE) if self.anchored else re.compile(self.regex)

    def count(self, q: CueText) -> int:
        if self.needs and not any(word in q.lower for word in self.needs):
            return 0
        if self.anchored:
            return int(self.pattern.match(q.text) is not None)
        return len(self.pattern.findall(q.cased if self.cased else q.lower))


EN_PRONOUN_NEEDS = (" that", " which", " who", " where")
RU_PARTICIPLE_NEEDS = ("вш", "ющ", "ущ", "ащ", "ящ", "енн", "ённ", "анн")


STRUCTURES: tuple[Structure, ...] = (
    # "the film that ...", "the clause which ...": a relative clause after ANY noun
    Structure("relative clause", rf"\b{DETERMINER} (?:{NOUNISH} ){{0,3}}?{NOUNISH},? (?:[a-z]+ )?{EN_RELATIVE}\b",
              needs=EN_PRONOUN_NEEDS),
    # its verb in the past or passive: an event that picks the entity out ("that won", "who was hired")
    Structure("relative clause in the past", rf"{MID}{EN_RELATIVE} (?:[\w'-]+ ){{0,3}}?{PAST}\b",
              needs=EN_PRONOUN_NEEDS),
    # a name inside the clause: the entity is found through another, named one
    Structure("name inside a relative clause", rf"{MID}{EN_RELATIVE} (?:[\w'-]+ ){{0,4}}?{NAME_WORD}", cased=True,
              needs=EN_PRONOUN_NEEDS),
    # "the award the author received": a clause with no pronoun, its subject a described noun phrase
    Structure("contact clause", rf"\b{DETERMINER} {NOUNISH}(?: {NOUNISH})? {POSSESSOR} (?:{NOUNISH} ){{0,2}}?{PAST}\b"),
    # "the drug prescribed for ...", "the firm acquired by ...": a reduced passive clause after any noun
    Structure("reduced passive clause",
              rf"\b{DETERMINER} (?:{NOUNISH} ){{0,2}}?{NOUNISH} (?:\w+ly )?{PAST} (?:by|in|at|for|during|to|from|on|under|"
              rf"with|after|before|as)\b"),
    # "the capital of the country that ...", "the head of the agency of ...": an of-phrase whose object
    # is itself described
    Structure("described of-object",
              rf"\bthe [\w-]+(?: [\w-]+)? of {POSSESSOR} (?:[\w-]+ ){{1,2}}?(?:of|{EN_RELATIVE}|{PAST})\b"),
    # "the novel's author", "the company's founder": the possessor is a description, not a name
    Structure("described possessor", rf"\b{DETERMINER} (?:[\w-]+ ){{0,2}}?[\w-]+(?:'s|s') [\w-]+", needs=("' ", "'s ")),
    Structure("possessive chain", r"\w+'s (?:[\w-]+ ){0,2}?\w+'s\b", needs=("'s ",)),
    # Russian: a relative clause after a comma (Russian always sets it off), with or without a preposition
    Structure("Russian relative clause", rf", (?:{RU_PREPOSITIONS} )?{RU_RELATIVE_ANY}(?= )", needs=(", ",)),
    # "того, кто ...", "той, что ...": a description by a clause with a demonstrative head
    Structure("Russian 'того, кто'",
              r"\b(?:тот|того|тому|тем|том|та|той|ту|те|тех|теми|то),? (?:кто|что|чей|чья|чьё|чьи|котор\w+)\b"),
    # "фильма, получившего ...": a participial phrase, Russian's reduced relative clause
    Structure("Russian participial phrase", rf", {RU_PARTICIPLE}", needs=RU_PARTICIPLE_NEEDS),
    # imperative requests to make sense of a whole collection
    Structure("imperative opener",
              r"^(?:please,? )?(?:summari[sz]e|outline|synthesi[sz]e|survey|give|provide|list|identify|describe|"
              r"map|walk|review|characteri[sz]e|trace|gather|collect|compile|"
              r"(?:пожалуйста,? )?(?:обобщи|сделай|составь|дай|подготовь|перечисли|опиши|расскажи|выдели|"
              r"проанализируй|собери|сформулируй|суммируй|резюмируй|приведи|покажи|найди|назови|объясни|сравни|"
              r"оцени|сопоставь|напиши|изложи|представь|определи|укажи|проследи|отметь|разбери|обрисуй|"
              r"систематизируй|классифицируй)(?:те)?)\b", anchored=True),
    Structure("overview requested",
              r"\b(?:overview|summary|summari[sz]e|synthesi[sz]e|synthesis|big picture|landscape|rundown|"
              r"bird's-eye|high-level|обзор|сводк|обобщ|резюме|выжимк|общ(?:ую|ая|ей) картин|в общих чертах|"
              r"суммируй|резюмируй)"),
)
