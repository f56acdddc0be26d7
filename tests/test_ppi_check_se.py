"""The "±" beside a PPI coverage is the Monte Carlo standard error for the draw design: the intervals of
one draw share its labelled questions, so the draws, not the intervals, are the independent units
(issue 38: it was sqrt(p (1 - p) / intervals), as if every interval were independent)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.eval.ppi import MeanEstimate
from judge.eval.ppi_check import _Tally
from judge.eval.report_calibration import _share


def _est(lo: float, hi: float) -> MeanEstimate:
    return MeanEstimate(mean=(lo + hi) / 2, ci=[lo, hi], n_labelled=12, n_unlabelled=0)


def test_intervals_that_move_together_in_a_draw_count_once():
    # 200 draws of 3 models whose intervals cover together (they share the draw's labels): 180 cover.
    rng = np.random.default_rng(0)
    covers = rng.permutation([True] * 180 + [False] * 20)
    t = _Tally()
    for d, ok in enumerate(covers):
        for _ in range(3):
            t.add(_est(0.0, 1.0) if ok else _est(2.0, 3.0), 0.5, d)
    p = 0.9
    assert t.share() == p
    # Independently: the per-draw shares are the units (each draw is all-or-nothing here).
    shares = np.asarray(covers, dtype=float)
    by_draw = float(np.std(shares, ddof=1) / math.sqrt(shares.size))
    assert t.se() == pytest.approx(by_draw, rel=1e-9)
    naive = math.sqrt(p * (1 - p) / 600)  # the old figure: 600 independent intervals
    assert t.se() > 1.7 * naive


def test_independent_intervals_keep_the_binomial_error_and_the_figure_says_what_it_is():
    rng = np.random.default_rng(1)
    t = _Tally()
    for d in range(2000):
        for _ in range(3):
            ok = rng.random() < 0.95
            t.add(_est(0.0, 1.0) if ok else _est(2.0, 3.0), 0.5, d)
    p = t.share()
    assert p is not None and t.se() == pytest.approx(math.sqrt(p * (1 - p) / 6000), rel=0.1)
    assert "(s.e. over draws)" in _share(p, t.se())
