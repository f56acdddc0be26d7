"""The mappings from the judge's calibrated reading to the tools' scales (judge.serve.protocols.scales), at
the thresholds their docstring states, and score_from_logprobs' refusal of too few top_logprobs."""

from __future__ import annotations

import math

import pytest

from judge.serve.judge_prompt import score_from_logprobs
from judge.serve.protocols import scales
from judge.serve.protocols.base import Reading


def r(score: float) -> Reading:
    return Reading(score, 0, 6)


@pytest.mark.parametrize(
    ("score", "want"),
    [
        (0.0, 1),
        (0.749, 1),
        (0.75, 2),
        (2.249, 2),
        (2.25, 3),
        (3.749, 3),
        (3.75, 4),
        (5.249, 4),
        (5.25, 5),
        (6, 5),
    ],
)
def test_one_to_five_thresholds(score, want):
    assert scales.integer_scale(r(score), 1, 5) == want


def test_one_to_ten_and_zero_to_ten_are_the_nearest_point():
    for score in [0, 0.3, 1.7, 2.999, 3, 4.5, 6]:
        for lo, hi in ((1, 10), (0, 10)):
            point = lo + score / 6 * (hi - lo)
            assert abs(scales.integer_scale(r(score), lo, hi) - point) <= 0.5


@pytest.mark.parametrize(
    ("score", "partial", "want"),
    [
        (4.0, True, "C"),
        (3.999, True, "P"),
        (2.0, True, "P"),
        (1.999, True, "I"),
        (3.0, False, "C"),
        (2.999, False, "I"),
    ],
)
def test_inspect_grades(score, partial, want):
    assert scales.grade(r(score), partial) == want


def test_binary_and_choices():
    assert scales.binary(r(3.0)) and not scales.binary(r(2.999))
    assert scales.nearest_choice(r(3.0), [0, 0.5, 1]) == 0.5
    assert scales.nearest_choice(r(5.0), [0, 0.5, 1]) == 1
    assert scales.nearest_choice(r(1.4), [0, 0.5, 1]) == 0


@pytest.mark.parametrize(("p", "ties", "want"), [(0.55, True, "A"), (0.549, True, "tie"), (0.451, True, "tie"),
                                                 (0.45, True, "B"), (0.5, False, "A"), (0.499, False, "B")])  # fmt: skip
def test_preference_verdicts(p, ties, want):
    assert scales.preference_verdict(p, ties) == want


def test_integer_distribution_keeps_the_mapped_mean():
    dist = [0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05]
    mean = sum(v * p for v, p in enumerate(dist))
    for lo, hi in ((1, 5), (0, 10), (1, 10)):
        probs = scales.integer_distribution(r(mean), dist, lo, hi)
        assert math.isclose(sum(probs.values()), 1.0)
        assert math.isclose(sum(k * p for k, p in probs.items()), scales.point(r(mean), lo, hi))
        two = scales.integer_distribution(r(mean), None, lo, hi)  # a calibration that maps only the mean
        assert math.isclose(sum(k * p for k, p in two.items()), scales.point(r(mean), lo, hi))
        assert sum(p > 0 for p in two.values()) <= 2


def test_score_from_logprobs_refuses_too_few_entries():
    dist = [0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05]
    entries = sorted(
        ({"token": str(v), "logprob": math.log(p)} for v, p in enumerate(dist)), key=lambda e: -e["logprob"]
    )
    assert score_from_logprobs(entries) == pytest.approx(3.0)
    for n in (1, 3, 6):
        with pytest.raises(
            ValueError, match=r"got \d top_logprobs, but the scale has 7 values.*top_logprobs=7"
        ):
            score_from_logprobs(entries[:n])
