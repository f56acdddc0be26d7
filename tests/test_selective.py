"""Selective evaluation (Trust or Escalate): the fixed-sequence threshold keeps its promise over many random
calibration/test splits of data whose agreement is known; fitting it on a calibrated judge (pointwise and
pairwise, the annotators' majority); the file, the card, and the report's section on held-out items."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binom

from judge.eval.calibration import LabelledScore, fit_calibration
from judge.eval.selective import (
    fit_selective,
    fixed_sequence_threshold,
    grid_over,
    human_preference,
    min_testable,
    pointwise_data,
)
from judge.models.calibration import POOLED
from judge.models.selective import Selective, SelectiveRule, read_selective, write_selective

VALUES = list(range(7))
GRID = grid_over((0.0, 1.0))


def agreement_of(c: np.ndarray) -> np.ndarray:
    """The known chance that the judge agrees with the humans on an item of confidence ``c``."""
    return 0.55 + 0.45 * c**1.5


@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "delta"), [(0.1, 0.1), (0.15, 0.2)])
def test_the_promised_agreement_holds_over_random_calibration_test_splits(alpha, delta):
    rng = np.random.default_rng(int(100 * alpha))
    data_c = rng.uniform(0, 1, 3000)
    data_a = rng.uniform(0, 1, 3000) < agreement_of(data_c)
    failures = naive_failures = 0
    shares = []
    splits = 400
    for _ in range(splits):
        order = rng.permutation(3000)
        cal, test = order[:1000], order[1000:]
        rule = fixed_sequence_threshold(data_c[cal], data_a[cal], alpha, delta, GRID)
        if rule.threshold is not None:
            kept = test[data_c[test] >= rule.threshold]
            shares.append(kept.size / test.size)
            # Held-out agreement on the trusted items, at its known value (no Bernoulli noise of the test part).
            failures += agreement_of(data_c[kept]).mean() < 1 - alpha
        # What the guarantee rules out: the lowest threshold whose calibration agreement looks good enough.
        ok = [lam for lam in GRID if (data_c[cal] >= lam).sum() >= 20
              and data_a[cal][data_c[cal] >= lam].mean() >= 1 - alpha]  # fmt: skip
        if ok:
            kept = test[data_c[test] >= min(ok)]
            naive_failures += agreement_of(data_c[kept]).mean() < 1 - alpha
    se = np.sqrt(delta * (1 - delta) / splits)
    assert failures / splits <= delta + 2 * se, failures / splits
    assert np.mean(shares) > 0.15  # a useful share is trusted: the promise is not kept by abstaining
    assert naive_failures / splits > 0.3  # without the test, the promise fails often: this test can fail


def test_fixed_sequence_by_hand():
    c = np.asarray([0.95] * 30 + [0.6] * 30 + [0.2] * 40)
    a = np.asarray([True] * 30 + [True] * 28 + [False] * 2 + [True] * 20 + [False] * 20)
    rule = fixed_sequence_threshold(c, a, 0.1, 0.1, GRID)
    # From the top: the 30 at 0.95 pass (p = 0.9^30 = 0.042), the 60 down to 0.6 pass (2 errors:
    # P(Bin(60, 0.1) <= 2) = 0.053), and so does every threshold down to 0.205 (the same 60); with the
    # 0.2s (22 errors in 100) the test stops. The last accepted: 0.205.
    assert rule.threshold == pytest.approx(0.205) and rule.n_trusted == 60
    assert rule.agreement == pytest.approx(58 / 60) and rule.p_value == pytest.approx(binom.cdf(2, 60, 0.1))
    three = a.copy()
    three[57] = False  # a third error among the 60: P(Bin(60, 0.1) <= 3) = 0.137 > 0.1, stop above 0.6
    assert fixed_sequence_threshold(c, three, 0.1, 0.1, GRID).threshold == pytest.approx(0.605)
    # Thresholds that keep fewer items than START (or than any test could accept) are passed over.
    assert min_testable(0.1, 0.1) == 22
    few = np.r_[np.full(5, 0.99), c]
    assert fixed_sequence_threshold(few, np.r_[np.zeros(5, bool), a], 0.1, 0.1, GRID).threshold is None
    assert fixed_sequence_threshold(few, np.r_[np.ones(5, bool), a], 0.1, 0.1, GRID).n_trusted == 65
    assert fixed_sequence_threshold(c, ~a, 0.1, 0.1, GRID).threshold is None


def test_the_annotators_majority_preference():
    def item(id_, ratings, annotators=("a1", "a2", "a3")):
        return LabelledScore(
            id_, "overall", "q", 3.0, tuple([1 / 7] * 7), float(np.mean(ratings)), ratings, annotators
        )

    a, b = item("a", (5, 3, 4)), item("b", (4, 4, 2))
    assert human_preference(a, b) == 1 and human_preference(b, a) == -1  # two of three prefer a
    assert human_preference(item("a", (5, 3)), item("b", (3, 5))) == 0  # a tied vote: no preference
    other = item("c", (1, 1), ("x1", "x2"))  # no annotator in common: the means decide
    assert human_preference(a, other) == 1


def judged(n_questions: int, seed: int):
    """A calibrated-ish judge whose confidence tracks its error: sharper distributions are closer to the
    humans, and three annotators rate each response."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n_questions):
        for r in range(3):
            for crit in ("overall", "text_quality"):
                truth = rng.uniform(0.5, 5.5)
                width = rng.uniform(0.3, 1.6)
                mu = float(np.clip(truth + rng.normal(0, width), 0, 6))
                p = np.exp(-0.5 * ((np.arange(7) - mu) / width) ** 2)
                d = tuple((p / p.sum()).tolist())
                ratings = tuple(int(np.clip(round(truth + rng.normal(0, 0.5)), 0, 6)) for _ in range(3))
                out.append(LabelledScore(f"q{q}-r{r}", crit, f"q{q}", float(np.dot(d, VALUES)), d,
                                         float(np.mean(ratings)), ratings, ("a1", "a2", "a3")))  # fmt: skip
    return out


def test_fit_selective_on_a_calibrated_judge_keeps_its_promise_on_new_items(tmp_path):
    data = judged(150, 1)
    cal = fit_calibration(data, VALUES, min_items=30)
    sel = fit_selective(data, cal, agreement=0.8, delta=0.1, tolerance=1.0)
    assert set(sel.pointwise) == {"overall", "text_quality", POOLED} and sel.calibration == cal.fingerprint()
    assert sel.fitted_on["items"] == cal.comparison["n_items"]  # the calibration's conformal part
    for crit in ("overall", "text_quality"):
        rule = sel.pointwise[crit]
        assert rule.threshold is not None
        # Independently: its share and agreement on the held-out part, and the binomial p-value.
        from judge.eval.calibration import conformal_part

        part = [s for s in conformal_part(cal, data) if s.criterion == crit]
        conf, ok = [], []
        for s in part:
            v = cal.apply(crit, s.raw, s.distribution)
            conf.append(
                sum(p for p, x in zip(v.distribution, VALUES, strict=True) if abs(x - v.score) <= 1.0 + 1e-9)
            )
            ok.append(abs(v.score - s.human) <= 1.0 + 1e-9)
        kept = np.asarray(conf) >= rule.threshold - 1e-12
        assert rule.n == len(part) and rule.n_trusted == kept.sum()
        assert rule.agreement == pytest.approx(np.mean(np.asarray(ok)[kept]))
        assert rule.p_value == pytest.approx(binom.cdf((~np.asarray(ok)[kept]).sum(), kept.sum(), 0.2))
    # New items of the same kind: the trusted ones agree at least 80% of the time.
    fresh = judged(400, 2)
    marks, agree = [], []
    for s in fresh:
        v = cal.apply(s.criterion, s.raw, s.distribution)
        marks.append(sel.trusted(s.criterion, v.distribution, v.score))
        agree.append(abs(v.score - s.human) <= 1.0)
    marks_a, agree_a = np.asarray(marks), np.asarray(agree)
    assert agree_a[marks_a].mean() >= 0.8 > agree_a.mean() and 0.1 < marks_a.mean() < 0.95
    # Pairwise: pairs of responses to one question that the annotators order.
    assert sel.pairwise and sel.fitted_on["pairs"] > 100
    # The file round-trips and is checked.
    path = write_selective(tmp_path, sel)
    assert read_selective(path) == sel and read_selective(path).fingerprint() == sel.fingerprint()
    bad = json.loads(path.read_text())
    bad["confidence"] = "vibes"
    path.write_text(json.dumps(bad))
    with pytest.raises(Exception, match="field 'confidence': 'vibes' is not one of mass, spread"):
        read_selective(path)


def test_the_card_names_the_thresholds_and_they_must_fit_its_calibration(tmp_path, rubric):
    from judge.core.errors import ConfigError
    from judge.models.calibration import write_calibration
    from judge.models.card import (
        CardCalibration,
        CardSelective,
        card_calibration,
        card_selective,
        read_card,
        write_card,
    )

    data = judged(60, 3)
    cal = fit_calibration(data, VALUES, min_items=30)
    sel = fit_selective(data, cal)
    folder = tmp_path / "judge"
    folder.mkdir()
    (folder / "judge_card.json").write_text(
        json.dumps({"base_model": "tiny", "rubric": {"name": "mmie", "hash": rubric.hash}})
    )
    card = read_card(folder)
    write_calibration(folder, cal)
    card.calibration = CardCalibration(file="calibration.json", fingerprint=cal.fingerprint(), method=cal.method,
                                       level=cal.level, data_fingerprint=cal.data.fingerprint, human_files=[],
                                       n_items=cal.data.n_items)  # fmt: skip
    write_selective(folder, sel)
    card.selective = CardSelective(file="selective.json", fingerprint=sel.fingerprint(),
                                   calibration_fingerprint=cal.fingerprint(), agreement=0.9, delta=0.1)  # fmt: skip
    write_card(folder, card)
    loaded = card_calibration(folder, read_card(folder))
    assert card_selective(folder, read_card(folder), loaded) == sel
    assert card_selective(folder, read_card(folder), None) is None  # no calibration, no trusted mark
    other = fit_calibration(data, VALUES, min_items=30, seed=5)
    with pytest.raises(ConfigError, match="fitted on another calibration"):
        card_selective(folder, read_card(folder), other)
    edited = Selective.model_validate({**sel.model_dump(), "tolerance": 2.0})
    write_selective(folder, edited)
    with pytest.raises(ConfigError, match="not the selective-evaluation file the judge card names"):
        card_selective(folder, read_card(folder), loaded)


def test_a_rule_without_threshold_escalates_everything():
    rule = SelectiveRule(threshold=None, n=50, n_trusted=0, agreement=None, p_value=None)
    sel = Selective(agreement=0.9, delta=0.1, tolerance=1.0, confidence="mass", scale=VALUES, calibration="x",
                    pointwise={POOLED: rule})  # fmt: skip
    assert sel.trusted("overall", [0, 0, 0, 1, 0, 0, 0], 3.0) is False
    assert sel.trusted_pair("overall", 0.99) is None  # no pairwise thresholds fitted


def test_pointwise_data_is_agreement_within_the_tolerance():
    data = judged(40, 4)
    cal = fit_calibration(data, VALUES, min_items=1000)
    rows = pointwise_data(data[:10], cal, 0.5, "spread")
    for (crit, conf, ok), s in zip(rows, data[:10], strict=True):
        v = cal.apply(s.criterion, s.raw, s.distribution)
        assert crit == s.criterion and ok == (abs(v.score - s.human) <= 0.5)
        assert conf == pytest.approx(-np.sqrt(np.dot(v.distribution, (np.arange(7) - v.score) ** 2)))
