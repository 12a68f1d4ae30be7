"""Paired comparison of two systems on the same questions: how many questions moved each way and a
bootstrap interval of the mean difference. A metric on 19-50 questions moves by 1/n when one question
changes rank, so "within 0.005" can only be read next to how many questions moved and whether the
difference stands out from resampling the questions (`bench.embed_eval`)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping

RESAMPLES = 10_000
SEED = 20261205


@dataclass(frozen=True)
class PairedDifference:
    n: int  # questions both systems were scored on
    mean_difference: float  # other - baseline
    better: int  # questions the other system scored higher
    worse: int
    low: float  # 95% bootstrap interval of the mean difference
    high: float

    @property
    def significant(self) -> bool:
        """The interval excludes zero: resampling the questions would rarely erase the difference."""
        return self.low > 0 or self.high < 0


def paired_difference(baseline: Mapping[str, float], other: Mapping[str, float], *, resamples: int = RESAMPLES,
                      seed: int = SEED) -> PairedDifference:
    """`baseline` and `other`: question id -> score; only questions in both count, in id order so that
    the fixed seed gives the same interval on every run."""
    qids = sorted(baseline.keys() & other.keys())
    diffs = [float(other[q]) - float(baseline[q]) for q in qids]
    n = len(diffs)
    if n == 0:
        return PairedDifference(0, 0.0, 0, 0, 0.0, 0.0)
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return PairedDifference(n, sum(diffs) / n, sum(d > 0 for d in diffs), sum(d < 0 for d in diffs),
                            means[int(0.025 * (resamples - 1))], means[int(0.975 * (resamples - 1))])
