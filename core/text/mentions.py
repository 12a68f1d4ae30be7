"""Mentions of named entities in Russian and English text, found by surface patterns (no model).

Used by the offline graph extractor (graph/indexing/extract_offline.py), which adds types and
co-occurrence edges, and by the router to find bridge entities in a passage.

GraphRAG's "fast" method in spirit: surface patterns, no model; quick and deterministic. No word list
(core/text/names.py) names anything of a particular corpus.

- Candidates: runs of capitalised words (with "of"/"de"/hyphens inside), short quoted names («Волга»),
  codes (ERR_2043, INC-2024-117, SEV1), snake_case, backticked identifiers, HTTP routes and paths,
  CamelCase, acronyms. Russian capitalises only a name's first word ("Сервис уведомлений"): a capitalised
  word plus a genitive plural, or a capitalised adjective plus a noun, is one name inside a sentence, or
  at its start when the chunk's heading, title or bold text has the phrase.
- A capitalised word alone at a sentence, list item or table cell start is usually a common word: it
  counts only if the chunk capitalises it elsewhere. Function words and dates never start or join a name;
  a common word that opens names ("New York City") starts one but is never one alone.
- Types are votes: shape (codes), a head word in the name ("team", "команда", "Gateway", "Inc"), cue
  words next to it ("lead", "руководитель", "vendor"), surname endings, country names; two plain
  capitalised words the chunk never writes in lowercase lean to person.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import NamedTuple

from core.text.names import (
    CONTRACTIONS, CUE_WORDS, GENERIC_ACRONYMS, GEOGRAPHY_KEYS, HEAD_WORDS, NAME_CONNECTORS, NAME_OPENERS, RU_ADJECTIVE,
    RU_GENITIVE_PLURAL, RU_INFINITIVE, RU_LOCATIVE, RU_PATRONYMIC, STOP_WORDS, TEAM_AFTER, TEAM_BEFORE,
    entity_key, frequent_surface, is_russian_surname, plain_sentences, plain_text,
)

MAX_NAME_WORDS = 6  # longer capitalised runs are title-case headings, not names
CUE_WINDOW = 2  # tokens on each side of a name searched for type cues

_CYRILLIC = re.compile(r"[а-яё]")
_TRUSTED_SHAPE = re.compile(r"[A-Z]?[a-z0-9]+(?:[A-Z][a-z0-9]+)+|[A-ZА-ЯЁ][A-ZА-ЯЁ0-9]+")  # CamelCase, acronym
_GENERIC_SHAPE = re.compile(r".|[IVXLC]+")  # one letter, a Roman numeral
_IDENTIFIER = re.compile(r"[#@$]?[A-Za-z_][\w.\-/:{}]*(?:\(\))?")
_ROUTE = r"\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+/[\w{}./:-]*"
_CODE = (  # snake_case, UPPER_SNAKE, INC-2024-117, SEV1, /v2/shipments
    r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{2,}[0-9]*(?:-[A-Z0-9]+)*-[0-9]"
    r"[A-Z0-9-]*\b|\b[A-Z]{2,}[0-9]+\b|(?<![\w/])/[\w{}.-]+(?:/[\w{}.-]+)+"
)
_TOKEN = re.compile(rf"(?P<tick>`[^`\n]+`)|(?P<route>{_ROUTE})|(?P<code>{_CODE})"
                    r"|(?P<word>[^\W\d_][^\W_]*(?:['’\-][^\W_]+)*)|(?P<sep>[^\s\w]|_)")
_BLOCK_CODE = re.compile(r"\b[A-Z]{2,}[0-9]*(?:[_-][A-Z0-9]+)+\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b")
_QUOTED = re.compile(r"«([^«»\n]{1,60})»|„([^„“\n]{1,60})“|“([^“”\n]{1,60})”|\"([^\"\n]{1,60})\"")
_BOLD = re.compile(r"\*\*([^*\n]{1,80})\*\*|__([^_\n]{1,80})__")
_SPEAKER = re.compile(r"([A-ZÀ-ÞА-ЯЁ][A-ZÀ-ÞА-ЯЁ'’.-]+(?: [A-ZÀ-ÞА-ЯЁ][A-ZÀ-ÞА-ЯЁ'’.-]+){1,3}):\s")  # "KEVIN SCOTT: Hi"
_CLAUSE_BREAKS = frozenset(":|•;")
Mention = tuple[str, str, Counter]  # (merge key, surface form, type votes)
_Token = tuple[str, str, bool]  # (kind, text, starts a clause)


class _Context(NamedTuple):
    mid_caps: set[str]  # words the chunk capitalises inside a clause: names, not sentence starts
    lower: set[str]  # keys of the words the chunk writes in lowercase: common words
    known: set[str]  # multi-word names from the heading, title and bold text
    hint: bool = False  # reading a heading or bold text: a capitalised first word is trusted

class Mentions(NamedTuple):
    """A text's plain sentences (code lines appended) and, per sentence, the mentions found in it."""
    sentences: list[str]
    found: list[list[Mention]]


def find_mentions(text: str, title: str = "", heading: str = "") -> Mentions:
    """Named-entity candidates of a Markdown text, sentence by sentence (see the module docstring).

    `title` and `heading` (its " > "-joined path) are hints: a phrase they capitalise is trusted as a
    name where the text starts a sentence with it."""
    sentences, code_lines = plain_sentences(text)
    speakers = [_SPEAKER.match(s) for s in sentences]
    tokenised = [_tokens(s[m.end() :] if m else s) for s, m in zip(sentences, speakers)]
    words = [t for ts in tokenised for t in ts if t[0] == "word"]
    mid_caps = {_word(t[1])[0].casefold() for t in words if not t[2] and _word(t[1])[1]}
    context = _Context(mid_caps, {entity_key(t[1]) for t in words if t[1].islower()}, set())
    hints = [title, *heading.split(">"), *(a or b for a, b in _BOLD.findall(text))]
    for hint in hints:
        if not hint.strip().endswith(":"):  # "**Owner:**" is a label, not a name
            hinted = _candidates(_tokens(plain_text(hint)), context._replace(hint=True))
            context.known.update(key for key, _, _ in hinted if " " in key)
    found = [_candidates(ts, context) + _quoted(s) for s, ts in zip(sentences, tokenised)]
    for mentions, speaker in zip(found, speakers):
        if speaker:  # "KEVIN SCOTT: Hi" in a transcript: the speaker is a person
            surface = speaker.group(1).title()
            mentions.append((entity_key(surface), surface, Counter(person=3)))
    for line in code_lines:
        sentences.append(line)
        found.append([(entity_key(c), c, Counter(code=10)) for c in _BLOCK_CODE.findall(line)])
    return Mentions(sentences, found)


def mentioned_names(text: str, title: str = "", heading: str = "") -> list[str]:
    """The distinct names a text mentions, each in its display form, ordered by merge key."""
    surfaces: dict[str, list[str]] = defaultdict(list)
    for mentions in find_mentions(text, title, heading).found:
        for key, surface, _ in mentions:
            surfaces[key].append(surface)
    return [frequent_surface(surfaces[key]) for key in sorted(surfaces)]


def _tokens(sentence: str) -> list[_Token]:
    tokens, initial = [], True  # a clause starts the sentence, or follows ":", "|", ";" (after brackets)
    for match in _TOKEN.finditer(sentence):
        kind, text = match.lastgroup, match.group()
        tokens.append((kind, text, initial))
        initial = kind == "sep" and (text in _CLAUSE_BREAKS or (initial and text in "([«\"“"))
    return tokens


def _word(text: str) -> tuple[str, bool, bool]:
    """(surface, name-like, ends a run): a possessive ends a name, a contraction is a function word."""
    for apostrophe in "'’":
        base, _, suffix = text.rpartition(apostrophe)
        if base and suffix.casefold() == "s":
            return base, _name_like(base), True
        if base and suffix.casefold() in CONTRACTIONS:
            return text, False, True
    return text, _name_like(text), False


def _name_like(word: str) -> bool:
    parts_ok = all(part[:1].isupper() or part[:1].isdigit() for part in word.split("-"))  # Jean-Luc, COVID-19
    return parts_ok and word.casefold() not in STOP_WORDS


def _candidates(tokens: list[_Token], context: _Context) -> list[Mention]:
    """The mentions in one tokenised sentence."""
    mentions: list[Mention] = []
    i = 0  # tokens[i] starts the next candidate
    while i < len(tokens):
        kind, text, initial = tokens[i]
        if kind in ("tick", "route", "code"):
            mentions.extend(_code_mentions(kind, text))
        if kind != "word" or not _word(text)[1]:
            i += 1
            continue
        run, j = [], i
        while j < len(tokens) and tokens[j][0] == "word":
            surface, name_like, ends = _word(tokens[j][1])
            following = tokens[j + 1] if j + 1 < len(tokens) else ("", "", False)
            if not (name_like or (surface in NAME_CONNECTORS and following[0] == "word" and _name_like(following[1]))):
                break
            run.append(surface)
            j += 1
            if ends:
                break
        for offset, size in _split_persons(run):
            part = run[offset : offset + size]
            mentions.extend(_run_mention(part, tokens, i + offset, initial and offset == 0, context))
        i = j
    return mentions


def _split_persons(run: list[str]) -> list[tuple[int, int]]:
    """(offset, size) of the names in a run: "Имя [Отчество] Фамилия" after other capitalised words
    ("в Москве Дмитрий Соколов") is a name of its own."""
    size = 3 if len(run) > 3 and RU_PATRONYMIC.fullmatch(run[-2]) else 2
    if len(run) > size and is_russian_surname(run[-1]):
        return [(0, len(run) - size), (len(run) - size, size)]
    return [(0, len(run))]


def _run_mention(run: list[str], tokens: list[_Token], start: int, initial: bool, context: _Context) -> list[Mention]:
    if initial and len(run) > 1 and not context.hint and run[0].casefold() not in context.mid_caps:
        # "Put Carrier Connector under ...", "Подключить Сервис уведомлений": a common word or a Russian
        # infinitive starts the clause; "Carrier Connector" alone keeps its first word.
        if (len(run) > 2 and entity_key(run[0]) in context.lower) or RU_INFINITIVE.fullmatch(run[0]):
            run, start, initial = run[1:], start + 1, False
    end = start + len(run)
    trusted = not initial or context.hint or len(run) > 1 or run[0].casefold() in context.mid_caps
    trusted = trusted or bool(_TRUSTED_SHAPE.fullmatch(run[0]))
    before = tokens[start - 1][1] if start > 0 and tokens[start - 1][0] == "word" else ""
    possessive = _word(tokens[end - 1][1])[2]
    after = tokens[end][1] if end < len(tokens) and tokens[end][0] == "word" and not possessive else ""
    words = list(run)
    if TEAM_AFTER.fullmatch(after):  # "Owner: Billing team", even at a clause start
        words.append(after)
        trusted = True
    elif TEAM_BEFORE.fullmatch(before) and len(run) <= 2:
        words.insert(0, before)
    elif len(run) == 1 and _CYRILLIC.search(run[0]) and after.islower() and after not in STOP_WORDS and (
        (RU_ADJECTIVE.fullmatch(run[0]) and len(after) > 2) or RU_GENITIVE_PLURAL.fullmatch(after)
    ):
        if trusted or entity_key(f"{run[0]} {after}") in context.known:
            words.append(after)  # "Сервис уведомлений", "Платёжный шлюз"
            trusted = True
    if not trusted or len(run) > MAX_NAME_WORDS:
        return []
    alone = run[0].casefold()
    if len(words) == 1 and (_GENERIC_SHAPE.fullmatch(run[0]) or alone in GENERIC_ACRONYMS or alone in NAME_OPENERS):
        return []
    surface = " ".join(words)
    return [(entity_key(surface), surface, _votes(words, run, tokens, start, end, before, context.lower))]


def _votes(words, run, tokens, start, end, before, lower) -> Counter:
    """Type votes of one mention: head word 3, surname or country 3, cue next to it 2, weak hints 1."""
    votes = Counter(concept=0.5)
    key, folded = entity_key(" ".join(words)), [w.casefold() for w in words]
    heads = folded if _CYRILLIC.search(key) else [folded[-1], folded[0]]
    for kind, pattern in HEAD_WORDS.items():
        votes[kind] += 3 if any(pattern.fullmatch(w) for w in heads) else 0
    votes["location"] += 3 if key in GEOGRAPHY_KEYS else 0
    full_name = 2 <= len(run) <= 3 and all(w.isalpha() for w in run)
    if full_name and (is_russian_surname(run[-1]) or RU_PATRONYMIC.fullmatch(run[-2])):
        votes["person"] += 3
    elif full_name and sum(votes.values()) == 0.5 and all(w.istitle() for w in run):  # nothing else voted
        if not any(entity_key(w) in lower or CUE_WORDS["person"].fullmatch(w.casefold()) for w in run):
            votes["person"] += 1  # "Hannah Vogt"; not "Junior Engineer", nor "Customer Support"
    if len(run) == 1 and before in ("в", "во", "из") and RU_LOCATIVE.fullmatch(run[0]):
        votes["location"] += 1
    near = tokens[max(0, start - CUE_WINDOW) : start] + tokens[end : end + CUE_WINDOW]
    window = [t[1].casefold() for t in near if t[0] == "word"]
    for kind, pattern in CUE_WORDS.items():
        if (kind != "person" or full_name) and any(pattern.fullmatch(w) for w in window):
            votes[kind] += 2
    return votes


def _code_mentions(kind: str, text: str) -> list[Mention]:
    """A route, code or backticked identifier is a code entity as written; other backticked text
    (a config line such as `dedup_window_sec: 0`) is searched for codes inside it."""
    inner = text.strip("`").strip().rstrip(".:,;")  # `incident:` names the prefix "incident"
    if kind != "tick" or re.fullmatch(_ROUTE, inner) or (_IDENTIFIER.fullmatch(inner) and len(inner) > 2):
        return [(entity_key(inner), inner, Counter(code=10))]
    inside = [m.group() for m in _TOKEN.finditer(inner) if m.lastgroup in ("route", "code")]
    return [(entity_key(code), code, Counter(code=10)) for code in inside]


def _quoted(sentence: str) -> list[Mention]:
    """«Волга», "Dark Mode": a short capitalised quote is a name (a quoted sentence is not);
    ООО «...», vendor "..." make it an organization."""
    mentions = []
    for match in _QUOTED.finditer(sentence):
        inner = next(g for g in match.groups() if g is not None).strip()
        words = inner.split()
        if 0 < len(words) <= 5 and inner[0].isupper() and inner[-1] not in ".!?,:;" and any(
                w.casefold() not in STOP_WORDS for w in words):
            before = sentence[: match.start()].split()[-1:] or [""]
            organization = CUE_WORDS["organization"].fullmatch(before[0].casefold()) is not None
            mentions.append((entity_key(inner), inner, Counter(concept=0.5, organization=2 * organization)))
    return mentions
