"""Citation markers in generated text: [3], [3, 5], [3-5] (or an en dash) all cite passages by number."""
from __future__ import annotations

import re

# anything else in brackets ([x], [1a], [2024 report]) is not a citation
_CITE = re.compile(r"\[(\d+(?:\s*[,\-–]\s*\d+)*)\]")


def cited_numbers(text: str) -> list[int]:
    """Every number the text cites, ranges expanded, in order of first appearance. A range written
    backwards ([5-3]) cites its two ends only: it names no span the writer can have meant."""
    numbers: list[int] = []
    for group in _CITE.findall(text):
        for piece in re.split(r"\s*,\s*", group):
            bounds = [int(x) for x in re.split(r"\s*[\-–]\s*", piece)]
            span = range(bounds[0], bounds[-1] + 1) if len(bounds) == 2 and bounds[1] >= bounds[0] else bounds
            numbers.extend(n for n in span if n not in numbers)
    return numbers
