"""How a multi-hop question reads, for the chain that answers it (answers/chain/answer.py): its two
parts when it asks two things, the fewest hops its form allows, its names as the passages' titles
extend them, and the relation words only its start's clause states."""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import islice

from core.sentences import split_sentences
from core.text.terms import content_stems
from core.text.tokens import WORD
from answers.expected_type import question_kind
from answers.units import entity_key
from answers.chain.names import PLACE_KINDS
from answers.question_text import AUX_START, FUNCTION_WORDS, title_core
from answers.types import Passage

_NEAR = 80  # characters around a word that hold the words next to it
MAX_CANDIDATES = 8  # relative words a question is split at, at most

# "..., and in which office does he work?": a second question about what the first one asks for.
_SECOND_PART = re.compile(r",\s*(?:and|и)\s+(?=(?:in |at |from |в |из )?(?:which|what|where|when|who|how|"
                          r"каком|какой|какая|где|когда|кто|сколько)\b)", re.IGNORECASE)


def question_parts(question: str) -> tuple[str, str] | None:
    """The two questions of a question that asks two things about one chain, the second asking its own
    type ("Кто руководит командой X, и в каком офисе он работает?": a person, then a place); None
    for a question asking one thing."""
    m = _SECOND_PART.search(question)
    if not m:
        return None
    first, second = question[:m.start()].strip(), question[m.end():].strip()
    if not question_kind(second) or not content_stems(first) or not content_stems(second):
        return None
    return first + "?", second


def extended_names(question: str, names: list[str], passages: list[Passage]) -> list[str]:
    """A question's names, each extended by the words after it while a passage title still names the
    longer phrase: Russian names go on in lower case ("Сервис уведомлений"), which capitals miss."""
    titles = [frozenset(content_stems(title_core(p.title))) for p in passages if p.title]
    out = []
    for name in names:
        at = question.find(name)
        rest = WORD.findall(question[at + len(name):]) if at >= 0 else []
        longest = name
        for extra in range(1, 3):
            longer = " ".join([name, *rest[:extra]])
            want = set(content_stems(longer))
            if len(rest) < extra or len(want) <= len(set(content_stems(longest))) or not any(want <= t for t in titles):
                break
            longest = longer
        out.append(longest)
    # a name that a longer one extended over is that one's part: "West Virginia" of "Johnnycake,
    # West Virginia" would start a chain at every passage about the state
    keys = [entity_key(n) for n in out]
    return [n for n, k in zip(out, keys)
            if not any(o != k and re.search(rf"(?<!\w){re.escape(k)}(?!\w)", o) for o in keys)]


# Each relative clause or possessive links one more entity: "the lead of the team that owns X" is
# X -> team -> lead -> the asked office, at least three hops.
_RELATIVE = re.compile(r"(?<=\w)\s*,?\s+(that|which|who|whom|whose|where)\b|'s\b|’s\b|\bof the\b|"
                       r"\b(котор\w+|чей|чья|чьё|чьи|где)\b", re.IGNORECASE)


def _clause_starts(question: str) -> list[int]:
    """Where each relative clause or possessive starts, past the question's own word ("In which
    office ...")."""
    words = list(WORD.finditer(question))
    opening = words[1].end() if len(words) > 1 else 0
    relative = [m.start() for m in _RELATIVE.finditer(question) if m.start() >= opening
                and not _asked_here(question, m) and not _determiner(question, m) and not _same_antecedent(question, m)]
    # "a network founded by ...": a passive participle after a noun opens a clause as "which was" would
    relative += [m.end(1) for m in _EN_PARTICIPLE.finditer(question)]
    # "of the country X is in" is one hop, which "of the" counted
    reduced = [m.start() for m in _EN_REDUCED.finditer(question)
               if not re.search(r"\bof\s*$", question[max(0, m.start() - 4):m.start()], re.IGNORECASE)]
    return sorted(relative + reduced)


_EN_PARTICIPLE = re.compile(r"\b(?:a|an|the)\s+([a-z]+)\s+(?:[a-z]+ed|written|built|made|sung|drawn|won|held|led|"
                            r"run|sold|bought|taught|told|given|taken|shown|grown|begun|chosen|spoken|sent|brought|"
                            r"thrown|kept)\s+by\s+\w")
_COORDINATED = re.compile(r"(?:\band|\bor|\bи|\bа|\bили)\s*,?\s*$", re.IGNORECASE)


def _same_antecedent(question: str, m: re.Match) -> bool:
    """Whether a relative clause says more of the noun an earlier one described, so leads to no new
    entity: one joined by "and" ("the singer who is known for X and whose third album is Y"), or the
    "'s" of "who's" (one relative word, counted once)."""
    if m.group().startswith(("'", "’")):
        return question[max(0, m.start() - 3):m.start()].casefold() == "who"
    return bool(_COORDINATED.search(question[max(0, m.start() - _NEAR):m.start()]))


def _determiner(question: str, m: re.Match) -> bool:
    """Whether "that" stands as a determiner ("in which office does that person work"): after a
    function word, where a relative pronoun follows its noun."""
    if (m.group(1) or "").casefold() != "that":
        return False
    before = WORD.findall(question[max(0, m.start() - _NEAR):m.start()])
    return bool(before) and before[-1].casefold() in FUNCTION_WORDS


def _asked_here(question: str, m: re.Match) -> bool:
    """Whether "which", "what" or "who" asks the question where it stands ("... is based in which office?"):
    at most two words follow it to the question's end, where a relative clause states something ("the
    band which made Maiden Japan?")."""
    word = (m.group(1) or "").casefold()
    if word not in ("which", "what", "who", "whom"):  # "founded by whom?" asks too
        return False
    near = question[m.end():m.end() + _NEAR]  # bounded: a question is read once per relative word in it
    return len(WORD.findall(near)) <= 2 and not WORD.search(question, m.end() + _NEAR)


def least_hops(question: str) -> int:
    """The fewest hops the question's form allows: one, plus one per relative clause or possessive."""
    return 1 + len(_clause_starts(question))


def other_name_stems(names: list[str], start: str) -> list[str]:
    """The stems of the question's names other than the chain's start."""
    own = set(content_stems(start))
    return sorted({s for n in names if n != start for s in content_stems(n)} - own)


def start_clause(question: str, start: str, relation: list[str]) -> set[str]:
    """The relation words only the clause or phrase holding the chain's start states: they are the
    first hop's, whether or not that hop says them in the question's words. In "Who is the sibling
    of the performer of Decade?" a later hop stating "performed by" goes back to the first relation,
    not on to the sibling; once the first hop is made, those words count no more."""
    at = question.find(start)
    cuts = _clause_starts(question)
    if at < 0 or not cuts:
        return set()
    bounds = [0, *cuts, len(question)]
    i = max(k for k in range(len(bounds) - 1) if bounds[k] <= at)
    inside = set(content_stems(question[bounds[i]:bounds[i + 1]]))
    outside = set(content_stems(question[:bounds[i]] + " " + question[bounds[i + 1]:]))
    return {r for r in relation if r in inside and r not in outside}


# --- a question about an entity it only describes ---------------------------------------------------

_EN_RELATIVE = re.compile(r"\b(who|that|which|where)\b", re.IGNORECASE)
# a clause with no relative word after a place's kind, a name its subject: "the country Ceelmakoile is
# located in", "the state the Battle of Mine Creek was fought" (bounded: a name of at most six words)
_EN_REDUCED = re.compile(r"\b(?i:the)\s+(" + "|".join(sorted(PLACE_KINDS)) + r")\s+(?=(?:the\s+)?[A-Z][\w'.-]*"
                         r"(?:\s+(?:of\s+|de\s+)?[A-Z][\w'.-]*){0,5}\s+(?:is|was|are|were)\b)")
# a Russian relative clause or participle phrase stands between commas after its noun: "в команде,
# которой принадлежит сервис", "сервис, пострадавший в инциденте"
_RU_RELATIVE = re.compile(r",\s*(котор(?:ый|ая|ое|ые|ого|ой|ому|ым|ую|ых|ом|ыми)|где)\b", re.IGNORECASE)
_RU_PARTICIPLE = re.compile(r",\s*(\w+(?:вш|ющ|ящ|ущ|ащ)(?:ий|ая|ее|ие|его|ей|ему|им|ую|их|ими|ем))\b", re.IGNORECASE)
_RU_ADJECTIVE = re.compile(r"\w+(?:ый|ий|ой|ая|яя|ое|ее|ые|ие|ого|его|ому|ему|ым|им|ую|юю|ых|их|ей)$", re.IGNORECASE)
_EN_DETERMINERS = frozenset("the a an this its their his her our".split())
_EN_OPENING = re.compile(r"^\W*(?:what|which|who|whom|whose|where|when|how|why|is|are|was|were|do|does|did|has|"
                         r"have|had|can|could|will|would|in|on|at|from|to|for|of|by)\b", re.IGNORECASE)
_EN_AUXILIARY = re.compile(rf"\b(?:{'|'.join(sorted(w for w in AUX_START if w.isascii()))})\b", re.IGNORECASE)
_EN_DO = re.compile(r"\b(?:do|does|did)\b", re.IGNORECASE)
_EN_ASKED = re.compile(r"\b(?:which|what|where|when|who|whom|how)\b", re.IGNORECASE)
# "который" as the question word of its case: "которой принадлежит" asks "какой ... принадлежит"
_RU_ASKING = {"ый": "какой", "ая": "какая", "ое": "какое", "ые": "какие", "ого": "какого", "ой": "какой",
              "ому": "какому", "ым": "каким", "ую": "какую", "ых": "каких", "ом": "каком", "ыми": "какими"}


@dataclass(frozen=True)
class Nested:
    """A question that names an entity only by what a clause says of it ("the engineer who commanded
    the Nordpost incident"), split as DecompRC splits a bridging question (Min et al., 2019): `inner`
    asks for that entity ("Who commanded the Nordpost incident?"); `outer` is the question with the
    entity in the clause's place, `{}` marking where; `place`: whether the clause's noun is a kind of
    place ("the city where ..."), which types the entity the clause must find."""
    inner: str
    outer: str
    place: bool = False

    def then(self, entity: str) -> str:
        return self.outer.replace("{}", entity)


def described_ask(question: str) -> tuple[str, str] | None:
    """A question whose first sentences state what its last one asks about ("Платёжный шлюз сначала
    отправляет каждое списание основному эквайеру. До какой даты действует наш договор с этим эквайером?"):
    (the statements, the last sentence); None for a question of one sentence, or of several questions."""
    sentences = split_sentences(question.strip())
    if len(sentences) < 2 or not sentences[-1].rstrip().endswith("?"):
        return None
    if any(s.rstrip().endswith("?") for s in sentences[:-1]):
        return None
    return " ".join(s.strip() for s in sentences[:-1]), sentences[-1].strip()


def relative_clause(text: str) -> str | None:
    """"russian" or "english" when the text holds a relative clause of that language's form (", который",
    ", где"; a lower-case "who", "that", "which", "where", so that a title's "Who" is none), else None."""
    if _RU_RELATIVE.search(text):
        return "russian"
    if any(m.group(1).islower() for m in _EN_RELATIVE.finditer(text)):
        return "english"
    return None


def nested_question(question: str) -> Nested | None:
    """The question's first relative clause (English "who", "that", "which", "where" after a noun;
    Russian "который", "где" or an active participle after a comma) as a question of its own, and the rest around
    the entity it describes; None when the question has no such clause, or when where the clause ends
    cannot be told (a declarative English question with no question word after the clause)."""
    text = question.strip().rstrip("?").rstrip()
    return _russian_nested(text) if _RU_RELATIVE.search(text) or _RU_PARTICIPLE.search(text) \
        else _english_nested(text)


def _english_nested(text: str) -> Nested | None:
    words = list(WORD.finditer(text))
    ends = [w.end() for w in words]
    # the first few candidates only: a question holds a clause or two, and each candidate costs a pass
    for at, after, relative, m in islice(_english_clauses(text), MAX_CANDIDATES):
        before = words[:bisect_right(ends, at)]
        head = before[-1] if len(before) >= 2 else None
        if head is None or (m is not None and _asked_here(text + "?", m)) or not head.group().isalpha() or \
                head.group().casefold() in FUNCTION_WORDS or text[head.end():at].strip(" ,"):
            continue  # the question's own word, or "that" as a determiner ("does that person work")
        # the noun phrase: back to its determiner, at most four words
        start = head.start()
        for w in reversed(before[-5:-1]):
            if w.group().casefold() in _EN_DETERMINERS:
                start = w.start()
                break
        if _EN_OPENING.match(text):
            prior = [w for w in words if w.end() <= start]
            if prior and (_EN_AUXILIARY.fullmatch(prior[-1].group()) or _EN_DO.fullmatch(prior[-1].group())):
                # the clause's noun is the subject of the question ("In what year was the man that
                # resigned ... born?", "Where did the band form that made ..."): where the clause ends
                # and the question's own verb begins takes a parser to tell
                return None
            # "What is the language of the person who broke ...": to the end; but where "do" asks, the
            # main verb comes last ("In which office does the lead of the team that owns X work")
            done = _EN_DO.search(text, 0, start)
            # inside the subject when only "of" and determiners join it to "do" ("does the lead of the
            # team that ..."); after a preposition of the verb's, it runs to the end ("does a Moscow
            # employee get on a business trip to the city where ...")
            between = [w.group().casefold() for w in words if done and done.end() <= w.start() and w.end() <= start]
            subject = done and not any(w in FUNCTION_WORDS and w != "of" and w not in _EN_DETERMINERS for w in between)
            end = words[-1].start() if subject and words[-1].start() > after else len(text)
        else:  # "The engineer who commanded X is based in which office": up to the verb before the asked word
            asked = [a for a in _EN_ASKED.finditer(text, after)]
            verbs = [v for v in _EN_AUXILIARY.finditer(text, after, asked[-1].start())] if asked else []
            if not verbs:
                return None
            end = verbs[-1].start()
        clause = text[after:end].strip(" ,")
        if not WORD.search(clause):
            continue
        noun = " ".join(w.group() for w in words if start <= w.start() and w.end() <= head.end()
                        and w.group().casefold() not in _EN_DETERMINERS)
        # "the city where X was founded" asks which city, as does "the country X is in"
        asking = "Who" if relative == "who" else f"In which {noun}" if relative in ("where", "") else f"Which {noun}"
        return Nested(f"{asking} {clause}?", " ".join(f"{text[:start]}{{}} {text[end:]}".split()) + "?",
                      head.group().casefold() in PLACE_KINDS)
    return None


def _english_clauses(text: str) -> list[tuple[int, int, str, re.Match | None]]:
    """Where each clause starts, in order: (start, where its words begin, its relative word, that
    word's match) for "who", "that", "which", "where"; a clause with no relative word after a place's
    kind starts where its words do, with "" and no match."""
    relative = [(m.start(), m.end(), m.group(1).casefold(), m) for m in _EN_RELATIVE.finditer(text)]
    reduced = [(m.end(), m.end(), "", None) for m in _EN_REDUCED.finditer(text)]
    return sorted(relative + reduced, key=lambda c: c[0])


def _russian_nested(text: str) -> Nested | None:
    m = min((r for r in (_RU_RELATIVE.search(text), _RU_PARTICIPLE.search(text)) if r), key=lambda r: r.start())
    before = [w for w in WORD.finditer(text) if w.end() <= m.start()]
    if not before:
        return None
    start = before[-1].start()
    if len(before) > 1 and _RU_ADJECTIVE.fullmatch(before[-2].group()) and before[-2].group()[:1].islower():
        start = before[-2].start()
    noun = text[start:m.start()].strip()
    # the clause runs to the next comma, and on over a participle phrase after it (it says more of the
    # clause's own noun: "которой принадлежит сервис, пострадавший в инциденте")
    end = text.find(",", m.end())
    while end >= 0 and _RU_PARTICIPLE.match(text, end):
        end = text.find(",", end + 1)
    end = len(text) if end < 0 else end
    pronoun = m.group(1)
    clause = text[m.end(1):end].strip()
    if not WORD.search(clause):
        return None
    if pronoun.casefold() == "где":  # "офис, где работает X": where X works
        inner = f"Где {clause}?"
    elif pronoun.casefold().startswith("котор"):
        asking = _RU_ASKING[pronoun.casefold()[len("котор"):]]
        inner = f"{asking.capitalize()} {noun.casefold()} {clause}?"
    else:  # a participle phrase: "какой сервис пострадавший в инциденте"
        inner = f"Какой {noun.casefold()} {pronoun} {clause}?"
    return Nested(inner, f"{text[:start]}{{}}{text[end:]}?")
