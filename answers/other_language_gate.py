"""Whether an answer read in the other language's pages is sure enough to be shown.

When the search ranks passages of the other language first, the local answer chooses among their
units by meaning (answers/local.py `_across_languages`). Its words can be checked against the question's
only through a dictionary of one sense per word (core/text/lexicon), so whether it answers is judged from
two pieces of evidence: how close in meaning the chosen unit, read in its page, is to the question (the
embedding model's cosine) and the share of the question's words its units hold in translation, in one
logistic regression (Platt scaling) to P(the answer is right). The
gate decides only where names do not: an answer whose units hold the question's names (the words that
cross scripts, by their consonants) is shown on that evidence, as before it.

The gate was fitted by `python -m bench.train_other_language_gate` on the answers without that names'
evidence to questions written for the project (bench/answer_xl_written: 384 asked in the other language
than their one answering document) and to the same questions asked of tenants that hold nothing about
them. Its threshold is where a right answer shown, a wrong one shown and an off-topic question answered
weigh the same, checked with each corpus held out in turn (docs/reader.md, eighth session).

With the gate, the local route's offline search no longer holds a page in the other script to the
reranker's calibrated cut (vector/search/hybrid.py `hold_other_script`): that cut reads such a page's
words through a dictionary of one sense per word, with a model fitted on one-language lists, and it
leaves out 30% of the pages that answer xl_written's questions (half before the dictionary reached the
search; docs/reader.md, eleventh session). The gate judges them instead.

A cosine is on its model's own scale, so the gate holds only for the model it was fitted with
(`embedder`); for any other, an answer from the other language is as sure as the search is of its
passage, and the search's cut applies, as before the gate.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

GATE_PATH = Path(__file__).with_name("other_language_gate.json")


@dataclass(frozen=True)
class OtherLanguageGate:
    embedder: str  # the embedding model whose cosines it was fitted on
    slope: float  # of the cosine
    word_slope: float  # of the share of the question's words held in translation
    intercept: float
    threshold: float  # the least P(right) shown

    def confidence(self, closeness: float, worded: float) -> float:
        """P(the answer is right) for its chosen unit's cosine to the question and the share of the
        question's words its units hold in translation."""
        z = self.slope * closeness + self.word_slope * worded + self.intercept
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    @classmethod
    def open(cls, embedder: str) -> "OtherLanguageGate":
        """A gate that shows every such answer (for fitting one: each answer's evidence is wanted)."""
        return cls(embedder, 0.0, 0.0, 0.0, 0.0)


def load_gate(embedder: str, path: Path = GATE_PATH) -> OtherLanguageGate | None:
    """The fitted gate when it was fitted on `embedder`'s vectors; None otherwise or when absent."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        gate = OtherLanguageGate(str(data["embedder"]), float(data["slope"]), float(data["word_slope"]),
                                 float(data["intercept"]), float(data["threshold"]))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is malformed ({exc}): refit it with `python -m bench.train_other_language_gate`") from exc
    return gate if gate.embedder == embedder else None
