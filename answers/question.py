"""One parse of a question (`Question`): made once where the question enters (router/service.py) and
passed down to the route's search loop and the answer writers, which read its parts instead of the raw
string. Each part is read on first use and kept: a local question never pays for a chain's clauses.

The parts, and where the reading is written down:
- `language`: the text-search configuration name, "russian" or "english" (core/text/language.py);
- `expected_type`: the answer type asked ("date", "number", "money", "person", "place" or None) and
  `asked_kind_words`, the noun a "what X" question asks for (answers/expected_type.py);
- `names`: the entities the question spells (answers/question_text.py); `codes`: the codes and
  identifiers among them (ERR_2043, INC-2023-005; core/text/terms.py); `words`: its content words;
- `comparison`: the two compared entities and the attribute (answers/comparison_form.py);
- `parts`, `nested`, `least_hops`: a chain's two questions, its relative clause, the fewest hops its form
  allows (answers/chain/question.py).
A question made inside the answer (a chain's step, a comparison's side, the loop's follow-up query) is
a `Question` of its own: `Question(text)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from core.text.language import detect_language
from core.text.terms import QueryTerms, codes, content_words
from answers.chain.question import Nested, least_hops, nested_question, question_parts
from answers.comparison_form import Comparison, is_yes_no, parse_comparison, same_what
from answers.expected_type import asked_kind_words, counted, question_kind
from answers.question_text import Mention, question_mentions


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
    def least_hops(self) -> int:
        return least_hops(self.text)