"""Several annotators per item: aggregation, per-item spread, and agreement (the human ceiling).

Agreement uses maintained implementations: Krippendorff's alpha from the
``krippendorff`` package (interval and ordinal), Spearman from SciPy.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from judge.core.schema import AnnotationRecord

Aggregation = Literal["mean", "median", "majority"]


def round_half_up(values: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """Round to the nearest integer, halves up (2.5 -> 3, -0.5 -> 0), unlike Python's and numpy's
    half-to-even: an aggregated score becomes a training target, and a judge's score is compared on the
    scale, the way people round. A number gives a 0-d array (``int()`` of it is the integer)."""
    return np.floor(np.asarray(values, dtype=float) + 0.5).astype(int)


def aggregate_values(values: Sequence[int], method: Aggregation = "mean") -> float:
    """One number from several annotators' scores.

    ``majority`` takes the most frequent value; a tie goes to the tied value
    closest to the mean, then to the lower one (deterministic, documented).
    """
    if not values:
        raise ValueError("no scores to aggregate")
    if method == "mean":
        return float(statistics.fmean(values))
    if method == "median":
        return float(statistics.median(values))
    if method == "majority":
        counts = Counter(values)
        top = max(counts.values())
        tied = sorted(v for v, c in counts.items() if c == top)
        mean = statistics.fmean(values)
        return float(min(tied, key=lambda v: (abs(v - mean), v)))
    raise ValueError(f"unknown aggregation {method!r}; choose mean, median or majority")


@dataclass(frozen=True)
class AggregatedScore:
    value: float  #: the aggregate
    spread: float  #: population standard deviation across annotators (0 for one annotator)
    n: int  #: annotators who scored this criterion
    values: tuple[int, ...]


def aggregate_record(rec: AnnotationRecord, method: Aggregation = "mean") -> dict[str, AggregatedScore]:
    """Per criterion (and 'overall'): the aggregate over the annotators who scored it."""
    by_crit: dict[str, list[int]] = {}
    for crit_scores in rec.scores.values():
        for crit, v in crit_scores.items():
            by_crit.setdefault(crit, []).append(v)
    return {
        crit: AggregatedScore(aggregate_values(vals, method), float(np.std(vals)), len(vals), tuple(vals))
        for crit, vals in by_crit.items()
    }


def reliability_matrix(records: Sequence[AnnotationRecord], criterion: str) -> tuple[list[str], np.ndarray]:
    """Annotators x items matrix of one criterion's scores, NaN where an annotator did not score."""
    annotators = sorted({a for r in records for a, s in r.scores.items() if criterion in s})
    mat = np.full((len(annotators), len(records)), np.nan)
    index = {a: i for i, a in enumerate(annotators)}
    for j, r in enumerate(records):
        for a, s in r.scores.items():
            if criterion in s:
                mat[index[a], j] = s[criterion]
    return annotators, mat


def krippendorff_alpha(
    matrix: np.ndarray,
    level: Literal["interval", "ordinal"] = "interval",
    values: Sequence[int] | None = None,
) -> float:
    """Krippendorff's alpha of an annotators x items matrix (NaN = missing), from the ``krippendorff`` package.

    NaN when fewer than two items carry two or more scores, or when every score is the same.
    """
    import krippendorff

    pairable = np.sum(~np.isnan(matrix), axis=0) >= 2
    if pairable.sum() < 2:
        return float("nan")
    m = matrix[:, pairable]
    observed = np.unique(m[~np.isnan(m)])
    if len(observed) < 2:
        return float("nan")
    domain = np.asarray(values if values is not None else observed, dtype=float)
    return float(krippendorff.alpha(reliability_data=m, level_of_measurement=level, value_domain=domain))


def mean_pairwise_spearman(matrix: np.ndarray, min_items: int = 3) -> float:
    """Mean over annotator pairs of Spearman's rho on the items both scored (NaN if no pair qualifies)."""
    from scipy.stats import spearmanr

    rhos = []
    for i, j in itertools.combinations(range(matrix.shape[0]), 2):
        both = ~np.isnan(matrix[i]) & ~np.isnan(matrix[j])
        if both.sum() < min_items:
            continue
        a, b = matrix[i, both], matrix[j, both]
        if np.ptp(a) == 0 or np.ptp(b) == 0:
            continue  # constant ratings: rho undefined
        rhos.append(float(spearmanr(a, b).statistic))
    return float(np.mean(rhos)) if rhos else float("nan")


@dataclass
class Agreement:
    criterion: str
    n_items: int
    n_annotators: int
    alpha_interval: float
    alpha_ordinal: float
    mean_pairwise_spearman: float
    mean_spread: float

    def as_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def agreement(
    records: Sequence[AnnotationRecord], criterion: str, scale: Sequence[int] | None = None
) -> Agreement:
    """Agreement among annotators on one criterion over the records that scored it."""
    recs = [r for r in records if any(criterion in s for s in r.scores.values())]
    annotators, mat = reliability_matrix(recs, criterion)
    spreads = [aggregate_record(r)[criterion].spread for r in recs]
    return Agreement(
        criterion=criterion,
        n_items=len(recs),
        n_annotators=len(annotators),
        alpha_interval=krippendorff_alpha(mat, "interval", scale),
        alpha_ordinal=krippendorff_alpha(mat, "ordinal", scale),
        mean_pairwise_spearman=mean_pairwise_spearman(mat),
        mean_spread=float(np.mean(spreads)) if spreads else float("nan"),
    )
