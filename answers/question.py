"""One parse of a question (`Question`): made once where the question enters (router/service.py) and
passed down to the route's search loop and the answer writers, which read its parts instead of the raw
string. Each part is read on first use and kept: a local question never pays for a chain's clauses.

The parts, and where the reading is written down:
- `language`: the text-search configuration name, "russian" or "english" (core/text/language.py);
- `expected_type`: the answer type asked ("date", "number", "money", "person", "place" or None) and
  `asked_kind_words`, the noun a "what X" question asks for (answers/expected_type.py);
- `names`: the entities the question spells (answers/question_text.py), `name_words`: the words that make
  each one thing, which a readable document must spell (vector/search/unmentioned.py); `codes`: the codes
  and identifiers among them (ERR_2043, INC-2023-005; core/text/terms.py); `words`: its content words;
- `comparison`: the two compared entities and the attribute (answers/comparison_form.py), and `order`, whether
  it asks which comes first or later (answers/comparison_verdict.py);
- `parts`, `nested`, `described`, `least_hops`: a chain's two questions, its relative clause, the statements
  before its last sentence, the fewest hops its form allows, and `start_clause`, `extended_names`, which read
  it against a chain's start and the passages (answers/chain/question.py);
- `asks_meaning`, `terms_without_meaning`: the "what does X mean" form, and `asks_price`, the "how much does X
  cost" form (answers/expected_type.py); `tokens`, `script`: its words as written, in order, and its script,
  for the unit scorer.
A question made inside the answer (a chain's step, a comparison's side, the loop's follow-up query) is
a `Question` of its own: `Question(text)`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from core.text.language import detect_language
from core.text.script import script_name
from core.text.terms import QueryTerms, codes, content_words
from core.text.tokens import LETTERS, WORD
from answers.chain.question import (Nested, described_ask, extended_names, least_hops, nested_question,
                                    question_parts, start_clause)
from answers.comparison_form import Comparison, is_yes_no, parse_comparison, same_what
from answers.comparison_verdict import asked_order
from answers.expected_type import ASKS_PRICE, MEANING, asked_kind_words, counted, question_kind
from answers.question_text import Mention, clause_words, is_function_word, question_mentions, stem_of
from answers.question_text import content_words as query_words
from answers.types import Passage

_SENTENCE_OPENER = re.compile(r"(?:^|[.!?]\s)[\W\d_]*(?=[^\W\d_])")  # ends where a sentence's first word starts


@dataclass(frozen=True, eq=False)
class Question:
    text: str  # as asked

    def __str__(self) -> str:
        return self.text

    @cached_property
    def language(self) -> str:
        return detect_language(self.text)

    @cached_property
    def expected_type(self) -> str | None:
        return question_kind(self.text)

    @cached_property
    def asked_kind_words(self) -> frozenset[str]:
        return asked_kind_words(self.text)

    @cached_property
    def counted(self) -> frozenset[str]:
        """What a "how many" question counts (its stems); empty where no counting cue stands."""
        return counted(self.text)

    @cached_property
    def terms(self) -> QueryTerms:
        return QueryTerms.of(self.text)

    @cached_property
    def names(self) -> list[Mention]:
        return question_mentions(self.text)

    @cached_property
    def _sentence_starts(self) -> frozenset[int]:
        """Where each sentence of the question has its first word."""
        return frozenset(m.end() for m in _SENTENCE_OPENER.finditer(self.text))

    @cached_property
    def openers(self) -> frozenset[str]:
        """The one-word names that open a sentence of the question: capitalised whatever they are
        ("Roughly", "Вагоны какой модели ..."), so not a name where the documents write it as a common word
        (answers/unit_scoring.py `common_word`)."""
        return frozenset(m.text for m in self.names
                         if m.start in self._sentence_starts and len(WORD.findall(m.text)) == 1)

    @cached_property
    def name_words(self) -> dict[str, tuple[str, ...]]:
        """Each name it spells, with the words that make it one thing: its capitalised words of three letters
        or more (a hyphen parts words: "Марлоу-Хаус"), not an abbreviation ("ИБП", "IT": those are
        translated, not spelt), a Roman numeral or a function word, never the question's first word
        nor a word that opens a sentence (capitalised whatever it is: "Сколько", "Roughly")."""
        found: dict[str, tuple[str, ...]] = {}
        starts = self._sentence_starts
        for mention in self.names:
            words = tuple(w.group() for w in LETTERS.finditer(mention.text)
                          if len(w.group()) >= 3 and w.group()[0].isupper() and not w.group().isupper()
                          and not is_function_word(w.group()) and mention.start + w.start() not in starts)
            if words:
                found.setdefault(mention.text, words)
        return found

    @cached_property
    def asks_meaning(self) -> bool:
        """"What does X mean": the form asks for what defines X (answers/expected_type.py MEANING)."""
        return bool(MEANING.search(self.text))

    @cached_property
    def terms_without_meaning(self) -> QueryTerms:
        """Its terms without the words that ask for a meaning ("mean", "означает"): what is defined."""
        return QueryTerms.of(MEANING.sub(" ", self.text))

    @cached_property
    def asks_price(self) -> bool:
        """"How much does X cost", "сколько стоит X": an amount of money is asked, written with its currency
        (answers/expected_type.py ASKS_PRICE)."""
        return bool(ASKS_PRICE.search(self.text))

    @cached_property
    def tokens(self) -> tuple[str, ...]:
        """Its words as written, in order (core/text/tokens.py WORD)."""
        return tuple(WORD.findall(self.text))

    @cached_property
    def script(self) -> str:
        """"cyrillic" or "latin" (core/text/script.py): which units its words can match."""
        return script_name(self.text)

    def start_clause(self, start: str, relation: list[str]) -> set[str]:
        """The relation words only the clause holding the chain's `start` states (answers/chain/question.py)."""
        return start_clause(self.text, start, relation)

    def extended_names(self, names: list[str], passages: list[Passage]) -> list[str]:
        """Its `names`, each extended by the words after it while a passage title names the longer phrase
        (answers/chain/question.py)."""
        return extended_names(self.text, names, passages)

    @cached_property
    def query_words(self) -> tuple[str, ...]:
        """Its words for a search query (answers/question_text.py content_words): no function word, one
        word per stem, numbers kept; what a follow-up search adds to the entity it follows."""
        return tuple(query_words(self.text))

    @cached_property
    def stems(self) -> frozenset[str]:
        """The stems of its `query_words`: what a passage or a name shares with it."""
        return frozenset(stem_of(w) for w in self.query_words)

    def clause_words(self, name: str) -> list[str]:
        """The query words of the clause that spells `name`, the name's own left out."""
        return clause_words(self.text, name)

    @cached_property
    def codes(self) -> tuple[str, ...]:
        return codes(self.text)

    @cached_property
    def words(self) -> tuple[str, ...]:
        """Its content words as written (core.text.terms.content_words): what the corpus must mention
        for a passage to be about what it asks."""
        return content_words(self.text)

    @cached_property
    def comparison(self) -> Comparison | None:
        return parse_comparison(self.text)

    @cached_property
    def order(self) -> int | None:
        """-1 when it asks which comes first in time ("older", "раньше"), 1 which comes later, None neither."""
        return asked_order(self.text)

    @cached_property
    def yes_no(self) -> bool:
        """Answered yes or no ("Are A and B both ...?", "Является ли ...")."""
        return is_yes_no(self.text)

    @cached_property
    def shared(self) -> str | None:
        """What a yes/no question asks both sides to share: "province" of "in the same province"."""
        return same_what(self.text)

    @cached_property
    def parts(self) -> tuple[str, str] | None:
        return question_parts(self.text)

    @cached_property
    def nested(self) -> Nested | None:
        return nested_question(self.text)

    @cached_property
    def described(self) -> tuple[str, str] | None:
        """Its statements and its last sentence, when the statements describe what that sentence asks
        about (answers/chain/question.py `described_ask`; answered by answers/chain/described.py)."""
        return described_ask(self.text)

    @cached_property
    def least_hops(self) -> int:
        return least_hops(self.text)