"""The pairwise preference from two score distributions: its value, exact symmetry, and Judge.compare."""

from __future__ import annotations

import random

import pytest

from judge.core.errors import ConfigError
from judge.models.preference import preference

SCALE = list(range(7))


def point(v: int) -> list[float]:
    return [1.0 if i == v else 0.0 for i in SCALE]


def random_dist(rng: random.Random) -> list[float]:
    w = [rng.random() ** 4 for _ in SCALE]
    s = sum(w)
    return [x / s for x in w]


def test_point_masses_and_ties():
    assert preference(point(4), point(3), SCALE).p_first_better == 1.0
    assert preference(point(3), point(4), SCALE).p_first_better == 0.0
    same = preference(point(3), point(3), SCALE)
    assert (same.p_first_better, same.p_tie, same.score_diff) == (0.5, 1.0, 0.0)


def test_value_by_hand():
    # A: 2 or 3 with 1/2 each; B: 3 surely. P(A > B) = 0, P(tie) = 1/2, P(A < B) = 1/2 -> 0 + 1/4.
    a = [0, 0, 0.5, 0.5, 0, 0, 0]
    p = preference(a, point(3), SCALE)
    assert (p.p_a_better, p.p_tie, p.p_b_better) == (0.0, 0.5, 0.5)
    assert p.p_first_better == 0.25
    assert (p.score_a, p.score_b, p.score_diff) == (2.5, 3.0, -0.5)
    # A: 1, 3, 5 with 1/3 each; B: 2, 4 with 1/2 each: A wins on (3,2), (5,2), (5,4): 3/6.
    a = [0, 1 / 3, 0, 1 / 3, 0, 1 / 3, 0]
    b = [0, 0, 0.5, 0, 0.5, 0, 0]
    assert preference(a, b, SCALE).p_first_better == pytest.approx(0.5, abs=1e-15)
    assert preference(a, b, SCALE).p_a_better == pytest.approx(0.5, abs=1e-15)


def test_swap_gives_exactly_one_minus_p():
    rng = random.Random(0)
    for i in range(5000):
        a, b = random_dist(rng), random_dist(rng)
        if i % 5 == 0:  # nearly equal distributions: where rounding would show first
            b = [x * (1 + 1e-15 * (k - 3)) for k, x in enumerate(a)]
        p, q = preference(a, b, SCALE), preference(b, a, SCALE)
        assert q.p_first_better == 1 - p.p_first_better, (a, b)
        assert p.p_first_better == 1 - q.p_first_better, (a, b)
        assert q.score_diff == -p.score_diff
        assert (q.p_a_better, q.p_tie, q.p_b_better) == (p.p_b_better, p.p_tie, p.p_a_better)
        assert 0.0 <= p.p_first_better <= 1.0


def test_higher_expected_score_is_not_the_same_as_preferred():
    # A usually edges B out by one point but sometimes collapses: higher preference, lower expected score.
    a = [0.3, 0, 0, 0, 0.7, 0, 0]  # mean 2.8
    b = point(3)  # mean 3.0
    p = preference(a, b, SCALE)
    assert p.score_diff < 0 and p.p_first_better == pytest.approx(0.7)


@pytest.mark.parametrize(
    "a, b, message",
    [
        ([0.5, 0.5], point(3), "2 probabilities for a scale of 7"),
        ([-0.1, 1.1, 0, 0, 0, 0, 0], point(3), "negative"),
        ([0.5, 0, 0, 0, 0, 0, 0], point(3), "sums to 0.5000"),
        (point(3), [float("nan")] + [0.0] * 6, "second distribution"),
    ],
)
def test_bad_distributions_are_refused(a, b, message):
    with pytest.raises(ValueError, match=message):
        preference(a, b, SCALE)


@pytest.fixture(scope="module")
def tiny_judge():
    from judge import Judge

    return Judge.load("tiny", rubric="mmie", device="cpu")


@pytest.mark.slow
def test_judge_compare_is_the_preference_of_its_scores(tiny_judge, small_demo):
    import json

    import torch

    torch.set_num_threads(1)
    items = [json.loads(x) for x in small_demo.read_text().splitlines()[:3]]
    root = small_demo.parent
    a, b = items[0], items[1]
    pref = tiny_judge.compare(a, b, root=root)
    back = tiny_judge.compare(b, a, root=root)
    assert back.p_first_better == 1 - pref.p_first_better
    assert back.score_diff == -pref.score_diff
    scores = {s.id: s for s in tiny_judge.score_records([a, b], root=root) if s.criterion == "overall"}
    sa, sb = scores[a["id"]], scores[b["id"]]
    assert pref.score_a == pytest.approx(sa.score, abs=1e-6) and pref.score_b == pytest.approx(
        sb.score, abs=1e-6
    )
    # compare() scores only the criterion asked for; the read-out is the same to float round-off.
    expected = preference(sa.distribution, sb.distribution, SCALE)
    assert pref.p_first_better == pytest.approx(expected.p_first_better, abs=1e-6)
    same = tiny_judge.compare(a, a, root=root)
    assert same.p_first_better == 0.5 and same.score_diff == 0.0
    crit = tiny_judge.compare(a, b, criterion="text_quality", root=root)
    assert crit.p_first_better != pref.p_first_better
    with pytest.raises(ConfigError, match="are not criteria of task family"):
        tiny_judge.compare(a, b, criterion="no_such_criterion", root=root)
