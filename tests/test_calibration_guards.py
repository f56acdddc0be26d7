"""Issue 38, "calibration that collapses": a map never gives one score probability 1, and a forced map that
is refused or no better than the read-out on held-out labels is an error unless `force_method` keeps it,
with a printed warning."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.core.errors import JudgeError
from judge.eval.calibration import LabelledScore, fit_calibration
from judge.eval.calibration_report import format_calibration
from judge.models.calibration import FLOOR, CriterionCalibration

VALUES = list(range(7))


def _dist(mu: float, width: float) -> tuple[float, ...]:
    p = np.exp(-0.5 * ((np.arange(7) - mu) / width) ** 2)
    return tuple((p / p.sum()).tolist())


def untrained(n_questions: int, seed: int) -> list[LabelledScore]:
    """An untrained judge: broad distributions around the middle of the scale, whatever the response; the
    annotators rate a uniform truth with noise (Spearman near 0)."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for r in range(3):
            truth = rng.uniform(0, 6)
            ratings = tuple(int(np.clip(round(truth + rng.normal(0, 0.7)), 0, 6)) for _ in range(3))
            d = _dist(3.0 + rng.normal(0, 0.3), 2.0)
            out.append(LabelledScore(f"q{q}-r{r}", "overall", f"q{q}", float(np.dot(d, VALUES)), d,
                                     float(np.mean(ratings)), ratings))  # fmt: skip
    return out


def test_an_isotonic_map_to_the_scales_end_leaves_mass_on_the_other_scores():
    # The map sends raw scores above 3.2 to 6 (the isotonic fit's top block of ratings 6, 6, 6). Base: all
    # the mass on 6 with confidence 1.0, and an item rated 2, 3, 2 cost a log-loss of about 690 per rating.
    cc = CriterionCalibration(n_fit=30, n_conformal=0, x=[2.8, 3.2], y=[2.0, 6.0], halfwidth=None)
    d = _dist(3.4, 2.0)
    score, dist = cc.view(float(np.dot(d, VALUES)), d, VALUES)
    assert max(dist) == pytest.approx(1.0 - FLOOR) and min(dist) >= FLOOR / 6 - 1e-12
    assert math.fsum(dist) == pytest.approx(1.0) and score == pytest.approx(np.dot(dist, VALUES))
    assert 6.0 - score <= FLOOR * 6  # within FLOOR x the scale's width of the map's value
    nll = -np.mean([math.log(dist[r]) for r in (2, 3, 2)])
    assert nll < -math.log(FLOOR / 6) + 1e-9  # bounded: about 6.4 at most
    # Where the map leaves the distribution below the floor's reach, nothing moves.
    mid = cc.view(2.9, _dist(3.0, 2.0), VALUES)
    assert max(mid[1]) < 1.0 - FLOOR and mid[0] == pytest.approx(3.0, abs=1e-9)


def test_a_temperature_that_sharpens_to_one_score_is_floored_too():
    cc = CriterionCalibration(n_fit=30, n_conformal=0, temperature=0.02, halfwidth=None)
    _, dist = cc.view(3.0, _dist(3.2, 0.6), VALUES)
    assert max(dist) == pytest.approx(1.0 - FLOOR)


@pytest.mark.parametrize("method", ["isotonic", "temperature"])
def test_a_forced_map_worse_than_the_read_out_is_refused_unless_forced(method):
    # Seed 1: isotonic's cross-validated NLL above the read-out's, temperature's at its bound. Base: both accepted without a word.
    data = untrained(40, 1)
    with pytest.raises(
        JudgeError, match=rf"{method} calibration of .* refused: .*read-out.*force_method"
    ) as e:
        fit_calibration(data, VALUES, method=method, min_items=30)
    auto = fit_calibration(data, VALUES, min_items=30)
    assert {c["method"] for c in auto.comparison["choice"].values()} == {"none"}  # auto keeps the read-out
    kept = fit_calibration(data, VALUES, method=method, min_items=30, force=True)
    c = kept.comparison["choice"]["overall"]
    assert c["method"] == method and c["warning"].startswith(f"{method} kept by force_method although")
    printed = format_calibration(kept)
    assert "WARNING: " + c["warning"] in printed
    # The error shows the forced map against the read-out on held-out NLL.
    nll = c["nll"]
    if method == "isotonic":
        assert f"{nll['isotonic']:.4f}" in str(e.value) and f"{nll['none']:.4f}" in str(e.value)


def test_fitting_and_scoring_agree_at_the_threshold_itself():
    # A confidence a rounding error below the threshold: fitting counted it trusted (>= threshold - 1e-12)
    # and scoring escalated it (>= threshold). Base: trusted_pair gave False for an item the fit had kept.
    from judge.eval.selective import fixed_sequence_threshold
    from judge.models.calibration import POOLED
    from judge.models.selective import Selective, pair_confidence

    conf = [0.9] * 40
    rule = fixed_sequence_threshold(conf, [True] * 40, alpha=0.2, delta=0.1, grid=[0.9 + 5e-13])
    assert rule.threshold == 0.9 + 5e-13 and rule.n_trusted == 40  # the fit trusts every item
    sel = Selective(agreement=0.8, delta=0.1, tolerance=1.0, confidence="mass", scale=VALUES, calibration="x",
                    pointwise={POOLED: rule}, pairwise={POOLED: rule})  # fmt: skip
    assert pair_confidence(0.9) == 0.9
    assert sel.trusted_pair("overall", 0.9) is True  # scoring keeps it too
