"""From the judge's reading to a tool's scale: one function per kind of scale, thresholds stated.

Every mapping starts from the judge's **calibrated** reading (:class:`~judge.serve.protocols.base.Reading`:
the expected score of the calibrated distribution, which is the calibrated score ``/v1/score`` returns;
the raw read-out's expectation when the judge has no calibration), never from the argmax alone. With
``u`` that score scaled to [0, 1] (``(score - min) / (max - min)`` on the rubric's scale, 0..6 for MMIE):

* :func:`integer_scale` (prometheus-eval 1-5, MT-Bench 1-10, G-Eval 0-10, lmms-eval's two scores): the
  point ``lo + u * (hi - lo)`` on the tool's range, rounded to the nearest integer (halves up). On 1-5
  from 0..6: 1 below 0.75, 2 below 2.25, 3 below 3.75, 4 below 5.25, else 5.
* :func:`nearest_choice` (a tool that offers a set of values, e.g. 0, 0.5 or 1): the offered value
  nearest to that point on the set's range.
* :func:`grade` (inspect-ai's C/P/I): C when ``u >= 2/3``, I when ``u < 1/3``, P between; a tool that
  offers no partial credit gets C when ``u >= 1/2``, else I.
* :func:`binary` (lmms-eval's 0/1 and yes/no, G-Eval's strict 0/1): correct when ``u >= 1/2``.
* :func:`preference_verdict` (prometheus-eval A/B, MT-Bench A/B/C): from ``p``, the preference
  ``Judge.compare`` gives (P(A better) + P(tie) / 2 from the two score distributions): A when ``p >= 0.5 +
  TIE_BAND``, B when ``p <= 0.5 - TIE_BAND``, else a tie; a tool without ties gets A when ``p >= 0.5``.
* :func:`integer_distribution`: the probabilities of a tool's integer score tokens (for ``logprobs``), each
  value of the calibrated distribution placed at its point on the tool's range and split between the two
  integers around it, so the tokens' expectation is the mapped score; only the integers that receive mass
  are listed (at most two per value: 14 for a 0..6 rubric), whatever the range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from judge.serve.protocols.base import Reading

#: Unit score at or above which a response is correct (binary) or passes.
PASS = 0.5
#: Unit scores at or above which inspect-ai's grade is C, and below which it is I (P between).
GRADE_C, GRADE_I = 2 / 3, 1 / 3
#: How far from 0.5 the preference must be for A or B when the tool offers a tie.
TIE_BAND = 0.05

Verdict = Literal["A", "B", "tie"]


def _point(reading: Reading, lo: float, hi: float) -> float:
    return lo + min(max(reading.unit, 0.0), 1.0) * (hi - lo)


def integer_scale(reading: Reading, lo: int, hi: int) -> int:
    """The nearest integer of ``lo..hi`` to the reading's point on that range (halves up)."""
    return min(max(math.floor(_point(reading, lo, hi) + 0.5), lo), hi)


def point(reading: Reading, lo: float, hi: float) -> float:
    """The reading's point on ``lo..hi`` (the linear map of the unit score), unrounded."""
    return _point(reading, lo, hi)


def nearest_choice(reading: Reading, choices: Sequence[float]) -> float:
    """The offered value nearest to the reading's point on the choices' range (the lower one on a tie)."""
    lo, hi = min(choices), max(choices)
    x = _point(reading, lo, hi)
    return min(sorted(choices), key=lambda c: abs(c - x))


def grade(reading: Reading, partial: bool) -> Literal["C", "P", "I"]:
    """inspect-ai's grade: C, P (only when ``partial``) or I, by the thresholds above."""
    u = reading.unit
    if not partial:
        return "C" if u >= PASS else "I"
    return "C" if u >= GRADE_C else "I" if u < GRADE_I else "P"


def binary(reading: Reading) -> bool:
    """Whether the response is correct: unit score at least :data:`PASS`."""
    return reading.unit >= PASS


def preference_verdict(p_first_better: float, ties: bool) -> Verdict:
    """A, B or a tie from the preference for A (see the module doc)."""
    if not ties:
        return "A" if p_first_better >= 0.5 else "B"
    if p_first_better >= 0.5 + TIE_BAND:
        return "A"
    if p_first_better <= 0.5 - TIE_BAND:
        return "B"
    return "tie"


def integer_distribution(
    reading: Reading, distribution: Sequence[float] | None, lo: int, hi: int
) -> dict[int, float]:
    """Probabilities of the integers of ``lo..hi`` whose expectation is the reading's point on that range.
    ``distribution``: the calibrated distribution over the rubric's scale, whose mass is carried over value
    by value; None (a calibration that maps the score, not the distribution) puts all the mass on the two
    integers around the point. Only integers that receive mass are listed (at most two per value of the
    distribution), in order: the size does not depend on the range."""
    out: dict[int, float] = {}
    n = reading.hi - reading.lo
    if distribution is None:
        masses = [(_point(reading, lo, hi), 1.0)]
    else:
        masses = [(lo + (v / n) * (hi - lo), p) for v, p in enumerate(distribution)]
    for x, p in masses:
        below = min(math.floor(x), hi)
        frac = x - below
        out[below] = out.get(below, 0.0) + p * (1 - frac)
        if frac > 0:
            out[below + 1] = out.get(below + 1, 0.0) + p * frac
    total = math.fsum(out.values())
    return {k: out[k] / total if total > 0 else out[k] for k in sorted(out)}


__all__ = [
    "GRADE_C",
    "GRADE_I",
    "PASS",
    "TIE_BAND",
    "binary",
    "grade",
    "integer_distribution",
    "integer_scale",
    "nearest_choice",
    "point",
    "preference_verdict",
]
