"""Offline entity extraction for Russian and English: named-entity candidates plus co-occurrence.

GraphRAG's "fast" method in spirit: surface patterns, no model; quick and deterministic. No word list
(graph/normalize.py) names anything of a particular corpus.

- Candidates: runs of capitalised words (with "of"/"de"/hyphens inside), short quoted names («Волга»),
  codes (ERR_2043, INC-2024-117, SEV1), snake_case, backticked identifiers, HTTP routes and paths,
  CamelCase, acronyms. Russian capitalises only a name's first word ("Сервис уведомлений"): a capitalised
  word plus a genitive plural, or a capitalised adjective plus a noun, is one name inside a sentence, or
  at its start when the chunk's heading, title or bold text has the phrase.
- A capitalised word alone at a sentence, list item or table cell start is usually a common word: it
  counts only if the chunk capitalises it elsewhere. Function words and dates never start or join a name.
- Types are votes: shape (codes), a head word in the name ("team", "команда", "Gateway", "Inc"), cue
  words next to it ("lead", "руководитель", "vendor"), surname endings, country names; two plain
  capitalised words the chunk never writes in lowercase lean to person.
- Descriptions are the sentences mentioning the entity; relationships join the entities of one
  sentence (strong) and the most mentioned entities of one chunk (weak).
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Iterable, NamedTuple

from graph.normalize import (
    CONTRACTIONS, CUE_WORDS, GENERIC_ACRONYMS, GEOGRAPHY_KEYS, HEAD_WORDS, NAME_CONNECTORS, RU_ADJECTIVE,
    RU_GENITIVE_PLURAL, RU_INFINITIVE, RU_LOCATIVE, RU_PATRONYMIC, STOP_WORDS, TEAM_AFTER, TEAM_BEFORE,
    display_name, entity_key, is_russian_surname, plain_sentences, plain_text,
)
from graph.types import ChunkInput, ExtractedEntity, ExtractedRelationship, Extraction, GraphEntity

MAX_DESCRIPTION_SENTENCES = 3
MAX_SENTENCE_CHARS = 240
MAX_NAME_WORDS = 6  # longer capitalised runs are title-case headings, not names
MAX_PAIRED = 8  # pairs only among a sentence's first / a chunk's most mentioned entities, not all n^2
SENTENCE_WEIGHT = 3  # strength = 1 (same chunk) + 3 per shared sentence, capped at 10
CUE_WINDOW = 2  # tokens on each side of a name searched for type cues

_PRECEDENCE = ("code", "person", "team", "service", "organization", "location", "concept")  # breaks vote ties
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
_Mention = tuple[str, str, Counter]  # (merge key, surface form, type votes)
_Token = tuple[str, str, bool]  # (kind, text, starts a clause)


class _Context(NamedTuple):
    mid_caps: set[str]  # words the chunk capitalises inside a clause: names, not sentence starts
    lower: set[str]  # keys of the words the chunk writes in lowercase: common words
    known: set[str]  # multi-word names from the heading, title and bold text
    hint: bool = False  # reading a heading or bold text: a capitalised first word is trusted


class OfflineExtractor:
    """Named-entity candidates and co-occurrence edges, no model (see the module docstring)."""

    name = "offline-ner"
    version = "1"
    model = ""

    def extract(self, chunk: ChunkInput) -> Extraction:
        sentences, code_lines = plain_sentences(chunk.text)
        speakers = [_SPEAKER.match(s) for s in sentences]
        tokenised = [_tokens(s[m.end() :] if m else s) for s, m in zip(sentences, speakers)]
        words = [t for ts in tokenised for t in ts if t[0] == "word"]
        mid_caps = {_word(t[1])[0].casefold() for t in words if not t[2] and _word(t[1])[1]}
        context = _Context(mid_caps, {entity_key(t[1]) for t in words if t[1].islower()}, set())
        hints = [chunk.title, *chunk.heading.split(">"), *(a or b for a, b in _BOLD.findall(chunk.text))]
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
        return _assemble(chunk, sentences, found)


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


def _candidates(tokens: list[_Token], context: _Context) -> list[_Mention]:
    """The mentions in one tokenised sentence."""
    mentions: list[_Mention] = []
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


def _run_mention(run: list[str], tokens: list[_Token], start: int, initial: bool, context: _Context) -> list[_Mention]:
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
    if len(words) == 1 and (_GENERIC_SHAPE.fullmatch(run[0]) or run[0].casefold() in GENERIC_ACRONYMS):
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


def _code_mentions(kind: str, text: str) -> list[_Mention]:
    """A route, code or backticked identifier is a code entity as written; other backticked text
    (a config line such as `dedup_window_sec: 0`) is searched for codes inside it."""
    inner = text.strip("`").strip().rstrip(".:,;")  # `incident:` names the prefix "incident"
    if kind != "tick" or re.fullmatch(_ROUTE, inner) or (_IDENTIFIER.fullmatch(inner) and len(inner) > 2):
        return [(entity_key(inner), inner, Counter(code=10))]
    inside = [m.group() for m in _TOKEN.finditer(inner) if m.lastgroup in ("route", "code")]
    return [(entity_key(code), code, Counter(code=10)) for code in inside]


def _quoted(sentence: str) -> list[_Mention]:
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


def _assemble(chunk: ChunkInput, sentences: list[str], found: list[list[_Mention]]) -> Extraction:
    surfaces, votes, where = defaultdict(list), defaultdict(Counter), defaultdict(dict)
    for index, mentions in enumerate(found):
        for key, surface, mention_votes in mentions:
            surfaces[key].append(surface)
            votes[key].update(mention_votes)
            where[key][index] = None  # the sentences mentioning it, in order
    names = {key: display_name(variants) for key, variants in surfaces.items()}
    entities = []
    for key in sorted(names):
        kind = max(_PRECEDENCE, key=lambda k: (votes[key][k], -_PRECEDENCE.index(k)))
        description = " ".join(_trim(sentences[i]) for i in list(where[key])[:MAX_DESCRIPTION_SENTENCES])
        entities.append(ExtractedEntity(names[key], kind, description))
    return Extraction(tuple(entities), _relationships(chunk, sentences, found, names, surfaces))


def _relationships(chunk, sentences, found, names, surfaces) -> tuple[ExtractedRelationship, ...]:
    """Pairs sharing a sentence (described by the shortest such sentence) or, among the chunk's most
    mentioned entities, sharing the chunk; strength 1 + 3 per shared sentence, at most 10."""
    shared, evidence = Counter(), {}
    for index, mentions in enumerate(found):
        keys = list(dict.fromkeys(key for key, _, _ in mentions))[:MAX_PAIRED]
        for position, a in enumerate(keys):
            for b in keys[position + 1 :]:
                pair = (a, b) if a < b else (b, a)
                shared[pair] += 1
                if pair not in evidence or len(sentences[index]) < len(evidence[pair]):
                    evidence[pair] = sentences[index]
    top = sorted(surfaces, key=lambda k: (-len(surfaces[k]), k))[:MAX_PAIRED]
    place = chunk.heading or chunk.title or chunk.doc_id
    relationships = []
    for a, b in sorted(set(shared) | {(a, b) for a in top for b in top if a < b}):
        strength = min(10.0, 1.0 + SENTENCE_WEIGHT * shared[(a, b)])
        description = _trim(evidence[(a, b)]) if (a, b) in evidence else (
            f"{names[a]} and {names[b]} co-occur in {place}")
        relationships.append(ExtractedRelationship(names[a], names[b], description, strength))
    return tuple(relationships)


def _trim(sentence: str) -> str:
    text = " ".join(sentence.split())
    return text if len(text) <= MAX_SENTENCE_CHARS else text[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"


def prune_entities(entities: Iterable[GraphEntity], total_chunks: int, *, min_chunks: int = 1,
                   max_share: float = 0.5, min_corpus_chunks: int = 20) -> set[str]:
    """The keys of corpus-level noise, to drop from a level's graph (pure; the graph build calls it).

    An entity's chunk count is `len(entity.chunk_ids)`. Noise: entities in fewer than `min_chunks` chunks;
    "concept" entities in a single chunk (the bulk of capitalised-word noise); and, once the corpus has at
    least `min_corpus_chunks` chunks, entities in more than `max_share` of them, too common to tell
    communities apart (a podcast host named in most chunks is one).
    """
    noise = set()
    for entity in entities:
        count = len(entity.chunk_ids)
        rare = count < min_chunks or (entity.type == "concept" and count < 2)
        if rare or (total_chunks >= min_corpus_chunks and count > max_share * total_chunks):
            noise.add(entity.key)
    return noise
