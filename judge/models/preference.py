"""A pairwise preference from a pointwise judge: which of two responses is better, from their score distributions.

The judge reads one distribution over the rubric's scale per response (:mod:`judge.models.readout`). Taking
the two scores as independent draws from those distributions,

    P(A better) = sum_i pA[i] * sum_{j < i} pB[j]        P(tie) = sum_i pA[i] * pB[i]

and the preference for A is ``P(A better) + P(tie) / 2``: the chance that A wins a comparison in which a
tie is decided by a fair coin. It is 0.5 exactly for two equal distributions.

Symmetry is exact in floating point: :func:`preference` computes the pair in one fixed order (the
lexicographically smaller distribution first) and returns ``1 - p`` for the other order, so swapping A and
B gives exactly ``1 - p`` as Python computes it, never a value one rounding away. The expected scores and
their difference come with it (the difference changes sign exactly under a swap).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Preference:
    """How a judge compares response A with response B on one criterion.

    ``p_first_better``: P(A better) + P(tie) / 2 (``p_a_better + p_tie / 2``, up to rounding; exactly
    ``1 -`` the swapped pair's); ``p_a_better``, ``p_tie``, ``p_b_better``: the three outcomes (they sum to
    1 up to rounding); ``score_a``, ``score_b``: the expected scores; ``score_diff``: ``score_a - score_b``;
    ``trusted``: with selective evaluation, whether the judge keeps the preference (None: no thresholds).
    """

    p_first_better: float
    p_a_better: float
    p_tie: float
    p_b_better: float
    score_a: float
    score_b: float
    score_diff: float
    trusted: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["trusted"] is None:
            del out["trusted"]
        return out


def _check(dist: Sequence[float], values: Sequence[float], name: str) -> list[float]:
    d = [float(x) for x in dist]
    if len(d) != len(values):
        raise ValueError(f"{name} has {len(d)} probabilities for a scale of {len(values)} values")
    if any(not math.isfinite(x) or x < 0 for x in d):
        raise ValueError(f"{name} holds a negative or non-finite probability")
    total = math.fsum(d)
    if abs(total - 1.0) > 1e-3:
        raise ValueError(f"{name} sums to {total:.4f}, not 1")
    return d


def _outcomes(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """(P(A better), P(tie), P(B better)) of independent draws, scale values in increasing order."""
    below_b = 0.0  # P(B < value i)
    below_a = 0.0
    win, lose = [], []
    for pa, pb in zip(a, b, strict=True):
        win.append(pa * below_b)
        lose.append(pb * below_a)
        below_b += pb
        below_a += pa
    tie = math.fsum(pa * pb for pa, pb in zip(a, b, strict=True))
    return math.fsum(win), tie, math.fsum(lose)


def _expected(d: list[float], values: Sequence[float]) -> float:
    return math.fsum(p * v for p, v in zip(d, values, strict=True)) / math.fsum(d)


def preference(
    dist_a: Sequence[float],
    dist_b: Sequence[float],
    values: Sequence[float],
    *,
    expected: tuple[float, float] | None = None,
) -> Preference:
    """The preference for response A over response B from their distributions over the scale ``values``
    (lowest first, as :class:`~judge.models.readout.CriterionScore` holds them); see the module doc.
    ``expected``: the two expected scores as the read-out gave them (default: computed from the
    distributions, which may differ from the read-out's in the last bit).

    Raises ValueError for a distribution of the wrong length, with a negative or non-finite entry, or not
    summing to 1 (within 1e-3)."""
    vals = [float(v) for v in values]
    if any(b <= a for a, b in zip(vals, vals[1:], strict=False)):
        raise ValueError("the scale values must increase")
    a = _check(dist_a, vals, "the first distribution")
    b = _check(dist_b, vals, "the second distribution")
    score_a, score_b = expected if expected is not None else (_expected(a, vals), _expected(b, vals))
    if a == b:  # the same distribution: no side is better, and a swap must give the same number
        win, tie, lose = _outcomes(a, b)
        return Preference(0.5, win, tie, lose, score_a, score_b, 0.0)
    swapped = b < a  # one fixed order for the pair: the lexicographically smaller distribution first
    first, second = (b, a) if swapped else (a, b)
    win, tie, lose = _outcomes(first, second)
    p = _complementary(win, tie, lose)
    if swapped:
        win, lose = lose, win
        p = 1.0 - p  # exact: see _complementary
    return Preference(
        p_first_better=p,
        p_a_better=win,
        p_tie=tie,
        p_b_better=lose,
        score_a=score_a,
        score_b=score_b,
        score_diff=-(score_b - score_a) if swapped else score_a - score_b,
    )


def record_preference(a: Any, b: Any, values: Sequence[float]) -> Preference:
    """The preference between two scored records of one criterion, response A and response B
    (:class:`~judge.core.schema.ScoreRecord` or its dict): :func:`preference` of their distributions, with
    their scores as the expected scores. Both are a record's one view: the calibrated distribution and its
    mean for a calibrated judge, the read-out's otherwise (``raw_`` fields are never mixed in). The rule of
    ``Judge.compare``, ``judge-score``'s pairs, ``judge-bench`` and the served protocols. Raises JudgeError
    naming the side that is unscorable, with its reason."""
    from judge.core.errors import JudgeError

    def field(r: Any, name: str) -> Any:
        return r.get(name) if isinstance(r, Mapping) else getattr(r, name)

    for name, s in (("A", a), ("B", b)):
        if field(s, "score") is None or field(s, "distribution") is None:
            raise JudgeError(f"response {name} ({field(s, 'id')!r}) is unscorable: {field(s, 'reason')}")
    return preference(
        field(a, "distribution"),
        field(b, "distribution"),
        values,
        expected=(float(field(a, "score")), float(field(b, "score"))),
    )


def _complementary(win: float, tie: float, lose: float) -> float:
    """``(win + tie / 2) / total``, rounded so that ``1 - (1 - p) == p`` holds exactly.

    Of ``p`` and ``1 - p`` the one at least 0.5 is rounded once; the other is 1 minus it, which is exact
    (Sterbenz: ``1 - x`` is exact for ``x`` in [0.5, 2]), and so is 1 minus that. Clamped to [0, 1]: the
    inputs' rounding must not push it outside.
    """
    total = win + tie + lose
    p = min(1.0, max(0.0, (win + tie / 2) / total)) if total > 0 else 0.5
    hi = p if p >= 0.5 else 1.0 - p
    return hi if p >= 0.5 else 1.0 - hi


__all__ = ["Preference", "preference", "record_preference"]
